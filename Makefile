# Two entry points: `make demo` and `make test`. Both set everything up on a fresh machine.
# `make demo` installs only what the demo needs (this project with [demo,factcheck,llm]);
# `make test` (and lint, typecheck, unit, bench, docs) installs [all,ray,dev]: every extra, Ray
# (not in [all]: it is asked for by name) and the dev tools.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-demo demo test lint typecheck unit unit-fast bench docs mutation clean

$(PY):
	@echo "== Creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# pip runs without -q: its Collecting / Downloading / Installing lines are the progress.
$(DEMO_STAMP): pyproject.toml | $(PY)
	@echo "== Installing the demo's packages into $(VENV): this project with the [demo,factcheck,llm]"
	@echo "   extras (onnxruntime, tokenizers, chromadb, trafilatura, httpx...; about 650 MB,"
	@echo "   a minute or two on a first run). The dev tools are not installed (make test does)."
	$(PIP) install --progress-bar on -e ".[demo,factcheck,llm]"
	touch $(DEMO_STAMP)

$(DEV_STAMP): pyproject.toml | $(PY)
	@echo "== Installing this project with [all,ray,dev] into $(VENV): every extra, Ray, tests, linters"
	$(PIP) install --progress-bar on -e ".[all,ray,dev]"
	touch $(DEV_STAMP) $(DEMO_STAMP)

install: $(DEV_STAMP)

install-demo: $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@echo "== 1. Streaming citations: a RAG answer over the demo corpus (embedded Chroma) =="
	$(PY) -m langchain_references.cli demo $(ARGS)
	@echo
	@echo "== 2. Fact-check: search, fetch over HTTP (local server), extract, embed, judge =="
	$(PY) -m langchain_references.cli factcheck --search demo --style text \
		"Apollo 11 astronauts first walked on the Moon in 1969."

lint: $(DEV_STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m ruff check langchain_references tests benchmarks
	$(PY) -m ruff format --check langchain_references tests benchmarks

typecheck: $(DEV_STAMP)
	$(PY) -m mypy --strict langchain_references

# The tests on two processes (pytest-xdist, TEST_WORKERS=2: the two cores of the CI machine).
# Whichever process is free takes the next test, except the Ray tests: one process runs them one
# after another, on one local Ray (tests/conftest.py). `pytest tests` runs them all in one process.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup

# The load tests (marked `alone`) compare latencies measured in one run: they run last, in one
# process, so that no other test loads the machine while they measure.
unit: $(DEV_STAMP)
	$(PY) -m pytest tests -q $(PYTEST_PARALLEL) -m "not alone"
	$(PY) -m pytest tests/unit_tests/server -q -m alone

# The unit tests without the slow end-to-end ones (notebooks, CLI subprocesses).
unit-fast: $(DEV_STAMP)
	$(PY) -m pytest tests -q $(PYTEST_PARALLEL) -m "not slow and not alone"

test: lint typecheck unit

bench: $(DEV_STAMP)
	$(PY) benchmarks/bench_streaming.py
	$(PY) benchmarks/bench_code.py
	$(PY) benchmarks/bench_cli_import.py
	$(PY) benchmarks/bench_agents.py
	$(PY) benchmarks/bench_tool_format.py
	$(PY) benchmarks/bench_fetch_latency.py
	$(PY) benchmarks/bench_hostile.py
	$(PY) benchmarks/bench_extract.py
	$(PY) benchmarks/bench_inference.py
	$(PY) benchmarks/eval_climate_fever.py --judge gold
	$(PY) benchmarks/eval_climate_fever.py --judge heuristic --split second
	$(PY) benchmarks/calibrate_heuristic.py
	$(PY) benchmarks/eval_polarity.py
	$(PY) benchmarks/eval_obvious_pairs.py
	$(PY) benchmarks/eval_factuality.py
	$(PY) benchmarks/eval_citations.py
	$(PY) benchmarks/bench_splitter.py
	$(PY) benchmarks/bench_service.py
	$(PY) benchmarks/bench_retrieval.py
	$(PY) benchmarks/bench_scale.py
	$(PY) benchmarks/bench_index_build.py
	$(PY) benchmarks/serve_rebuild.py

# Mutation testing of the decision modules (the list and the tests run: [tool.mutmut] in
# pyproject.toml). mutmut keeps its results under mutants/, so a second run re-checks only the
# functions and tests that changed. The table gives the score per module; the target fails while a
# surviving mutant is neither killed by a test nor explained in .ci/mutation_equivalents.txt.
MUTATION_JOBS ?= 6
mutation: $(DEV_STAMP)
	HYPOTHESIS_PROFILE=mutation $(VENV)/bin/mutmut run --max-children $(MUTATION_JOBS) > mutants.log 2>&1 || (tail -c 3000 mutants.log; exit 1)
	$(PY) .ci/mutation_table.py

# The documentation site (mkdocs-material + mkdocstrings, docs/ and mkdocs.yml) into site/,
# offline: no plugin fetches anything at build time, warnings are errors.
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) site mutants mutants.log
