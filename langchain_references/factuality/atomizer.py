"""Split a long-form response into atomic facts with an LLM (structured output).

In the spirit of FActScore (Min et al., 2023) and FactReasoner's atomizer: an *atom* is a short
statement carrying one piece of information that can be checked on its own. The response is
untrusted data: it goes into a ``<response>`` block built with
:func:`~langchain_references.core.prompting.delimit`, and the system prompt says that
block content is data.

The reply is requested with ``llm.with_structured_output(AtomicClaims, include_raw=True)``.
**Errors**: a reply that does not validate (no tool call, bad JSON, wrong types) raises
:class:`AtomizerError` with the reason; the factuality pipeline catches it and records the
failure for that response, so a batch goes on. A valid reply with no claims gives no atoms
(the response stated nothing checkable). Transient errors (timeouts, rate limits) are retried.
The call and its reading are :class:`~langchain_references.services._structured.StructuredCall`,
shared with :mod:`~langchain_references.factuality.reviser` and the LLM judge.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, TypeAlias, Unpack

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, Field

from langchain_references.core.prompting import data_prompt, delimit
from langchain_references.errors import LangchainReferencesError
from langchain_references.factuality.model import Atom
from langchain_references.services._structured import StructuredCaller, StructuredCallOptions

__all__ = [
    "DEFAULT_ATOMIZER_PROMPT",
    "AtomicClaims",
    "Atomizer",
    "AtomizerError",
    "AtomizerInput",
]

logger = logging.getLogger(__name__)

AtomizerInput: TypeAlias = str | Mapping[str, Any]
"""A response string, or ``{"response": str, "topic": str (optional)}``."""

_TAGS: Final = ("topic", "response")

_INSTRUCTIONS: Final = (
    "You break a response into atomic facts. An atomic fact is a short sentence that states "
    "exactly one piece of information (one subject, one property or relation, one value) and "
    "can be checked true or false on its own.\n"
    "Rules:\n"
    "- Cover every factual claim of the response, in order. Leave out questions, greetings, "
    "opinions without factual content, and remarks about the answer itself.\n"
    "- Split lists and conjunctions: 'X starred in A and B' gives 'X starred in A.' and "
    "'X starred in B.'\n"
    "- Stay faithful to the response: do not add, correct or complete information, and do "
    "not judge whether a fact is true.\n"
    "- Write each fact as a full sentence that names its subject as the response does.\n"
    "Example: 'Marie Curie, a Polish-born physicist, won two Nobel Prizes.' gives "
    "'Marie Curie was a physicist.', 'Marie Curie was born in Poland.', "
    "'Marie Curie won two Nobel Prizes.'"
)

#: Default prompt; ``topic`` and ``response`` receive delimited blocks.
DEFAULT_ATOMIZER_PROMPT: Final = data_prompt(
    _INSTRUCTIONS, "Answer with the AtomicClaims tool.", "{topic}{response}"
)


class AtomicClaims(BaseModel):
    """The atomic facts stated in the response, in the order they appear."""

    claims: list[str] = Field(
        description="One atomic fact per item, each a short self-contained sentence"
    )


class AtomizerError(LangchainReferencesError, RuntimeError):
    """The model's reply could not be read as a list of atomic facts."""


def _coerce(value: object) -> tuple[str, str | None]:
    response: object
    topic: object
    if isinstance(value, str):
        response, topic = value, None
    elif isinstance(value, Mapping):
        response, topic = value.get("response"), value.get("topic")
    else:
        raise TypeError(
            f"the atomizer takes a response string or a mapping, not {type(value).__name__}"
        )
    if not isinstance(response, str) or not response.strip():
        raise ValueError("the response to atomize must be a non-blank string")
    if topic is not None and not isinstance(topic, str):
        raise ValueError("'topic' must be a string")
    return response, topic


