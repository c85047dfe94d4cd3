"""The service's settings: where the index is, the request limits, auth and CORS.

:class:`ServerSettings` is built by the ``serve`` command from its options, handed to the
worker processes through environment variables (:meth:`ServerSettings.to_env` /
:meth:`ServerSettings.from_env`: uvicorn starts each worker from an import string, so the
environment is the one channel), and read by
:func:`~langchain_references.server.app.create_app`. The API key itself never goes into the
environment twice: the settings carry the *name* of the variable that holds it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, Final, TypeAlias

from pydantic import AfterValidator

from langchain_references.errors import LangchainReferencesError
from langchain_references.services.retrieval import DEFAULT_RETRIEVAL, Retrieval, check_retrieval

__all__ = [
    "ENV_PREFIX",
    "LOOPBACK_HOSTS",
    "MAX_RECORD_CHARS",
    "LimitExceededError",
    "ServerSettings",
    "SettingsError",
    "Text",
    "default_persist_dir",
]

#: The host names a service answers by default: the loopback ones.
LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")
#: Prefix of the environment variables that carry the settings to the worker processes.
ENV_PREFIX: Final = "LANGCHAIN_REFERENCES_SERVER_"
#: Longest record text (characters) an index build accepts by default: each record is embedded
#: sentence by sentence and returned whole by searches, so its size is the cost of both.
MAX_RECORD_CHARS: Final = 200_000

_INT_LIMITS: Final = (
    "max_body_bytes",
    "max_claims",
    "max_top_k",
    "default_top_k",
    "max_claim_chars",
    "max_article_chars",
    "max_sentences",
    "max_judged",
    "max_request_seconds",
    "max_client_requests",
    "max_client_queue",
    "max_client_threads",
)


class SettingsError(LangchainReferencesError, ValueError):
    """A server setting is missing or out of range."""


class LimitExceededError(LangchainReferencesError, ValueError):
    """A request exceeds one of the service's limits (answered with a 4xx JSON error).

    Attributes:
        limit: The setting that was exceeded (e.g. ``"max_top_k"``).
        maximum: Its value.
        actual: What the request asked for.
        status_code: The HTTP status to answer with (413 for sizes, 400 otherwise).
    """

    def __init__(self, limit: str, maximum: int, actual: int, *, status_code: int = 400) -> None:
        super().__init__(f"{limit} is {maximum}, the request has {actual}")
        self.limit = limit
        self.maximum = maximum
        self.actual = actual
        self.status_code = status_code

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the keyword argument (raised in a CPU worker process, answered here)."""
        return (_limit_exceeded, (self.limit, self.maximum, self.actual, self.status_code))


def _limit_exceeded(limit: str, maximum: int, actual: int, status_code: int) -> LimitExceededError:
    return LimitExceededError(limit, maximum, actual, status_code=status_code)


