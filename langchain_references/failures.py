"""One record for everything that went wrong with one item while the run went on.

A dead URL, a failed search, a page with no text, a judge that raised, an atom with no
context: each stage reports a :class:`Failure` for that item and the other items go on.
The fact-check result, the factuality result and the retrievers all use this one type.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["Failure"]


class Failure(BaseModel):
    """Something that could not be used, with the reason; the run went on without it.

    Attributes:
        stage: The stage it failed at (``"search"``, ``"fetch"``, ``"extract"``,
            ``"passages"``, ``"relevance"``, ``"judge"``, ``"atomize"``, ``"revise"``,
            ``"retrieve"``...).
        reason: Short human-readable reason, e.g. ``"HTTP 404"`` or ``"timeout after 10.0s"``.
        url: The URL of the source, if the failure concerns one (empty otherwise).
        item: What else it concerns, if anything: an atom id, a pair ``"c_a0_1->a0"``.
        rank: Search rank of the source, if known.
        query: The search query, for failures at the ``"search"`` stage.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    reason: str
    url: str = ""
    item: str | None = None
    rank: int | None = None
    query: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``None`` fields left out)."""
        return self.model_dump(exclude_none=True)
