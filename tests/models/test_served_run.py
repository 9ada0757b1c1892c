"""A small study through ``backend=openai`` against a real OpenAI-compatible server, to frozen,
verified tables whose manifest names how the model was served (issue 36, items 2 and 3).

Skipped unless ``CB_SERVER_URL`` names a running server (its ``/v1`` base URL) serving
``CB_SERVED_MODEL``; ``make serve-smoke`` starts vLLM's server on the CPU engine with
Qwen2.5-Coder-0.5B-Instruct (``bench/local_server.py``), runs this module and stops the
server by its PID. ``CB_SERVED_RESULTS`` keeps the study folder (default: a temporary one);
``CB_TOOL_PARSER`` is the parser the server was started with (``hermes``).

The expected serving facts come from the server itself (``/v1/models`` and ``/version``), not
from the project's code: the engine that owns the served model and its version.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from containmentbench.freeze.manifest import verify
from tests.conftest import ROOT

URL = os.environ.get("CB_SERVER_URL")
pytestmark = pytest.mark.skipif(not URL, reason="CB_SERVER_URL names no running server")

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
#: the listed model config of the served model (its request name is the served name, below)
MODEL = "qwen2_5_coder_0_5b_instruct"


def _get(path: str) -> dict:
    """``GET`` a path of the server (``/v1/models``, ``/version``: vLLM's, outside ``/v1``)."""
    assert URL is not None
    root = URL.rstrip("/").removesuffix("/v1")
    with urllib.request.urlopen(f"{root}{path}", timeout=10) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def served_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """study=smoke_real (the smoke suite's security stage: 4 scenarios, none and
    intent_ledger_v2, one seed) through backend=openai, native tool calls, short completions."""
    served = os.environ.get("CB_SERVED_MODEL", MODEL)
    results = Path(os.environ.get("CB_SERVED_RESULTS") or tmp_path_factory.mktemp("served"))
    overrides = [f"results_dir={results}", "study.name=serve_smoke", f"model={MODEL}",
                 "backend=openai", f"backend.options.base_url={URL}",
                 f"++backend.options.served_model={served}", "backend.tool_mode=native",
                 # vLLM's server does not say which tool-call parser it was started with:
                 # declared, so the serving record names it (models/serving.py)
                 f"backend.serving.tool_parser={os.environ.get('CB_TOOL_PARSER', 'hermes')}",
                 "decoding.max_tokens=128", "runtime.max_steps=6"]
    res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(results),
                          "--cores", "1", "--config", "study=smoke_real",
                          f"overrides=[{','.join(overrides)}]"],
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return results / "serve_smoke" / MODEL


def test_served_run_is_frozen_and_verifies(served_run):
    manifest = served_run / "MANIFEST.json"
    assert manifest.is_file()
    assert verify(served_run) == []
    import polars as pl

    rollouts = pl.read_parquet(served_run / "traces" / "**" / "rollouts.parquet")
    # 4 scenarios x 2 defenses x 1 seed, every one through the served model
    assert rollouts.height == 8
    assert set(rollouts["backend"]) == {"openai"}
    assert (rollouts["status"] != "error").all()


def test_manifest_names_how_the_model_was_served(served_run):
    """The ``serving`` record (engine, engine_version, tool_parser, chat_template_sha256) agrees
    with what the server says about itself."""
    serving = json.loads((served_run / "MANIFEST.json").read_text())["serving"]
    models = _get("/v1/models")["data"]
    served = os.environ.get("CB_SERVED_MODEL", MODEL)
    (entry,) = [m for m in models if m["id"] == served]
    assert serving["engine"] == entry["owned_by"]  # "vllm"
    assert serving["engine_version"] == _get("/version")["version"]
    assert serving["tool_parser"] == os.environ.get("CB_TOOL_PARSER", "hermes")
    assert re.fullmatch(r"[0-9a-f]{64}", serving["chat_template_sha256"])
