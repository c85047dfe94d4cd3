"""Make atomic facts self-contained (decontextualise them) with an LLM.

An atom such as "He was born in 1949." cannot be checked without the response it came from.
Like FactReasoner's reviser, :class:`Reviser` asks a chat model to replace pronouns,
demonstratives, vague references ("the film") and partial names ("Jeff") with the entity the
response refers to, changing nothing else. The revised text becomes :attr:`Atom.text`; the
text before revision is kept in :attr:`Atom.original` (FactReasoner's ``original``).

The response and the atoms are untrusted: they go into delimited ``<response>`` and
``<atoms>`` blocks. Atoms are sent in chunks of ``chunk_size``, one structured call per chunk
(``RevisedAtoms``: a list of ``{id, text}``), aligned with the input **by id**.

**Errors never lose atoms**: an atom missing from the reply, or with a blank revision, keeps
its text and is listed in :attr:`RevisionResult.unrevised`; a malformed reply or a failed call
keeps the whole chunk unrevised and records the reason in :attr:`RevisionResult.errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, Unpack

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, Field

from langchain_references.core.prompting import data_prompt, delimit
from langchain_references.factuality.model import Atom
from langchain_references.judges.base import paired_outputs
from langchain_references.services._concurrency import check_concurrency, with_default_concurrency
from langchain_references.services._structured import StructuredCaller, StructuredCallOptions

__all__ = [
    "DEFAULT_REVISER_PROMPT",
    "RevisedAtom",
    "RevisedAtoms",
    "Reviser",
    "ReviserInput",
    "RevisionResult",
]

logger = logging.getLogger(__name__)

ReviserInput: TypeAlias = Mapping[str, Any]
"""``{"response": str, "atoms": Sequence[Atom], "topic": str (optional)}``."""

_TAGS: Final = ("topic", "response", "atoms")

_INSTRUCTIONS: Final = (
    "You make atomic facts self-contained. Each fact in the <atoms> block, written "
    "'[id] text', was extracted from the response in the <response> block. Rewrite each fact "
    "so that it can be understood without the response: replace pronouns (he, she, it, they, "
    "his, their...), demonstratives (this, that, these), vague references ('the film', 'the "
    "company') and partial names ('Jeff') with the full name of the entity the response "
    "refers to. Change nothing else: do not add, remove or correct information. Return a "
    "fact that is already self-contained unchanged.\n"
    "Example: with the response 'Lanny Flaherty is an actor. He was born in 1949.', the fact "
    "'[a1] He was born in 1949.' becomes 'Lanny Flaherty was born in 1949.'"
)

#: Default prompt; ``topic``, ``response`` and ``atoms`` receive delimited blocks.
DEFAULT_REVISER_PROMPT: Final = data_prompt(
    _INSTRUCTIONS,
    "Answer with the RevisedAtoms tool: every fact, with its id.",
    "{topic}{response}\n\n{atoms}",
)


class RevisedAtom(BaseModel):
    """One revised fact."""

    id: str = Field(description="The id of the fact, exactly as given")
    text: str = Field(description="The self-contained fact")


class RevisedAtoms(BaseModel):
    """The revised facts, one per input fact."""

    atoms: list[RevisedAtom] = Field(description="Every input fact, revised, with its id")


@dataclass(frozen=True)
class RevisionResult:
    """Atoms after revision.

    Attributes:
        atoms: The atoms, in input order; revised ones have the new ``text`` and the old one
            in ``original``.
        unrevised: Ids of the atoms kept as they were (missing or blank in the reply, or in
            a chunk whose call failed).
        errors: Why chunks failed, if any did.
    """

    atoms: tuple[Atom, ...]
    unrevised: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


def _coerce(value: object) -> tuple[str, tuple[Atom, ...], str | None]:
    if not isinstance(value, Mapping):
        raise TypeError(f"the reviser takes a mapping, not {type(value).__name__}")
    response, atoms, topic = value.get("response"), value.get("atoms"), value.get("topic")
    if not isinstance(response, str):
        raise ValueError("'response' must be a string")
    if not isinstance(atoms, Sequence) or not all(isinstance(a, Atom) for a in atoms):
        raise ValueError("'atoms' must be a sequence of Atom")
    if topic is not None and not isinstance(topic, str):
        raise ValueError("'topic' must be a string")
    return response, tuple(atoms), topic


def _revise(atom: Atom, text: str) -> Atom:
    return Atom(
        id=atom.id,
        text=text,
        original=atom.original if atom.original is not None else atom.text,
        label=atom.label,
        contexts=atom.contexts,
    )


class Reviser(StructuredCaller[RevisedAtoms], Runnable[ReviserInput, RevisionResult]):
    """Decontextualise atoms with a chat model (see module docstring).

    Args:
        llm: A chat model that supports ``with_structured_output``.
        prompt: A prompt with variables ``topic``, ``response`` and ``atoms``.
        chunk_size: Atoms per model call.
        max_concurrency: Parallel calls when there are several chunks (unless the config
            sets ``max_concurrency``).
        **options: Retries and structured output
            (:class:`~langchain_references.services._structured.StructuredCallOptions`).

    Raises:
        TypeError: If ``llm`` is not a chat model.
        ValueError: If the prompt lacks a variable or a bound is not positive.
    """

    def __init__(
        self,
        llm: BaseChatModel,
        *,
        prompt: ChatPromptTemplate | None = None,
        chunk_size: int = 25,
        max_concurrency: int | None = 4,
        **options: Unpack[StructuredCallOptions],
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self._open_call(llm, RevisedAtoms, prompt, DEFAULT_REVISER_PROMPT, _TAGS, options)
        self.chunk_size = chunk_size
        self.max_concurrency = check_concurrency(max_concurrency)
        # One call per chunk, each with its own retries: batching the chain itself would let
        # one chunk's non-transient error fail every chunk of the batch (RunnableRetry.batch).
        chain = self._call.runnable
        self._per_chunk: Runnable[dict[str, str], Any] = RunnableLambda(
            chain.invoke, afunc=chain.ainvoke, name="revise_chunk"
        )

    @property
    def OutputType(self) -> type[RevisionResult]:  # noqa: N802 - Runnable API name
        """The output type."""
        return RevisionResult

    def invoke(
        self, input: ReviserInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> RevisionResult:
        """Revise atoms.

        Args:
            input: ``{"response": str, "atoms": [Atom, ...], "topic": str (optional)}``.
            config: Runnable config.
            **kwargs: Ignored.

        Returns:
            The revised atoms; failures are recorded, not raised.

        Raises:
            TypeError: If the input is not a mapping.
            ValueError: If a field is missing or mistyped.
        """
        return self._call_with_config(self._run, input, config)

    async def ainvoke(
        self, input: ReviserInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> RevisionResult:
        """Async :meth:`invoke`: same arguments, result and errors."""
        return await self._acall_with_config(self._arun, input, config)

    # ------------------------------------------------------------------ internals
    # The sync and async paths share the plan (chunks and their prompts) and the merge; they
    # differ only in ``batch`` / ``abatch``. No atoms: an empty batch, no model call.

    def _plan(
        self, value: ReviserInput, config: RunnableConfig
    ) -> tuple[list[tuple[Atom, ...]], list[dict[str, str]], RunnableConfig]:
        """The chunks of atoms, the prompt inputs of their calls and the batch config."""
        response, atoms, topic = _coerce(value)
        size = self.chunk_size
        chunks = [atoms[i : i + size] for i in range(0, len(atoms), size)]
        requests = [self._prompt_inputs(response, c, topic) for c in chunks]
        return chunks, requests, with_default_concurrency(config, self.max_concurrency)

    def _prompt_inputs(
        self, response: str, chunk: Sequence[Atom], topic: str | None
    ) -> dict[str, str]:
        listing = "\n".join(f"[{a.id}] {' '.join(a.text.split())}" for a in chunk)
        return {
            "topic": delimit("topic", topic, reserved=_TAGS) + "\n\n" if topic else "",
            "response": delimit("response", response, reserved=_TAGS),
            "atoms": delimit("atoms", listing, reserved=_TAGS),
        }

    def _merge(self, chunks: Sequence[tuple[Atom, ...]], outputs: Sequence[Any]) -> RevisionResult:
        """Align each chunk's reply with its atoms by id; a failed chunk stays unrevised."""
        atoms: list[Atom] = []
        unrevised: list[str] = []
        errors: list[str] = []
        # Ctrl-C or a cancellation stops (paired_outputs raises it): not a failed chunk
        for chunk, output in paired_outputs(chunks, outputs):
            if isinstance(output, Exception):
                reply: RevisedAtoms | str = f"{type(output).__name__}: {output}"
            else:
                reply = self._call.read(output)
            if isinstance(reply, str):
                logger.warning("reviser: %s", reply)
                errors.append(reply)
                atoms.extend(chunk)
                unrevised.extend(a.id for a in chunk)
                continue
            by_id: dict[str, str] = {}
            for item in reply.atoms:
                text = " ".join(item.text.split())
                if text:
                    by_id.setdefault(item.id.strip().strip("[]"), text)
            unknown = set(by_id) - {a.id for a in chunk}
            if unknown:
                logger.warning("reviser: ignoring unknown atom ids %s", sorted(unknown))
            for atom in chunk:
                if atom.id in by_id:
                    atoms.append(_revise(atom, by_id[atom.id]))
                else:
                    atoms.append(atom)
                    unrevised.append(atom.id)
        if unrevised:
            logger.info("reviser: %d atom(s) left unrevised", len(unrevised))
        return RevisionResult(tuple(atoms), tuple(unrevised), tuple(errors))

    def _run(
        self, input: ReviserInput, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> RevisionResult:
        chunks, requests, limited = self._plan(input, config)
        return self._merge(chunks, self._per_chunk.batch(requests, limited, return_exceptions=True))

    async def _arun(
        self,
        input: ReviserInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> RevisionResult:
        chunks, requests, limited = self._plan(input, config)
        outputs = await self._per_chunk.abatch(requests, limited, return_exceptions=True)
        return self._merge(chunks, outputs)
