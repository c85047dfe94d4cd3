"""The parsers of the commands: their options, help texts and nothing heavy.

One module per command, each with ``HELP``, ``DESCRIPTION``, ``configure_parser(parser)``
(``index``: ``add_parser(subparsers)``), ``run`` (a
:class:`~langchain_references.cli._commands.LazyCommand`) and ``REQUIRES``, the optional packages
the command imports when it loads. :func:`langchain_references.cli.build_parser` builds the
whole command line from these modules alone, so ``--version``, ``--help`` and every command's
``--help`` load no judge, model, embeddings, tracer or engine; the command modules
(:mod:`langchain_references.cli.factcheck`...) import their options from here (one definition
of each) and are imported when the command runs.
"""
