# The two set-up commands of the README: `make run` and `make test`. Each creates .venv and
# installs what it needs from the package registries (pinned by constraints.txt).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install -q -c constraints.txt
JOBS   ?= 2

.PHONY: run test lint bench clean-results help

help:
	@echo "make run   - run the full_main study with the simulated agent (sim backend)"
	@echo "make test  - run the test suite"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# core + pipeline: everything `make run` needs (no torch)
$(VENV)/.run-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e ".[pipeline]"
	@touch $@

# + HF/OpenAI backends and the dev tools for the tests
$(VENV)/.test-deps: pyproject.toml constraints.txt $(VENV)/.run-deps
	$(PIP) -e ".[pipeline,hf,openai,dev]"
	@touch $@

run: $(VENV)/.run-deps
	$(BIN)/containmentbench scenarios generate --suite full_main --out scenarios/full_main
	$(BIN)/containmentbench scenarios check --suite full_main

test: $(VENV)/.test-deps
	$(BIN)/ruff check containmentbench tests bench
	$(BIN)/python -m pytest -q

lint: $(VENV)/.test-deps
	$(BIN)/ruff check containmentbench tests bench
