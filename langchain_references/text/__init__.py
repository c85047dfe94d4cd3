"""The package's text rules, sans-IO: one sentence-end rule and one tokenizer.

* :mod:`~langchain_references.text.sentences`: where a sentence ends (the rule, its characters,
  the named variants of its readers and pysbd's input bound);
* :mod:`~langchain_references.text.words`: the word tokenizer and the stop-word lists of the
  judges, retrieval, the local search and the demo.

They sit below both the citation core (:mod:`langchain_references.core`) and the shared
services (:mod:`langchain_references.services`), which both read words and sentences.
"""
