"""Chat models, their API keys, and the judges of ``--judge``.

Credentials: :func:`load_chat_model` checks a provider's API key variable
(:data:`API_KEY_VARIABLES`) before loading the model, so that a missing key is one ``error:``
line naming the variable, not a traceback from the first call. :func:`build_judge` builds the
judge of ``--judge`` (its modules imported only then: ``--help`` loads no judge).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, Final, TextIO

from langchain_references._optional import MissingDependencyError, require
from langchain_references.cli._args import DeprecatedAlias, positive_int
from langchain_references.cli._errors import CLIError
from langchain_references.services.ratelimit import RateLimiter

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langchain_references.judges.base import Judge

__all__ = [
    "API_KEY_VARIABLES",
    "HEURISTIC_NOTICE",
    "add_judge_options",
    "build_judge",
    "check_api_key",
    "load_chat_model",
]

#: What ``--judge heuristic`` / ``heuristic-lexical`` says on stderr (``{emb}``: embeddings).
HEURISTIC_NOTICE: Final = (
    "judge: HeuristicJudge (offline word-overlap{emb} heuristic; weak, not an NLI model). "
    "Pass --judge llm:PROVIDER:MODEL for an LLM judge, or --judge nli:MODEL for an NLI model."
)


#: The environment variables that hold each chat-model provider's API key, by
#: ``init_chat_model`` provider name (the first is the one named in messages; any one will do).
API_KEY_VARIABLES: Final[dict[str, tuple[str, ...]]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "cohere": ("COHERE_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "mistralai": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
}

#: Model name prefixes ``init_chat_model`` reads as a provider when the name has none.
_INFERRED_PROVIDERS: Final = (
    (("gpt-", "o1", "o3", "o4", "chatgpt"), "openai"),
    (("claude",), "anthropic"),
    (("command",), "cohere"),
    (("mistral",), "mistralai"),
    (("deepseek",), "deepseek"),
    (("grok",), "xai"),
    (("sonar",), "perplexity"),
)


def _provider(name: str) -> str | None:
    """The provider of ``provider:model`` (or inferred from a bare model name), if known."""
    prefix, colon, _ = name.partition(":")
    if colon and prefix in API_KEY_VARIABLES:
        return prefix
    for prefixes, provider in _INFERRED_PROVIDERS:
        if name.startswith(prefixes):
            return provider
    return None


def check_api_key(name: str, *, option: str = "--model") -> None:
    """Refuse a chat model whose provider's API key is not in the environment.

    Args:
        name: ``provider:model``, e.g. ``"openai:gpt-4o-mini"``.
        option: The option that named the model, for the message (``"--judge llm:"`` is
            followed by the name without a space).

    Raises:
        CLIError: If the provider is in :data:`API_KEY_VARIABLES` and none of its variables
            is set to a non-blank value; the message names the variable.
    """
    provider = _provider(name)
    if provider is None:
        return
    variables = API_KEY_VARIABLES[provider]
    if any(os.environ.get(variable, "").strip() for variable in variables):
        return
    given = f"{option}{name}" if option.endswith(":") else f"{option} {name}"
    raise CLIError(
        f"{given} needs an API key: set the environment variable {variables[0]} (it is not set)"
    )


def load_chat_model(name: str, *, option: str = "--model", **kwargs: Any) -> BaseChatModel:
    """Load ``provider:model`` with ``langchain.chat_models.init_chat_model``.

    Args:
        name: E.g. ``"openai:gpt-4o-mini"``.
        option: The option that named the model, for error messages.
        **kwargs: Passed to ``init_chat_model`` (e.g. ``temperature=0``).

    Returns:
        The chat model.

    Raises:
        CLIError: If ``langchain`` or the provider package is missing, the provider's API key
            is not set (:func:`check_api_key`) or the name is unknown.
    """
    try:
        # Optional dependency, imported by name: it may be absent (and untyped).
        chat_models = require("langchain.chat_models", "llm", feature=f"{option} {name}")
    except MissingDependencyError as exc:
        raise CLIError(f"{exc} (plus the provider's package, e.g. langchain-openai)") from exc
    check_api_key(name, option=option)
    try:
        model: BaseChatModel = chat_models.init_chat_model(name, **kwargs)
    except (ImportError, ValueError) as exc:
        raise CLIError(f"cannot load {option} {name}: {exc}") from exc
    return model


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--judge SPEC`` (read by :func:`build_judge`) and ``--judge-concurrency N``.

    ``--max-concurrency N``, its old spelling, is accepted with a deprecation warning.

    Args:
        parser: The parser of a command that judges claims against passages.
    """
    parser.add_argument(
        "--judge",
        default="heuristic",
        metavar="SPEC",
        help="heuristic | heuristic-lexical | llm:PROVIDER:MODEL | nli:MODEL (an ONNX "
        "cross-encoder: a local folder or .onnx file, or a Hugging Face Hub id) "
        "(default: heuristic)",
    )
    parser.add_argument(
        "--judge-concurrency",
        dest="max_concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="judge calls in flight (default: 4)",
    )
    parser.add_argument(
        "--max-concurrency",
        action=DeprecatedAlias,
        replacement="--judge-concurrency",
        dest="max_concurrency",
        type=positive_int,
        metavar="N",
    )


def build_judge(
    spec: str, *, err: TextIO | None = None, limiter: RateLimiter | None = None
) -> tuple[Judge, BaseChatModel | None]:
    """Build the judge of ``--judge`` (every command that judges, and ``serve``).

    The spec is read by :func:`~langchain_references.judges.spec.judge_from_spec`; the chat
    model of an LLM judge is loaded by :func:`load_chat_model` (its API key checked first).

    Args:
        spec: ``heuristic`` (offline, MiniLM embeddings), ``heuristic-lexical`` (offline, no
            embeddings), ``llm:PROVIDER:MODEL`` or ``nli:MODEL`` (an ONNX cross-encoder: a
            local folder or ``.onnx`` file, or a Hugging Face Hub id; the ``nli`` extra).
        err: Where to write :data:`HEURISTIC_NOTICE` for a heuristic judge (nowhere if None).
        limiter: Rate limits; an LLM judge's model draws on its ``"judge"`` key (LangChain's
            ``rate_limiter``).

    Returns:
        The judge and, for an LLM judge, its chat model.

    Raises:
        CLIError: On an unknown spec or an unavailable model (a missing package or API key,
            a missing NLI model file, no network for a Hub id).
    """
    # Imported here: parsing the command line (and --help) loads no judge.
    from langchain_references.judges.heuristic import HeuristicJudge
    from langchain_references.judges.nli import NLIModelError
    from langchain_references.judges.spec import NLI_PREFIX, JudgeSpecError, judge_from_spec

    extra: dict[str, Any] = {}
    if limiter is not None and limiter.limit_for("judge") is not None:
        extra["rate_limiter"] = limiter.for_langchain("judge")
    try:
        judge, model = judge_from_spec(
            spec,
            load_model=lambda name: load_chat_model(
                name, option="--judge llm:", temperature=0, **extra
            ),
        )
    except JudgeSpecError as exc:
        raise CLIError(f"--judge {exc}") from exc
    except NLIModelError as exc:
        raise CLIError(f"--judge nli:{exc}") from exc
    except MissingDependencyError as exc:
        if not spec.startswith(NLI_PREFIX):
            raise
        raise CLIError(f"--judge {spec}: {exc}") from exc
    if isinstance(judge, HeuristicJudge) and err is not None:
        emb = " + MiniLM similarity" if judge.embeddings is not None else ""
        err.write(HEURISTIC_NOTICE.format(emb=emb) + "\n")
    return judge, model
