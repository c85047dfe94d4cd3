"""Run a Runnable over many items, in this process or on Ray Data actor pools (public module).

The implementation is :mod:`langchain_references.services.engine`; this module is its public
name, kept for ``from langchain_references.engine import ...``.
"""

from langchain_references.services.engine import (
    DEFAULT_ENGINE,
    ENGINES,
    Engine,
    RayLimiterBackend,
    RayOptions,
    RunnableWorker,
    WorkerSetupError,
    apply_runnable,
    map_runnable,
    ray_session,
    to_json,
)

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Engine",
    "RayLimiterBackend",
    "RayOptions",
    "RunnableWorker",
    "WorkerSetupError",
    "apply_runnable",
    "map_runnable",
    "ray_session",
    "to_json",
]
