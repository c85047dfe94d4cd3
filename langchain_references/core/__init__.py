"""The streaming-citation core: sans-IO, no network, no files, no LangChain runnables.

Everything that decides what the reader sees of an answer's citations, fed text and returning
text, in layers (each imports only from those below it; ``make lint`` checks it):

* :mod:`~langchain_references.core.rewriter`: one answer's citations renumbered and restyled
  while it streams (built on all the others);
* :mod:`~langchain_references.core.numbering`: numbers by first use, one per source;
  :mod:`~langchain_references.core._code`: Markdown code spans and fences, passed as text;
* :mod:`~langchain_references.core.styles`: the reference styles;
  :mod:`~langchain_references.core.prompting`: the instruction and document format the model
  is shown;
* :mod:`~langchain_references.core.deeplinks`: text-fragment links to a cited sentence;
  :mod:`~langchain_references.core._parser`: the citation dialects, read from any split of the
  text.

The runnable, chat model and middleware that drive it (``manager``, ``chat_model``,
``middleware``) live in the package root; the public names are exported there.
"""
