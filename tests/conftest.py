"""How ``make unit`` shares the tests between two processes (``pytest -n 2 --dist loadgroup``).

pytest-xdist sends the tests one at a time to whichever process is free, except the *Ray
tests*: they go to one process together, one after another, so that a single local Ray serves
them all (``local_ray`` in ``tests/unit_tests/conftest.py``, each start costs seconds) and two
Rays never share the machine's cores.

The group is chosen here, by node id, and not by ``@pytest.mark.xdist_group``: xdist passes that
mark's group to the scheduler by appending it to the node id, which pytest 9.2 no longer lets a
plugin do (pytest-dev/pytest-xdist#1386: the mark is silently ignored). Other ``xdist_group``
marks keep their meaning where xdist can read them.
"""

from __future__ import annotations

from typing import Any

import pytest

RAY_GROUP = "ray"

#: The Ray tests: node ids, or their beginnings (a module's, ending in ``::``).
RAY_TESTS: tuple[str, ...] = (
    "tests/unit_tests/cli/test_quiet_output.py::test_factcheck_on_ray_json_is_results_only",
    "tests/unit_tests/cli/test_ray_engine.py::",
    "tests/unit_tests/core/test_engine.py::",
    "tests/unit_tests/server/test_index_ray.py::",
)


def in_ray_group(nodeid: str) -> bool:
    """Whether the test of ``nodeid`` is one of the Ray tests."""
    return nodeid.startswith(RAY_TESTS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``: xdist's scheduler, with the Ray tests as one group."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class RayTestsTogether(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if in_ray_group(nodeid):
                return RAY_GROUP
            return str(super()._split_scope(nodeid))

    return RayTestsTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Ray tests are slow (a local Ray, actors): ``make unit-fast`` and mutmut skip them.

    ``make test`` and CI run them (``-m "not slow"`` is only the quick loop's filter).
    """
    for item in items:
        if in_ray_group(item.nodeid):
            item.add_marker(pytest.mark.slow)
