"""bench/local_server.py, the helper that runs a command against a server it starts: readiness
is the served name in ``/v1/models``, a server that exits or serves another name is reported,
and stopping it ends its whole process group (the engine's workers too)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("local_server", ROOT / "bench" / "local_server.py")
assert _spec is not None and _spec.loader is not None
local_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(local_server)


@pytest.fixture
def models_endpoint():
    """A server whose GET /v1/models lists one model, ``served-a``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": "served-a"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)


def test_ready_when_the_name_is_served(models_endpoint):
    proc = _sleeper()
    try:
        assert local_server.wait_ready(proc, models_endpoint, "served-a", 20) is None
        why = local_server.wait_ready(proc, models_endpoint, "served-b", 20)
        assert why == "serves ['served-a'], not 'served-b'"
    finally:
        local_server.stop(proc)


def test_a_server_that_exits_is_reported():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"],
                            start_new_session=True)
    port = local_server.free_port()  # nothing listens there
    assert local_server.wait_ready(proc, f"http://127.0.0.1:{port}/v1", "m", 30) == \
        "exited with status 3"


def test_no_answer_before_the_deadline():
    proc = _sleeper()
    port = local_server.free_port()
    try:
        why = local_server.wait_ready(proc, f"http://127.0.0.1:{port}/v1", "m", 0.5)
        assert why == f"did not answer http://127.0.0.1:{port}/v1/models within 0 s"
    finally:
        local_server.stop(proc)


def test_stop_ends_the_whole_process_group():
    # a parent with a child in its group, as the API server with its engine workers
    proc = subprocess.Popen([sys.executable, "-c",
                             "import subprocess, sys, time; subprocess.Popen([sys.executable, "
                             "'-c', 'import time; time.sleep(60)']); time.sleep(60)"],
                            start_new_session=True)
    time.sleep(1.0)
    local_server.stop(proc, grace_s=10)
    assert proc.returncode is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # anyone left in the group?
        except ProcessLookupError:
            return
        time.sleep(0.2)
    pytest.fail("a process of the server's group outlived stop()")
