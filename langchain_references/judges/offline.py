"""The offline default judge: what runs when no model is configured."""

from __future__ import annotations

import logging

from langchain_core.embeddings import Embeddings

from langchain_references.judges.heuristic import HeuristicJudge

__all__ = ["offline_judge"]

logger = logging.getLogger(__name__)


def offline_judge(*, use_embeddings: bool = True) -> HeuristicJudge:
    """The offline baseline judge: :class:`HeuristicJudge`, with MiniLM embeddings if possible.

    It is weak (a lexical / embedding heuristic, not an NLI model): use an LLM judge for
    real assessments.

    Args:
        use_embeddings: Try the offline all-MiniLM-L6-v2 embeddings (the process's one
            instance, :func:`~langchain_references.services.embeddings.shared_minilm`); falls back
            to the lexical-only heuristic (with a warning) when they cannot be loaded.

    Returns:
        The judge.
    """
    embeddings: Embeddings | None = None
    if use_embeddings:
        try:
            from langchain_references.services.embeddings import shared_minilm

            candidate = shared_minilm()  # the process's one model, not a second copy
            candidate.embed_query("probe")  # load (and verify) the model now
            embeddings = candidate
        except Exception as exc:  # any load failure: fall back to the lexical heuristic
            logger.warning("MiniLM embeddings unavailable (%s); lexical heuristic only", exc)
    # Texts are embedded once per chunk of ``batch_size`` pairs: one large chunk embeds each
    # (long, repeated) context once instead of once per chunk.
    return HeuristicJudge(embeddings, batch_size=4096)
