"""``containmentbench report RUN_DIR --serve``: the report over HTTP on 127.0.0.1, with a
trace page for any rollout made on demand.

The static report has a page for every rollout with a committed violation, an error or a
case-study role (``report/build.py``); writing one for each of 17,640 rollouts would make
the report several times the size of the traces. Served, the rollout index links every
rollout, and a request for ``rollouts/<id>.html`` that is not in the folder is rendered from
the traces in memory (nothing is written).

A quiet, careful server (issue 37, item 7):

* only on the loopback interface, only GET and HEAD (HEAD: the headers, no body), and only
  for a request whose ``Host`` names the bound address (``127.0.0.1:<port>`` or
  ``localhost:<port>``): a page of another site that a browser resolves to 127.0.0.1 gets
  421, not the report;
* only the files of the verified report: those the study's manifest lists under
  ``report/`` (a frozen study, which must pass ``verify`` first, with its MAC when a key is
  set), or, for a report folder outside the study, the regular files found when the server
  started; hidden files, links, folders and anything added later are 404;
* a file whose bytes no longer match, or a manifest that changed, makes the server verify
  the study again; once it fails, every request gets 503;
* the log is one line per request with control characters written as escapes (a request
  line carrying OSC 52 or CSI sequences cannot drive the operator's terminal), and a client
  that closes early is no error at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import posixpath
import re
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote, urlsplit

import polars as pl

from containmentbench.errors import BenchError
from containmentbench.escape import visible
from containmentbench.integrity import safeopen
from containmentbench.report import tracepage
from containmentbench.report.rundir import RunDir

_PAGE = re.compile(r"^rollouts/(r-[0-9a-f]+)\.html$")
#: the largest report file served
LIMIT = 256 << 20


class Unavailable(Exception):
    """The study no longer verifies: nothing is served."""


class Site:
    """What the server answers with: the verified report's files (path -> sha256), checked
    again against the study when a served file or the manifest changes."""

    def __init__(self, run: RunDir, folder: Path, log: TextIO) -> None:
        self.run, self.folder, self.log = run, Path(os.path.realpath(folder)), log
        self.lock = threading.Lock()
        self.broken: str | None = None
        self.frozen = False
        self.files: dict[str, str] = {}
        self.stamp: tuple[int, int, int] | None = None
        self._verify()

    def _manifest_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = (self.run.path / "MANIFEST.json").lstat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _verify(self) -> None:
        """Verify the study (a frozen one) and settle which files may be served."""
        from containmentbench.integrity import frozen

        self.stamp = self._manifest_stamp()
        self.frozen = frozen.manifest_of(self.run.path) is not None
        if self.frozen:
            from containmentbench.report.build import check_frozen

            files = check_frozen(self.run)
            inside = Path(os.path.realpath(self.run.path / "report")) == self.folder
            if inside:
                self.files = {rel[len("report/"):]: d for rel, d in files.items()
                              if rel.startswith("report/")}
                return
        self.files = _scan(self.folder)

    def check(self) -> None:
        """The study as verified: a manifest that changed is verified again (503 after)."""
        if self.broken is not None:
            raise Unavailable(self.broken)
        if self._manifest_stamp() != self.stamp:
            self._again("its MANIFEST.json changed")

    def _again(self, why: str) -> None:
        try:
            self._verify()
        except BenchError as exc:
            self.broken = f"{why} and the study {exc.detail}"
            self.log.write(f"report --serve: {visible(self.broken)}; nothing is served from "
                           f"now on\n")
            raise Unavailable(self.broken) from None
        self.log.write(f"report --serve: {why}; the study verified again\n")

    def body(self, rel: str) -> bytes | None:
        """The bytes of the report file ``rel`` (None: not a file this server serves)."""
        with self.lock:
            self.check()
            if rel not in self.files:
                return None
            data = self._read(rel)
            if data is not None and hashlib.sha256(data).hexdigest() == self.files[rel]:
                return data
            self._again(f"{rel} changed while served")
            data = self._read(rel)
            if data is None or hashlib.sha256(data).hexdigest() != self.files.get(rel):
                return None
            return data

    def _read(self, rel: str) -> bytes | None:
        try:
            return safeopen.read_bytes(self.folder / rel, limit=LIMIT, what="report file",
                                       follow=False, within=self.folder)
        except BenchError:
            return None


def _scan(folder: Path) -> dict[str, str]:
    """The regular files of a report folder (no link, nothing hidden) and their sha256."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):  # never into a linked folder
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            p = Path(dirpath) / name
            if name.startswith(".") or p.is_symlink() or not p.is_file():
                continue
            try:
                data = safeopen.read_bytes(p, limit=LIMIT, what="report file", follow=False)
            except BenchError:
                continue
            out[p.relative_to(folder).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD for the report's files; missing trace pages rendered from the traces."""

    server: Server
    server_version = "containmentbench-report"
    sys_version = ""
    timeout = 30  # a client that sends nothing does not hold a thread for long
    error_message_format = "%(code)d %(message)s\n"
    error_content_type = "text/plain; charset=utf-8"

    def log_message(self, fmt: str, *args: Any) -> None:  # one line, nothing a terminal obeys
        with contextlib.suppress(OSError, ValueError):
            self.server.site.log.write(f"report --serve: {visible(fmt % args)}\n")

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]
        hosts = self.headers.get_all("Host") or []
        allowed = {f"127.0.0.1:{port}", f"localhost:{port}"}
        if port == 80:
            allowed |= {"127.0.0.1", "localhost"}
        return len(hosts) == 1 and hosts[0].strip().lower() in allowed

    def _rel(self) -> str | None:
        try:
            path = unquote(urlsplit(self.path).path, errors="strict")
        except (ValueError, UnicodeDecodeError):
            return None
        if not path.startswith("/") or "\\" in path or "\0" in path:
            return None
        path = posixpath.normpath(path).lstrip("/")
        if path in ("", "."):
            return "index.html"
        if any(part.startswith(".") for part in path.split("/")):
            return None  # hidden files (the folder's record), and every '..'
        return path

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        if not self._host_ok():
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST,
                            "this server answers only for its own address")
            return
        rel = self._rel()
        if rel is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        site = self.server.site
        try:
            body = site.body(rel)
            if body is not None:
                ctype = mimetypes.guess_type(rel)[0] or "application/octet-stream"
                if ctype.startswith("text/"):
                    ctype += "; charset=utf-8"
                self._send(body, ctype)
                return
            m = _PAGE.match(rel)
            if m and site.run.has(m.group(1)):
                with site.lock:
                    site.check()
                html = tracepage.render(site.run.load(m.group(1)),
                                        metrics=self.server.metrics.get(m.group(1)))
                self._send(html.encode(), "text/html; charset=utf-8")
                return
        except Unavailable:
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE,
                            "the study changed since it was verified; not served")
            return
        self.send_error(HTTPStatus.NOT_FOUND)

    def do_HEAD(self) -> None:
        self.do_GET()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    site: Site
    metrics: dict[str, dict[str, Any]]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is not an error; anything else is one escaped line."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        with contextlib.suppress(OSError, ValueError):
            self.site.log.write(f"report --serve: could not answer {client_address[0]}: "
                                f"{visible(type(exc).__name__)}\n")


def make_server(run_dir: str | Path, report: str | Path | None = None, port: int = 8000,
                log: TextIO | None = None) -> Server:
    """The server (not started); a frozen study must verify first."""
    run = RunDir(run_dir)
    folder = Path(report) if report else run.path / "report"
    index = folder / "index.html"
    if not index.is_file() or index.is_symlink():
        raise BenchError("no report here (build it with containmentbench report first)",
                         file=str(folder))
    site = Site(run, folder, log if log is not None else sys.stderr)
    metrics = {r["rollout_id"]: r for r in pl.read_parquet(
        run.path / "metrics" / "rollout_metrics.parquet").iter_rows(named=True)}
    try:
        server = Server(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise BenchError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})",
                         field="port") from None
    server.site, server.metrics = site, metrics
    return server
