"""What every request handler of the service shares, built once at start-up.

The handlers read them with the FastAPI dependency :func:`get_services`; nothing here holds
per-user state, and each member is safe to use from several threads and event loops at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, TypeAlias

from fastapi import Depends, Request

from langchain_references.errors import LangchainReferencesError
from langchain_references.judges.base import JudgeInfo, judge_info
from langchain_references.server.index import EvidenceHit, EvidenceIndex
from langchain_references.server.live import LiveIndex
from langchain_references.server.settings import ServerSettings

if TYPE_CHECKING:
    from langchain_references.factcheck.search import SearchProvider
    from langchain_references.judges import Judge

__all__ = ["EvidenceHit", "Services", "ServicesDep", "ServicesNotConfiguredError", "get_services"]


class ServicesNotConfiguredError(LangchainReferencesError, RuntimeError):
    """The application was created without its :class:`Services` (a programming error)."""


@dataclass(frozen=True)
class Services:
    """The shared, read-only members of a running service.

    Attributes:
        settings: The server's settings (limits, auth, index location).
        index: The evidence index: ``search(query, *, granularity, k)`` and
            ``await asearch(...)`` return :class:`EvidenceHit` objects, best first.
            :func:`~langchain_references.server.app.create_app` wraps an
            :class:`EvidenceIndex` in a :class:`LiveIndex`, which follows the index to the
            generation a new build switches it to.
        judge: The judge that labels (claim, evidence) pairs (the offline judge by default).
        search: The web search back-end of ``/v1/factcheck``, chosen at start-up; ``None``
            means the evidence index is the only source.
    """

    settings: ServerSettings
    index: EvidenceIndex | LiveIndex
    judge: Judge
    search: SearchProvider | None = None

    @property
    def judge_info(self) -> JudgeInfo:
        """Which judge the service runs (kind, model, description), as its answers name it."""
        return judge_info(self.judge)


def get_services(request: Request) -> Services:
    """FastAPI dependency: the :class:`Services` of the application serving ``request``.

    Args:
        request: The current request.

    Returns:
        ``request.app.state.services``.

    Raises:
        ServicesNotConfiguredError: If the application has no services (not built by
            :func:`~langchain_references.server.app.create_app`).
    """
    services = getattr(request.app.state, "services", None)
    if not isinstance(services, Services):
        raise ServicesNotConfiguredError("the application has no Services; use create_app()")
    return services


#: A handler's parameter that receives the :class:`Services` (``services: ServicesDep``).
ServicesDep: TypeAlias = Annotated[Services, Depends(get_services)]
