"""Imported by isolation workers at start (``preload``): records the worker's niceness then."""

from __future__ import annotations

import os

NICENESS_AT_IMPORT = os.nice(0)
