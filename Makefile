# Two entry points: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck unit unit-fast bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[all,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@echo "== 1. Streaming citations: a RAG answer over the demo corpus (embedded Chroma) =="
	$(PY) -m langchain_references.cli demo $(ARGS)
	@echo
	@echo "== 2. Fact-check: search, fetch over HTTP (local server), extract, embed, judge =="
	$(PY) -m langchain_references.cli factcheck --search demo --style text \
		"The Moon is closer to Earth than Europa is to Jupiter."

lint: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m ruff check langchain_references tests benchmarks
	$(PY) -m ruff format --check langchain_references tests benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy --strict langchain_references

unit: $(STAMP)
	$(PY) -m pytest tests -q

# The unit tests without the slow end-to-end ones (notebooks, CLI subprocesses).
unit-fast: $(STAMP)
	$(PY) -m pytest tests -q -m "not slow"

test: lint typecheck unit

bench: $(STAMP)
	$(PY) benchmarks/bench_streaming.py
	$(PY) benchmarks/bench_fetch_latency.py
	$(PY) benchmarks/bench_inference.py
	$(PY) benchmarks/eval_climate_fever.py --judge gold
	$(PY) benchmarks/eval_climate_fever.py --judge heuristic --split second
	$(PY) benchmarks/eval_factuality.py
	$(PY) benchmarks/eval_citations.py

clean:
	rm -rf $(VENV)
