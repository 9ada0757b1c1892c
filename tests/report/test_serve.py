"""``report --serve`` is a quiet, careful server (issue 37, item 7): request lines are logged
with control characters escaped, a client that closes early prints nothing, the Host header
must name the bound address, hidden files and files outside the verified report are
refused, HEAD has no body, and a study changed while served is verified again (and refused
once it fails)."""

from __future__ import annotations

import io
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from containmentbench.report.serve import make_server


@pytest.fixture()
def served(run_dir, tmp_path):
    """A copy of the frozen viewer study served on a free port; yields (study, port, log)."""
    study = tmp_path / "study"
    shutil.copytree(run_dir, study)
    log = io.StringIO()
    server = make_server(study, port=0, log=log)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield study, port, log
    finally:
        server.shutdown()
        server.server_close()


def _raw(port: int, data: bytes, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def _get(port: int, path: str, method: str = "GET", host: str | None = None) -> bytes:
    host = host if host is not None else f"127.0.0.1:{port}"
    return _raw(port, f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                .encode("latin-1"))


def _status(resp: bytes) -> int:
    return int(resp.split(b" ", 2)[1])


def test_request_lines_are_logged_with_control_characters_escaped(served):
    _, port, log = served
    evil = "/\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m"
    _raw(port, f"GET {evil} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode("latin-1"))
    _raw(port, b"\x1b[31mNOT HTTP\x00\r\n\r\n")
    time.sleep(0.2)
    text = log.getvalue()
    assert text and not any(c in text for c in "\x1b\x07\x00\x9b")
    assert "\\x1b]52" in text and "\\x07" in text


def test_a_client_that_closes_early_prints_nothing(served, capsys):
    study, port, log = served
    for data in (b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1", b"", b"GET /"):
        _raw(port, data, read=False)
    # the largest file of the report, asked for by clients that reset the connection at once
    big = max((p for p in (study / "report").rglob("*") if p.is_file()
               and not p.name.startswith(".")), key=lambda p: p.stat().st_size)
    rel = big.relative_to(study / "report").as_posix()
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.sendall(f"GET /{rel} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            s.recv(100)
    time.sleep(0.5)
    text = log.getvalue() + capsys.readouterr().err
    assert "Traceback" not in text and "Error" not in text, text[-2000:]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1",
                                  "", "localhost.evil.example:{port}"])
def test_a_wrong_host_header_is_refused(served, host):
    _, port, _ = served
    resp = _get(port, "/index.html", host=host.format(port=port))
    assert _status(resp) == 421 and b"<html" not in resp.split(b"\r\n\r\n", 1)[1][:200].lower()
    assert _status(_get(port, "/index.html", host=f"localhost:{port}")) == 200


def test_hidden_files_and_files_outside_the_verified_report_are_refused(served):
    study, port, _ = served
    assert (study / "report" / ".containmentbench-out").is_file()
    for path in ("/.containmentbench-out", "/rollouts/.containmentbench-out", "/.hidden",
                 "/%2econtainmentbench-out", "/../MANIFEST.json", "/..%2fMANIFEST.json",
                 "/rollouts/"):
        assert _status(_get(port, path)) == 404, path
    (study / "report" / "late.html").write_text("<p>added after the study was verified</p>")
    assert _status(_get(port, "/late.html")) == 404
    outside = study.parent / "outside.txt"
    outside.write_text("not the report\n")
    (study / "report" / "link.txt").symlink_to(outside)
    assert _status(_get(port, "/link.txt")) == 404


def test_head_has_no_body(served):
    _, port, _ = served
    got = _get(port, "/index.html")
    head = _get(port, "/index.html", method="HEAD")
    headers, body = head.split(b"\r\n\r\n", 1)
    assert _status(head) == 200 and body == b""
    length = int(next(ln.split(b":")[1] for ln in headers.split(b"\r\n")
                      if ln.lower().startswith(b"content-length")))
    assert length == len(got.split(b"\r\n\r\n", 1)[1])


def test_a_study_changed_while_served_is_verified_again(served):
    study, port, log = served
    assert _status(_get(port, "/index.html")) == 200
    t = study / "tables" / "table09_security_positive_control.csv"
    t.write_bytes(t.read_bytes() + b"\n")   # the study no longer verifies ...
    page = study / "report" / "index.html"
    page.write_bytes(page.read_bytes().replace(b"</body>", b"<p>forged</p></body>"))
    resp = _get(port, "/index.html")   # ... and a served file changed: verified again
    assert _status(resp) == 503 and b"forged" not in resp
    assert _status(_get(port, "/tables.html")) == 503   # refused from then on
    assert "fails verify" in log.getvalue()


def test_report_serve_command_line(run_dir, tmp_path, capsys):
    """The verb refuses a bad port and a missing report in one line."""
    from tests.conftest import run_cli

    capsys.readouterr()
    assert run_cli("report", tmp_path / "nothing", "--serve", "--port", 0) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert Path(run_dir / "report" / "index.html").is_file()
