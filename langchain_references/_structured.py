"""One helper for structured LLM calls with retries (shared by the LLM judge and the atomizer)."""

from __future__ import annotations

__all__: list[str] = []
