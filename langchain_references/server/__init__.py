"""The evidence service (extra ``[server]``): an evidence index and a FastAPI application.

``langchain-references index build`` fills an :class:`EvidenceIndex`;
``langchain-references serve`` runs :func:`create_app` with uvicorn. The application speaks the
climate evidence API (``/api/{abstract|phrase}/{evidence|verify}[/batch]``, ``/api/split``,
``/healthcheck``) so that its clients work unchanged.

Names load on first use; a missing FastAPI raises an error naming the ``server`` extra.
"""

from typing import TYPE_CHECKING

from langchain_references._optional import lazy_exports

if TYPE_CHECKING:
    from langchain_references.server.app import create_app
    from langchain_references.server.index import (
        EvidenceHit,
        EvidenceIndex,
        EvidenceIndexError,
        EvidenceRecord,
    )
    from langchain_references.server.services import Services, get_services
    from langchain_references.server.settings import ServerSettings

__all__ = [
    "EvidenceHit",
    "EvidenceIndex",
    "EvidenceIndexError",
    "EvidenceRecord",
    "ServerSettings",
    "Services",
    "create_app",
    "get_services",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "create_app": "app",
        "EvidenceHit": "index",
        "EvidenceIndex": "index",
        "EvidenceIndexError": "index",
        "EvidenceRecord": "index",
        "Services": "services",
        "get_services": "services",
        "ServerSettings": "settings",
    },
)
