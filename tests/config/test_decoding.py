"""The decoding block: explicit, recorded, and seeds that mean something (greedy studies
with several seeds must declare them copies; a constrained mode needs a backend that can)."""

from __future__ import annotations

import json

import pytest

from containmentbench.config import decoding
from containmentbench.config.compose import load_study
from containmentbench.errors import BenchError
from tests.conftest import run_cli

REAL = ["backend=openai", "model=qwen2_5_7b_instruct"]


@pytest.fixture(scope="module", autouse=True)
def _server():
    """A server that serves the model (backend=openai asks it at composition)."""
    from tests.models.fake_server import FakeServer

    with FakeServer(["Qwen/Qwen2.5-7B-Instruct"]) as s:
        REAL.append(f"base_url={s.base_url}")
        yield s
        REAL.pop()


def test_default_decoding_samples_and_seeds_are_replicates():
    data = load_study(["study=smoke", *REAL])
    assert data["decoding"] == {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512,
                                "seed_policy": "replicates"}
    assert json.loads(decoding.record(data))["temperature"] == 0.7


def test_greedy_multi_seed_real_study_is_refused_unless_declared(capsys):
    with pytest.raises(BenchError, match="copies, not replicates") as e:
        load_study(["study=smoke", "decoding=greedy", *REAL])  # smoke has seeds [1, 2]
    assert e.value.field == "decoding.seed_policy"
    assert run_cli("config", "check", "study=smoke", "decoding=greedy", *REAL) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "decoding.seed_policy" in err[0]
    ok = load_study(["study=smoke", "decoding=greedy", "decoding.seed_policy=non_replicates",
                     *REAL])
    assert decoding.interval_seeds(ok["decoding"], [3, 1, 2]) == [1]
    # one seed is fine greedy; the simulated agent ignores temperature altogether
    load_study(["study=smoke", "decoding=greedy", "study.seeds=[1]", *REAL])
    load_study(["study=smoke", "decoding=greedy"])
    assert decoding.interval_seeds(ok["decoding"] | {"seed_policy": "replicates"},
                                   [3, 1, 2]) == [1, 2, 3]


def test_seed_policy_and_constrained_mode_checked():
    with pytest.raises(BenchError, match="unknown seed policy") as e:
        load_study(["study=smoke", "decoding.seed_policy=sometimes", *REAL])
    assert e.value.field == "decoding.seed_policy"
    for over in (["backend=sim"], ["backend=hf", "model=qwen2_5_7b_instruct"]):
        with pytest.raises(BenchError, match="cannot constrain") as e:
            load_study(["study=smoke", *over, "backend.tool_mode=constrained"])
        assert e.value.field == "backend.tool_mode"
    load_study(["study=smoke", *REAL, "backend.tool_mode=constrained"])


def test_describe_names_the_decoding():
    d = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 256, "seed_policy": "replicates"}
    assert decoding.describe(d, "vllm") == ("decoding: sampled at temperature 0.7, top_p "
                                            "0.95, max_tokens 256; seeds are replicates "
                                            "(per-request sampler seeds)")
    assert "greedy" in decoding.describe({**d, "temperature": 0.0,
                                          "seed_policy": "non_replicates"}, "hf")
    assert "not applicable" in decoding.describe(d, "sim")
