"""Run a Runnable over many items, in this process or on Ray Data actor pools (public module).

The implementation is :mod:`langchain_references.services.engine`; this module is its public
name, kept for ``from langchain_references.engine import ...``.
"""

from langchain_references.services.engine import *  # noqa: F403 (the public names, __all__)
from langchain_references.services.engine import __all__ as __all__
