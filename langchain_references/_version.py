"""The installed version of this project (``langchain_references.__version__``).

A module of its own, loaded on first access: :mod:`importlib.metadata` is a good part of the
package's import time, and ``langchain-references --help`` does not need it.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["__version__"]

try:
    __version__: str = importlib.metadata.version("langchain-references")
except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0+unknown"