def _encodable(text: str) -> str:
    """Refuse a string holding a lone surrogate (valid as a JSON escape, but not text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"holds a lone surrogate (U+{ord(text[exc.start]):04X}) at character {exc.start}"
        ) from None
    return text


#: A request field's text: a lone surrogate is a 422 naming the field, not a 500 later.
Text: TypeAlias = Annotated[str, AfterValidator(_encodable)]


def default_persist_dir() -> Path:
    """Where embedded indexes live by default: ``<user data dir>/langchain-references/indexes``.

    Returns:
        The directory (not created).
    """
    import platformdirs

    return Path(platformdirs.user_data_dir("langchain-references")) / "indexes"


@dataclass(frozen=True)
class ServerSettings:
    """Settings of one service (all its workers share them).

    Attributes:
        index_name: Name of the evidence index (a Chroma collection).
        persist_dir: Directory of an embedded (on-disk) Chroma; ``None`` with no
            ``chroma_url`` means :func:`default_persist_dir`.
        chroma_url: URL of a Chroma server (``chroma run``), instead of ``persist_dir``.
        embeddings: The embeddings the index was built with: ``None`` (the offline MiniLM)
            or ``"module:factory"`` (see
            :func:`~langchain_references.server.index.load_embeddings`).
        max_body_bytes: Largest request body accepted (413 above).
        max_claims: Most claims in one batch request.
        max_top_k: Largest ``top_k`` a request may ask for.
        default_top_k: ``top_k`` when a request gives none (10, as the climate evidence API).
        max_claim_chars: Longest claim accepted.
        max_article_chars: Longest text accepted by ``/api/split`` and article inputs.
        max_sentences: Most sentences an article may have (``/v1/article`` stops splitting
            there, so that splitting costs no more than this many sentences).
        max_judged: Most (claim, passage) pairs one verify request may have judged (the
            ``abstract`` endpoints judge every sentence of every abstract retrieved).
        max_request_seconds: Time budget of a request's work: past it the work is cancelled
            and the request answered 503 naming the limit.
        max_client_requests: Heavy requests (any method but ``GET``, ``HEAD`` and
            ``OPTIONS``) one client may have in flight at once, per worker process; the next
            ones wait their turn (:mod:`~langchain_references.server.fair`). A client is its
            address (an IPv6 one: its /64 network).
        max_client_queue: Heavy requests of one client that may wait for a slot; past them,
            and past a wait of ``max_request_seconds``, the client is answered 429 with
            ``Retry-After``.
        max_client_threads: Threads of the shared pool (the embeddings, the index queries,
            the judge) one client's work may use at once; a free thread goes to the client
            with the fewest running. One (the default) keeps two cores' worth of CPU-bound
            work from one client from crowding out another's.
        api_key: Bearer token every request must carry, or ``None`` for no authentication.
        api_key_env: Name of the environment variable the key was read from (what
            :meth:`to_env` passes on, so the key itself is not copied).
        cors_origins: Origins allowed by CORS; empty (the default) turns CORS off.
        allowed_hosts: Host names (``Host`` header, port aside) the service answers; others
            get a 400 JSON error, so that a web page cannot reach the service through DNS
            rebinding. The header is parsed strictly (RFC 7230): exactly one, ``host[:port]``
            with a bracketed IPv6 address, no userinfo (``user@host`` is refused).
            ``"*.example.org"`` allows the subdomains, ``"*"`` any host. Default: the
            loopback names.
        search_backend: Name of the web search back-end of ``/v1/factcheck`` (e.g.
            ``"ddgs"``), or ``None`` to search the evidence index only.
        judge: The judge of every verdict (:mod:`~langchain_references.judges.spec`):
            ``heuristic`` (the default: offline and rough), ``heuristic-lexical``,
            ``llm:PROVIDER:MODEL`` or ``nli:MODEL`` (an ONNX cross-encoder: a local folder
            or ``.onnx`` file, or a Hugging Face Hub id); every answer names it (an NLI
            judge after its model). The workers read it from the variable
            ``LANGCHAIN_REFERENCES_SERVER_JUDGE`` (:meth:`to_env`); the ``serve`` command
            gives them a local model's absolute path.
        retrieval: How the evidence endpoints and the fact-check relevance stage rank:
            ``"dense"``, ``"bm25"`` or ``"hybrid"`` (the default).
    """

    index_name: str = "evidence"
    persist_dir: Path | None = None
    chroma_url: str | None = None
    embeddings: str | None = None
    max_body_bytes: int = 1_000_000
    max_claims: int = 100
    max_top_k: int = 100
    default_top_k: int = 10
    max_claim_chars: int = 2_000
    max_article_chars: int = 200_000
    max_sentences: int = 1_000
    max_judged: int = 1_000
    max_request_seconds: int = 60
    max_client_requests: int = 4
    max_client_queue: int = 16
    max_client_threads: int = 1
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    search_backend: str | None = None
    judge: str = "heuristic"
    retrieval: Retrieval = DEFAULT_RETRIEVAL

    def __post_init__(self) -> None:
        """Check the limits, the index location and the judge.

        Raises:
            SettingsError: If a limit is not a positive integer, ``default_top_k`` exceeds
                ``max_top_k``, the index name is blank, both ``persist_dir`` and
                ``chroma_url`` are set, or the judge spec names no judge.
        """
        for name in _INT_LIMITS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{name} must be a positive integer, got {value!r}")
        if self.default_top_k > self.max_top_k:
            raise SettingsError(
                f"default_top_k ({self.default_top_k}) exceeds max_top_k ({self.max_top_k})"
            )
        if not self.index_name.strip():
            raise SettingsError("index_name is blank")
        if self.persist_dir is not None and self.chroma_url is not None:
            raise SettingsError("give persist_dir or chroma_url, not both")
        for host in self.allowed_hosts:
            if not host.strip() or "*" in host[1:] or (host[:1] == "*" and host[:2] != "*."):
                raise SettingsError(f"allowed host {host!r}: a name, '*.domain' or '*'")
        if self.api_key is not None and not self.api_key.strip():
            raise SettingsError("the API key is blank")
        # Imported here: the command line reads the defaults (``serve --help``) without it.
        from langchain_references.judges.spec import JudgeSpecError, parse_judge_spec

        try:
            parse_judge_spec(self.judge)
        except JudgeSpecError as exc:
            raise SettingsError(f"judge {exc}") from None
        try:
            check_retrieval(self.retrieval)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None

    @property
    def resolved_persist_dir(self) -> Path | None:
        """The embedded index's directory (``None`` when the index is on a Chroma server)."""
        if self.chroma_url is not None:
            return None
        return self.persist_dir if self.persist_dir is not None else default_persist_dir()

    def check_top_k(self, top_k: int | None) -> int:
        """The ``top_k`` to use for a request: its own, or the default.

        Args:
            top_k: What the request asked for (``None``: the default).

        Returns:
            ``top_k`` or :attr:`default_top_k`.

        Raises:
            LimitExceededError: If it is below 1 or above :attr:`max_top_k`.
        """
        if top_k is None:
            return self.default_top_k
        if top_k < 1:
            raise LimitExceededError("min_top_k", 1, top_k)
        if top_k > self.max_top_k:
            raise LimitExceededError("max_top_k", self.max_top_k, top_k)
        return top_k

    def check_claims(self, claims: Sequence[str]) -> None:
        """Check a request's claims against :attr:`max_claims` and :attr:`max_claim_chars`.

        Args:
            claims: The claims.

        Raises:
            LimitExceededError: (413) If there are too many claims or one is too long.
        """
        if len(claims) > self.max_claims:
            raise LimitExceededError("max_claims", self.max_claims, len(claims), status_code=413)
        longest = max((len(claim) for claim in claims), default=0)
        if longest > self.max_claim_chars:
            raise LimitExceededError(
                "max_claim_chars", self.max_claim_chars, longest, status_code=413
            )

    def check_article(self, text: str) -> None:
        """Check an article's length against :attr:`max_article_chars`.

        Args:
            text: The article.

        Raises:
            LimitExceededError: (413) If it is too long.
        """
        if len(text) > self.max_article_chars:
            raise LimitExceededError(
                "max_article_chars", self.max_article_chars, len(text), status_code=413
            )

    def to_env(self) -> dict[str, str]:
        """Encode the settings as environment variables for :meth:`from_env`.

        Returns:
            ``{ENV_PREFIX + NAME: value}``; unset optional values are left out, the API key
            is passed by the name of its variable only.
        """
        env: dict[str, str] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "api_key" or value is None:
                continue
            if isinstance(value, tuple):
                value = ",".join(value)
            env[ENV_PREFIX + item.name.upper()] = str(value)
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        """Read settings written by :meth:`to_env` (unset variables keep their defaults).

        Args:
            environ: The environment (default ``os.environ``).

        Returns:
            The settings; the API key is read from the variable named by ``API_KEY_ENV``.

        Raises:
            SettingsError: If a value is malformed, or the API key variable is unset.
        """
        env = os.environ if environ is None else environ
        settings = cls()
        changes: dict[str, object] = {}
        for item in fields(cls):
            raw = env.get(ENV_PREFIX + item.name.upper())
            if raw is None or item.name == "api_key":
                continue
            if item.name in _INT_LIMITS:
                try:
                    changes[item.name] = int(raw)
                except ValueError:
                    raise SettingsError(f"{item.name} must be an integer, got {raw!r}") from None
            elif item.name == "persist_dir":
                changes[item.name] = Path(raw)
            elif item.name in ("cors_origins", "allowed_hosts"):
                changes[item.name] = tuple(o.strip() for o in raw.split(",") if o.strip())
            else:
                changes[item.name] = raw
        key_env = changes.get("api_key_env")
        if isinstance(key_env, str):
            key = env.get(key_env)
            if key is None:
                raise SettingsError(f"the API key variable {key_env} is not set")
            changes["api_key"] = key
        return replace(settings, **changes)  # type: ignore[arg-type]
