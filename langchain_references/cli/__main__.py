"""``python -m langchain_references.cli``: the same as the ``langchain-references`` command."""

from langchain_references.cli import main

raise SystemExit(main())
