"""The judge's config and its start-of-audit probe against a served backend: an unreachable
server or a reply that is not the requested JSON is one line naming the backend, exit 2,
nothing written (a local HTTP server stands in for the model)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from containmentbench.audit.judge import JUDGES_DIR, load_judge_config
from containmentbench.cli.main import main
from containmentbench.errors import BenchError

pytest.importorskip("httpx")


class _Judge(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        data = json.dumps({
            "id": "x", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.server.reply}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    srv.bodies, srv.reply = [], ""
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    out = d / "traces" / "m" / "none" / "seed=1" / "security" / "shard-000"
    assert main(["rollout", "--suite", "taintbench", "--stage", "security", "--scenarios",
                 "tb-implicit_control-000", "--defense", "none", "--seed", "1", "--study",
                 "t", "--sim-profile", "always_follow", "--out", str(out), "--quiet"]) == 0
    return d


def _audit(run, tmp_path, *judge):
    return main(["audit", "run", str(run), "--out", str(tmp_path / "audit"), "--no-replay",
                 *judge])


def _one_error_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    return err[0]


def test_unreachable_judge_is_one_line_exit_2_nothing_written(run, tmp_path, capsys) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    rc = _audit(run, tmp_path, "--judge-backend", "openai", "--judge-model", "judge-m",
                "--judge-option", f"base_url={url}", "--judge-option", "max_retries=0")
    line = _one_error_line(capsys)
    assert rc == 2 and url in line and "judge-m" in line and "call failed" in line
    assert not (tmp_path / "audit").exists()


@pytest.mark.parametrize("reply", ["Yes, the agent would still call it.",
                                   '{"would_call_anyway": "yes", "confidence": 0.9}'])
def test_malformed_judge_is_one_line_exit_2_nothing_written(run, tmp_path, capsys, server,
                                                            reply) -> None:
    srv, url = server
    srv.reply = reply
    rc = _audit(run, tmp_path, "--judge-backend", "openai", "--judge-model", "judge-m",
                "--judge-option", f"base_url={url}")
    line = _one_error_line(capsys)
    assert rc == 2 and url in line and "malformed JSON" in line
    assert len(srv.bodies) == 1  # the probe only
    assert not (tmp_path / "audit").exists()


def test_judge_file_runs_the_audit_with_greedy_decoding(run, tmp_path, server) -> None:
    srv, url = server
    srv.reply = '{"would_call_anyway": false, "confidence": 0.6, "reasoning": "r"}'
    f = tmp_path / "judge.yaml"
    f.write_text(f"backend: openai\nmodel: judge-m\nmax_tokens: 64\n"
                 f"options: {{base_url: '{url}'}}\n")
    assert _audit(run, tmp_path, "--judge", str(f)) == 0
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert summary["judge"] == f"openai {url} model judge-m"
    assert summary["judge_calls"] == len(srv.bodies) > 1
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 64 for b in srv.bodies)


def test_packaged_judges_load_and_bad_fields_are_named(tmp_path) -> None:
    names = sorted(p.stem for p in JUDGES_DIR.glob("*.yaml"))
    assert "qwen2_5_coder_0_5b_cpu" in names
    for n in names:
        cfg = load_judge_config(n)
        assert cfg.backend == "vllm" and cfg.backend_config().temperature == 0.0
    f = tmp_path / "j.yaml"
    for text, field in [("backend: openai\nmodel: m\ntemperature: 0.7\n", "judge.temperature"),
                        ("backend: openai\n", "judge.model"),
                        ("backend: openai\nmodel: m\nmax_tokens: 2\n", "judge.max_tokens"),
                        ("backend: openai\nmodel: m\noptions: [1]\n", "judge.options")]:
        f.write_text(text)
        with pytest.raises(BenchError) as exc:
            load_judge_config(f)
        assert exc.value.field == field
    with pytest.raises(BenchError, match="neither a file nor a packaged judge"):
        load_judge_config("no_such_judge")
