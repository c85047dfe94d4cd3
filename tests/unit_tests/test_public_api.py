"""The public API is small and deliberate: each package's ``__all__`` is pinned here.

Changing a public name is an API change: update the list below in the same commit, and the
README if it shows the name. Internals stay importable from their modules.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import langchain_references
from langchain_references.errors import LangchainReferencesError

EXPECTED_ALL: dict[str, set[str]] = {
    "langchain_references": {
        # the seed API, exactly as it was
        "manage_references",
        "FORMAT_REFERENCES",
        "ReferenceStyle",
        "MarkdownReferenceStyle",
        "TextReferenceStyle",
        "HTMLReferenceStyle",
        "EmptyReferenceStyle",
        # around it
        "REFERENCES_EVENT",
        "ReferencedChatModel",
        "ReferencedRunnable",
        "ReferencesMiddleware",  # create_agent(middleware=[...]), issue 31
        "UsedReference",
        "format_documents",
        "Failure",
        "LangchainReferencesError",
        "MissingDocumentsError",
        "__version__",
    },
    "langchain_references.judges": {
        "Judge",
        "JudgeInfo",
        "JudgeInput",
        "JudgeInputLike",
        "Judgement",
        "Label",
        "LLMJudge",
        "HeuristicJudge",
        "CrossEncoderNLIJudge",
        "judge_info",
        "offline_judge",
    },
    "langchain_references.citations": {
        "AnswerRecord",
        "AnswerReport",
        "CitationChecker",
        "CitationRecordError",
        "CitationReport",
        "CitationVerdict",
        "CitationVerifier",
        "CitedSentence",
        "SentenceCitationTracker",
        "SentenceVerdict",
        "aevaluate_answers",
        "evaluate_answers",
        "is_verification_worthy",
        "load_answer_records",
        "split_cited_sentences",
    },
    "langchain_references.factcheck": {
        "PROGRESS_EVENT",
        "Aggregator",
        "Evidence",
        "FactCheckChain",
        "FactCheckProgress",
        "FactCheckRequest",
        "FactCheckResult",
        "PageCache",
        "PageFetcher",
        "PassageIndex",
        "PassageSplitter",
        "SearchProvider",
        "Verdict",
        "VectorStoreIndex",
        "WeightedVoteAggregator",
        "create_fact_check_chain",
        "render_json",
        "render_report",
    },
    "langchain_references.factcheck.search": {
        "BaseSearchProvider",
        "BingSearch",
        "DuckDuckGoSearch",
        "LocalCorpusSearch",
        "RecordedSearch",
        "SearchError",
        "SearchHit",
        "SearchProvider",
        "SearxSearch",
        "TavilySearch",
        "VectorStoreSearch",
    },
    "langchain_references.factuality": {
        "Atom",
        "Atomizer",
        "Context",
        "FactualityInput",
        "FactualityPipeline",
        "FactualityResult",
        "FactualityScores",
        "InputContexts",
        "Relation",
        "Reviser",
        "VectorStoreContexts",
        "WebContexts",
        "build_fact_graph",
        "create_factuality_evaluator",
        "infer_marginals",
        "load_inputs",
        "score_marginals",
    },
    "langchain_references.native": {
        "ADAPTER_NAMES",
        "NativeAdapter",
        "NativeCitation",
        "NativeOption",
        "Piece",
        "UnknownAdapterError",
        "adapter_class",
        "normalize_url",
        "select_adapter",
    },
    "langchain_references.server": {
        "EvidenceHit",
        "EvidenceIndex",
        "EvidenceIndexError",
        "EvidenceRecord",
        "ServerSettings",
        "Services",
        "create_app",
        "get_services",
    },
    "langchain_references.cli": {"CLIError", "build_parser", "main"},
    "langchain_references.engine": {
        "DEFAULT_ENGINE",
        "ENGINES",
        "Engine",
        "RayLimiterBackend",
        "RayOptions",
        "RunnableWorker",
        "WorkerSetupError",
        "apply_runnable",
        "map_runnable",
        "ray_session",
        "to_json",
    },
    "langchain_references.embeddings": {
        "EMBEDDING_DIMENSION",
        "MAX_SEQ_LENGTH",
        "MODEL_SHA256",
        "TOKENIZER_SHA256",
        "ChecksumMismatchError",
        "EmbeddingDependencyError",
        "EmbeddingModelError",
        "MiniLMEmbeddings",
        "default_model_path",
        "default_tokenizer_path",
        "shared_minilm",
    },
    "langchain_references.demo": {
        "BASE_URL",
        "NOT_FOUND_ANSWER",
        "SAMPLE_QUESTION",
        "ExtractiveAnswerer",
        "load_documents",
        "render_pages",
    },
}


@pytest.mark.parametrize("module_name", sorted(EXPECTED_ALL))
def test_all_is_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(module.__all__) == EXPECTED_ALL[module_name]
    assert len(module.__all__) == len(set(module.__all__))  # no duplicates


@pytest.mark.parametrize("module_name", sorted(EXPECTED_ALL))
def test_every_public_name_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_the_root_api_is_small() -> None:
    names = [n for n in langchain_references.__all__ if not n.startswith("__")]  # __version__
    assert len(names) <= 16


def test_the_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    assert langchain_references.__version__ == version("langchain-references")


def _all_modules() -> list[str]:
    names = ["langchain_references"]
    for info in pkgutil.walk_packages(
        langchain_references.__path__, prefix="langchain_references."
    ):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def test_every_exception_of_the_package_has_one_base() -> None:
    offenders = []
    for name in _all_modules():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == name
                and not issubclass(obj, LangchainReferencesError)
            ):
                offenders.append(f"{name}.{obj.__name__}")
    assert offenders == []


def test_one_loader_convention() -> None:
    from langchain_references.citations import load_answer_records
    from langchain_references.factuality import load_inputs
    from langchain_references.services.loading import LoadResult

    for loader in (load_answer_records, load_inputs):
        annotation = inspect.signature(loader).return_annotation
        assert "LoadResult" in str(annotation), loader
    assert LoadResult.__dataclass_fields__.keys() == {"records", "errors"}


def test_the_package_imports_its_names_on_first_access() -> None:
    # an extraction worker process imports langchain_references.factcheck.extract: it must
    # not pay for LangChain (1.5 s a worker when the package imported its names eagerly)
    code = (
        "import sys, langchain_references.factcheck.extract, langchain_references as lr\n"
        "print('langchain_core' in sys.modules)\n"
        "lr.manage_references\n"
        "print('langchain_core' in sys.modules, 'manage_references' in dir(lr))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["False", "True True"]


def test_manage_references_shows_every_option_in_its_signature() -> None:
    from langchain_references.manager import DEFAULT_MARKERS

    parameters = inspect.signature(langchain_references.manage_references).parameters
    assert list(parameters) == [
        "runnable",
        "documents_key",
        "style",
        "verifier",
        "mark_unsupported",
        "on_unsupported",
        "native",
        "name",
        "markers",
        "output_version",
    ]
    assert parameters["runnable"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    options = {name: p for name, p in parameters.items() if name != "runnable"}
    assert {p.kind for p in options.values()} == {inspect.Parameter.KEYWORD_ONLY}
    assert {name: p.default for name, p in options.items()} == {
        "documents_key": "documents",
        "style": None,
        "verifier": None,
        "mark_unsupported": False,
        "on_unsupported": "keep",
        "native": "auto",
        "name": None,
        "markers": ("id", "source"),
        "output_version": None,
    }
    assert options["markers"].default is DEFAULT_MARKERS
    assert "on_unsupported" in (langchain_references.manage_references.__doc__ or "")