class Atomizer(StructuredCaller[AtomicClaims], Runnable[AtomizerInput, tuple[Atom, ...]]):
    """Split a response into atomic facts with a chat model.

    The output atoms have ids ``a0``, ``a1``... (``id_prefix`` + position) and
    ``original == text``; :class:`~langchain_references.factuality.reviser.Reviser` then
    makes them self-contained.

    Args:
        llm: A chat model that supports ``with_structured_output`` (tool calling).
        prompt: A prompt with variables ``topic`` and ``response`` (delimited blocks; the
            topic block is empty when no topic is given).
        max_atoms: Keep at most this many atoms (the rest are dropped with a warning).
        id_prefix: Prefix of the atom ids.
        **options: Retries and structured output
            (:class:`~langchain_references.services._structured.StructuredCallOptions`).

    Raises:
        TypeError: If ``llm`` is not a chat model.
        ValueError: If the prompt lacks a variable, ``max_atoms`` or ``max_attempts`` < 1.

    Examples:
        >>> atoms = Atomizer(llm).invoke("Paris, the capital of France, ...")  # doctest: +SKIP
        >>> [a.text for a in atoms]  # doctest: +SKIP
        ['Paris is the capital of France.', ...]
    """

    def __init__(
        self,
        llm: BaseChatModel,
        *,
        prompt: ChatPromptTemplate | None = None,
        max_atoms: int | None = None,
        id_prefix: str = "a",
        **options: Unpack[StructuredCallOptions],
    ) -> None:
        if max_atoms is not None and max_atoms < 1:
            raise ValueError(f"max_atoms must be >= 1, got {max_atoms}")
        if not id_prefix:
            raise ValueError("id_prefix must be non-empty")
        self._open_call(llm, AtomicClaims, prompt, DEFAULT_ATOMIZER_PROMPT, _TAGS, options)
        self.max_atoms = max_atoms
        self.id_prefix = id_prefix

    @property
    def InputType(self) -> type[str]:  # noqa: N802 - Runnable API name
        """The input type (a response string or a mapping)."""
        return str

    @property
    def OutputType(self) -> type[tuple[Atom, ...]]:  # noqa: N802 - Runnable API name
        """The output type."""
        return tuple[Atom, ...]

    def invoke(
        self, input: AtomizerInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> tuple[Atom, ...]:
        """Split a response into atoms.

        Args:
            input: The response, or ``{"response": ..., "topic": ...}``.
            config: Runnable config.
            **kwargs: Ignored.

        Returns:
            The atoms, in response order.

        Raises:
            TypeError: If the input is neither a string nor a mapping.
            ValueError: If the response is blank.
            AtomizerError: If the model's reply is malformed.
        """
        return self._call_with_config(self._run, input, config)

    async def ainvoke(
        self, input: AtomizerInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> tuple[Atom, ...]:
        """Async :meth:`invoke`: same arguments, result and errors."""
        return await self._acall_with_config(self._arun, input, config)

    def _inputs(self, value: AtomizerInput) -> dict[str, str]:
        response, topic = _coerce(value)
        return {
            "topic": delimit("topic", topic, reserved=_TAGS) + "\n\n" if topic else "",
            "response": delimit("response", response, reserved=_TAGS),
        }

    def _atoms(self, output: Any) -> tuple[Atom, ...]:
        reply = self._call.read(output)
        if isinstance(reply, str):
            logger.warning("atomizer: %s", reply)
            raise AtomizerError(reply)
        claims = [" ".join(c.split()) for c in reply.claims if isinstance(c, str) and c.strip()]
        if self.max_atoms is not None and len(claims) > self.max_atoms:
            logger.warning("atomizer: keeping %d of %d atoms", self.max_atoms, len(claims))
            claims = claims[: self.max_atoms]
        return tuple(
            Atom(id=f"{self.id_prefix}{i}", text=c, original=c) for i, c in enumerate(claims)
        )

    def _run(
        self,
        input: AtomizerInput,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> tuple[Atom, ...]:
        return self._atoms(self._call.runnable.invoke(self._inputs(input), config))

    async def _arun(
        self,
        input: AtomizerInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> tuple[Atom, ...]:
        return self._atoms(await self._call.runnable.ainvoke(self._inputs(input), config))
