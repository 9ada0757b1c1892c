"""A model of one's own behind an OpenAI-compatible server, and the serving record
(models/serving.py): discovery through ``/v1/models``, the refusals (a dead URL, an unserved
model, the simulated agent's names with a real backend), what each engine tells, and a record
change that makes shards stale and says which key changed."""

from __future__ import annotations

import hashlib
import json

import pytest

from containmentbench.config.compose import load_study
from containmentbench.errors import BenchError
from containmentbench.models.serving import KEYS, record
from containmentbench.pipeline.plan import jobs, run_dir, shard_key, shards
from containmentbench.pipeline.status import stale_reasons, study_status
from containmentbench.runtime.job import backend_config, run_job
from tests.conftest import run_cli
from tests.models.fake_server import FakeServer

SMALL = ["study=smoke", "study.seeds=[1]", "study.stages=[security]", "study.defenses=[none]"]


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_unlisted_model_takes_its_served_name_from_the_server(tmp_path):
    with FakeServer(["my_llama", "other"]) as s:
        data = load_study([*SMALL, f"results_dir={tmp_path}", "backend=openai",
                           f"base_url={s.base_url}", "model=my_llama"])
    assert (data["model"]["name"], data["model"]["path"]) == ("my_llama", "my_llama")
    assert run_dir(data) == tmp_path / "smoke" / "my_llama"
    assert backend_config(data).model == "my_llama"  # what every request carries
    # a single-model server (llama-server, llama_cpp.server) serves its file name
    with FakeServer(["qwen2.5-0.5b-instruct-q4_k_m.gguf"]) as s:
        one = load_study([*SMALL, "backend=openai", f"base_url={s.base_url}", "model=my_llama"])
    assert one["model"]["path"] == "qwen2.5-0.5b-instruct-q4_k_m.gguf"
    assert one["model"]["name"] == "my_llama"
    # model.path picks one of several
    with FakeServer(["a", "b"]) as s:
        picked = load_study([*SMALL, "backend=openai", f"base_url={s.base_url}",
                             "model=mine", "model.path=b"])
    assert picked["model"]["path"] == "b"


def test_one_line_forms_through_config_check(tmp_path, capsys):
    with FakeServer(["my_llama"], kind="vllm") as s:
        assert run_cli("config", "check", *SMALL, "backend=openai", f"base_url={s.base_url}",
                       "model=my_llama", "backend.options.backoff_base_s=0.5") == 0
        out = capsys.readouterr().out
        assert "model my_llama" in out and "serving: engine vllm 0.6.1" in out
        assert "served as 'my_llama'" in out
        # an option the backend does not know: the line lists the known ones
        assert run_cli("config", "check", *SMALL, "backend=openai", f"base_url={s.base_url}",
                       "model=my_llama", "backend.options.bogus=1") == 2
        line = _one_line_error(capsys)
        assert "backend.options.bogus" in line and "known: api_key_env" in line


def test_a_server_that_does_not_answer_is_named(tmp_path, capsys):
    with FakeServer(["x"]) as s:
        dead = s.base_url  # the port is closed once the server is gone
    out = tmp_path / "r"
    assert run_cli("config", "check", *SMALL, f"results_dir={out}", "backend=openai",
                   f"base_url={dead}", "model=my_llama") == 2
    line = _one_line_error(capsys)
    assert f"{dead}/models" in line and "backend.options.base_url" in line
    assert not out.exists()  # nothing written


def test_a_model_the_server_does_not_serve_is_named_with_what_it_serves(tmp_path, capsys):
    with FakeServer(["alpha", "beta"]) as s:
        assert run_cli("config", "check", *SMALL, f"results_dir={tmp_path / 'r'}",
                       "backend=openai", f"base_url={s.base_url}", "model=gamma") == 2
        line = _one_line_error(capsys)
        assert "'gamma'" in line and "alpha, beta" in line and "model.name" in line
        with pytest.raises(BenchError, match="does not serve model 'nope'") as e:
            load_study([*SMALL, "backend=openai", f"base_url={s.base_url}", "model=gamma",
                        "model.path=nope"])
        assert e.value.field == "model.path"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("model", ["sim", "sim_always_follow", "sim_mine"])
def test_simulated_agent_names_with_a_real_backend_are_refused(model, capsys):
    with FakeServer(["sim", "sim_mine"]) as s:
        # forgetting model= (the default is the simulated agent) is the first case
        args = [*SMALL, "backend=openai", f"base_url={s.base_url}"]
        if model != "sim":
            args.append(f"model={model}")
        assert run_cli("config", "check", *args) == 2
    line = _one_line_error(capsys)
    assert "model.name" in line and "simulated agent" in line
    assert not s.chat_models  # nothing was sent


