"""The native endpoints of the service: what this project adds to the climate evidence API.

* ``POST /v1/factcheck`` (:mod:`~langchain_references.server.factcheck_api`): a statement ->
  the fact-check result;
* ``POST /v1/article`` (:mod:`~langchain_references.server.article`): an article's text or
  URL -> its claims, each with a verdict and numbered passages;
* ``POST /v1/answer`` (:mod:`~langchain_references.server.answer`): a question -> a cited
  answer over the index.

Each answers one JSON document, or server-sent events with ``Accept: text/event-stream``
(:mod:`~langchain_references.server.events`). :func:`~langchain_references.server.app.create_app`
includes :data:`router`.
"""

from __future__ import annotations

from fastapi import APIRouter

from langchain_references.server import answer, article, factcheck_api

__all__ = ["router"]

#: The three native endpoints.
router = APIRouter()
router.include_router(factcheck_api.router)
router.include_router(article.router)
router.include_router(answer.router)
