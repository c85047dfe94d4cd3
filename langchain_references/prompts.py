"""Prompt text that asks a model to cite the documents it was given."""

from __future__ import annotations

from typing import Final

__all__ = ["FORMAT_REFERENCES"]

#: Instruction to put in a prompt so that the model cites documents as ``[n](id=k)``.
FORMAT_REFERENCES: Final = (
    "When referencing the documents, add a citation right after. "
    'Use "[NUMBER](id=ID_NUMBER)" for the citation '
    '(e.g. "The Space Needle is in Seattle [1](id=55)[2](id=12).").'
)
