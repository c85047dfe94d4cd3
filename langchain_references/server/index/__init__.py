"""The evidence index: corpus records as Chroma entries, at two granularities, built and searched.

Each corpus record becomes one ``abstract`` entry and one ``phrase`` entry per sentence
(:func:`parse_evidence_record`). An :class:`EvidenceIndex` is built atomically, into a new
generation switched to when complete (:meth:`EvidenceIndex.build`), opened on its current
generation (:meth:`EvidenceIndex.open`), updated in place (:meth:`EvidenceIndex.add_records`)
and searched in a retrieval mode, dense, BM25 or hybrid (:meth:`EvidenceIndex.search`); a hit's
``similarity`` is ``(cosine + 1) / 2``. Vectors come from any LangChain
:class:`~langchain_core.embeddings.Embeddings` (the offline MiniLM by default); the index never
asks Chroma to embed.

One module per job:

* :mod:`~langchain_references.server.index.records`: records validated, and their entries
  (the bibliography fields read by :mod:`~langchain_references.server.index.fields`);
* :mod:`~langchain_references.server.index.embeddings_spec`: the embeddings named by a spec;
* :mod:`~langchain_references.server.index.chroma`: clients, collections, the batch limit;
* :mod:`~langchain_references.server.index.generations`: generations and the pointer;
* :mod:`~langchain_references.server.index.writing`: entries embedded and written (and
  :mod:`~langchain_references.server.index.ray_writer`, the same on Ray actors);
* :mod:`~langchain_references.server.index.snapshot`: the BM25 indexes and the snapshot of
  their entries;
* :mod:`~langchain_references.server.index.search`: the dense, BM25 and hybrid rankings;
* :mod:`~langchain_references.server.index.hits`: the hits of a ranking, with their cosine;
* :mod:`~langchain_references.server.index.evidence_index`: :class:`EvidenceIndex`, which puts
  them together;
* :mod:`~langchain_references.server.index.errors`: the errors.
"""

from langchain_references.server.index.embeddings_spec import load_embeddings
from langchain_references.server.index.errors import (
    EvidenceIndexError,
    IncompleteIndexError,
    IndexBuildError,
    IndexNotFoundError,
)
from langchain_references.server.index.evidence_index import BuildResult, EvidenceIndex
from langchain_references.server.index.fields import Bibliography
from langchain_references.server.index.generations import GENERATION_SEPARATOR
from langchain_references.server.index.hits import EvidenceHit
from langchain_references.server.index.records import (
    EvidenceRecord,
    Granularity,
    parse_evidence_record,
    split_sentences,
)
from langchain_references.server.index.search import FUSION_DEPTH
from langchain_references.server.settings import MAX_RECORD_CHARS

__all__ = [
    "FUSION_DEPTH",
    "GENERATION_SEPARATOR",
    "MAX_RECORD_CHARS",
    "Bibliography",
    "BuildResult",
    "EvidenceHit",
    "EvidenceIndex",
    "EvidenceIndexError",
    "EvidenceRecord",
    "Granularity",
    "IncompleteIndexError",
    "IndexBuildError",
    "IndexNotFoundError",
    "load_embeddings",
    "parse_evidence_record",
    "split_sentences",
]