def test_a_real_or_unlisted_name_with_the_sim_backend_is_refused(capsys):
    assert run_cli("config", "check", *SMALL, "model=qwen2_5_7b_instruct") == 2
    assert "the sim backend runs the simulated agent" in _one_line_error(capsys)
    assert run_cli("config", "check", *SMALL, "model=my_llama") == 2
    line = _one_line_error(capsys)
    assert "no model 'my_llama'" in line and "backend=openai base_url=URL" in line
    assert run_cli("config", "check", *SMALL, "base_url=http://127.0.0.1:1/v1") == 2
    assert "say backend=openai" in _one_line_error(capsys)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_each_engine_tells_what_it_tells():
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    got = {}
    for kind in ("vllm", "llamacpp", "ollama", "plain"):
        with FakeServer(["m"], kind=kind, version=f"v-{kind}", template=template,
                        quantization="Q5_K_M") as s:
            got[kind] = record(load_study([*SMALL, "backend=openai", f"base_url={s.base_url}",
                                           "model=m"]))
    assert list(got["vllm"]) == list(KEYS)
    assert got["vllm"]["engine"] == "vllm" and got["vllm"]["engine_version"] == "v-vllm"
    assert got["vllm"]["chat_template_sha256"] is None  # vLLM does not serve its template
    assert got["llamacpp"]["engine"] == "llama.cpp"
    assert got["llamacpp"]["engine_version"] == "v-llamacpp"
    assert got["llamacpp"]["chat_template_sha256"] == _sha(template)
    assert got["ollama"] == {**got["ollama"], "engine": "ollama", "engine_version": "v-ollama",
                             "chat_template_sha256": _sha(template), "quantization": "Q5_K_M"}
    assert got["plain"]["engine"] is None and got["plain"]["engine_version"] is None
    for rec in got.values():
        assert rec["decoding"] == {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512}
        assert rec["tool_mode"] == "prompt" and rec["tool_parser"] is None


def test_declared_where_the_server_does_not_tell_and_refused_where_it_contradicts():
    with FakeServer(["m"], kind="plain") as s:
        rec = record(load_study([*SMALL, "backend=openai", f"base_url={s.base_url}", "model=m",
                                 "backend.serving.engine=llama-cpp-python",
                                 "backend.serving.engine_version=0.3.16",
                                 "backend.serving.tool_parser=chatml-function-calling"]))
    assert rec["engine"] == "llama-cpp-python" and rec["engine_version"] == "0.3.16"
    assert rec["tool_parser"] == "chatml-function-calling"
    with FakeServer(["m"], kind="vllm", version="0.6.1") as s, \
            pytest.raises(BenchError, match=r"engine says '0\.6\.1'") as e:
        load_study([*SMALL, "backend=openai", f"base_url={s.base_url}", "model=m",
                    "backend.serving.engine_version=0.7.0"])
    assert e.value.field == "backend.serving.engine_version"


def test_in_process_and_sim_records(tmp_path):
    sim = record(load_study(SMALL))
    assert sim["engine"] == "sim" and sim["chat_template_sha256"] is None
    from importlib.metadata import version

    template = "{{ messages[0].content }}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    hf = record(load_study([*SMALL, "backend=hf", "model=qwen2_5_7b_instruct",
                            f"model.path={tmp_path}",
                            "backend.options.gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf"]))
    assert hf["engine"] == "transformers" and hf["engine_version"] == version("transformers")
    assert hf["chat_template_sha256"] == _sha(template)  # the folder's template
    assert hf["quantization"] == "Q4_1"  # the GGUF file's type


def test_another_engine_version_makes_the_shard_stale_and_status_says_which(tmp_path):
    common = [*SMALL, f"results_dir={tmp_path}", "backend=openai", "model=m",
              "backend.options.seed_supported=false"]
    with FakeServer(["m"], kind="vllm", version="0.6.1") as s:
        old = load_study([*common, f"base_url={s.base_url}"])
        (job,) = jobs(old)
        res = run_job(old, job, quiet=True)
        assert not res.errored and study_status(old)["done"] == [x.id for x in shards(old)]
        assert s.chat_models and set(s.chat_models) == {"m"}
    with FakeServer(["m"], kind="vllm", version="0.7.0") as s:
        new = load_study([*common, f"base_url={s.base_url}"])
    with FakeServer(["m"], kind="vllm", version="0.6.1") as s:  # same engine, another port
        same = load_study([*common, f"base_url={s.base_url}"])
    sh = shards(old)[0]
    assert shard_key(old, sh) == shard_key(same, sh) != shard_key(new, sh)
    assert study_status(new)["stale"] == [sh.id]
    why = stale_reasons(new, [sh.id])
    assert list(why) == ["serving engine_version (0.6.1 -> 0.7.0)"]
    shard_json = json.loads((run_dir(old) / "traces" / sh.id / "SHARD.json").read_text())
    assert shard_json["serving"]["engine_version"] == "0.6.1"


def test_a_job_refuses_an_engine_other_than_the_recorded_one(tmp_path):
    with FakeServer(["m"], kind="vllm", version="0.6.1") as s:
        data = load_study([*SMALL, f"results_dir={tmp_path}", "backend=openai", "model=m",
                           f"base_url={s.base_url}", "backend.options.seed_supported=false"])
        port = s.port
    # the server is swapped for another vLLM on the same port between composition and run
    with FakeServer(["m"], kind="vllm", version="0.7.0", port=port) as s:
        with pytest.raises(BenchError, match=r"composed with engine_version '0\.6\.1'") as e:
            run_job(data, jobs(data)[0], quiet=True)
        assert not s.chat_models  # refused before any model call
    assert e.value.field == "backend.serving.engine_version"
    assert not any((run_dir(data) / "traces").rglob("SHARD.json"))
