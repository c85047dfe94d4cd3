"""The shared services: one implementation of each, for every layer above.

* :mod:`~langchain_references.services.engine`: a Runnable over many items, locally or on Ray
  (public as :mod:`langchain_references.engine`), on
  :mod:`~langchain_references.services.ratelimit` (rates shared by threads, tasks and actors);
* :mod:`~langchain_references.services.embeddings`: the offline MiniLM model (public as
  :mod:`langchain_references.embeddings`), :mod:`~langchain_references.services.embedding_cache`
  (each text embedded once), :mod:`~langchain_references.services._vectors` (cosines),
  :mod:`~langchain_references.services._chroma` (the one Chroma client factory),
  :mod:`~langchain_references.services.retrieval` (BM25 and hybrid ranking);
* :mod:`~langchain_references.services.runcache` (results kept between runs),
  :mod:`~langchain_references.services.loading` (``module:factory`` specs),
  :mod:`~langchain_references.services._isolation` (CPU-bound work in worker processes),
  :mod:`~langchain_references.services._endpoint` and
  :mod:`~langchain_references.services._structured` (chat-model endpoints and structured
  output), :mod:`~langchain_references.services._concurrency` (sync/async helpers).

None of them reads or renders citations: the citation core (:mod:`langchain_references.core`)
and the services are independent (``make lint`` checks it).
"""
