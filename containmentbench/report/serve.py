"""``containmentbench report RUN_DIR --serve``: the report over HTTP on 127.0.0.1, with a
trace page for any rollout made on demand.

The static report has a page for every rollout with a committed violation, an error or a
case-study role (``report/build.py``); writing one for each of 17,640 rollouts would make
the report several times the size of the traces. Served, the rollout index links every
rollout, and a request for ``rollouts/<id>.html`` that is not in the folder is rendered from
the traces in memory (nothing is written). Only files inside the report folder are served
(no ``..``, no absolute path, no symlink out of it), only GET and HEAD, only on the loopback
interface, and the study must pass ``verify`` first (as ``report`` on a frozen study does).
"""

from __future__ import annotations

import posixpath
import re
import sys
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import polars as pl

from containmentbench.errors import BenchError
from containmentbench.report import tracepage
from containmentbench.report.rundir import RunDir

_PAGE = re.compile(r"^rollouts/(r-[0-9a-f]+)\.html$")


class Handler(SimpleHTTPRequestHandler):
    """Files of the report folder; missing trace pages rendered from the run's traces."""

    run: RunDir
    metrics: dict[str, dict[str, Any]]

    def __init__(self, *args: Any, run: RunDir, metrics: dict[str, dict[str, Any]],
                 **kw: Any) -> None:
        self.run, self.metrics = run, metrics
        super().__init__(*args, **kw)

    def log_message(self, fmt: str, *args: Any) -> None:  # one quiet line per request
        sys.stderr.write(f"report --serve: {fmt % args}\n")

    def _rel(self) -> str | None:
        path = posixpath.normpath(unquote(urlsplit(self.path).path)).lstrip("/")
        if path in ("", "."):
            return "index.html"
        if path.startswith("..") or "\\" in path or "\0" in path:
            return None
        return path

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        rel = self._rel()
        root = Path(self.directory).resolve()
        if rel is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        target = (root / rel).resolve()
        if not target.is_relative_to(root):
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        if target.is_file():
            super().do_GET()
            return
        m = _PAGE.match(rel)
        if m and self.run.has(m.group(1)):
            html = tracepage.render(self.run.load(m.group(1)), metrics=self.metrics.get(
                m.group(1)))
            self._send(html.encode(), "text/html; charset=utf-8")
            return
        self.send_error(HTTPStatus.NOT_FOUND)

    def do_HEAD(self) -> None:
        self.do_GET()

    def list_directory(self, path: Any) -> None:  # no folder listings
        self.send_error(HTTPStatus.NOT_FOUND)
        return None


def make_server(run_dir: str | Path, report: str | Path | None = None, port: int = 8000
                ) -> ThreadingHTTPServer:
    """The server (not started); the study is verified first when it is frozen."""
    run = RunDir(run_dir)
    folder = Path(report) if report else run.path / "report"
    if not (folder / "index.html").is_file():
        raise BenchError("no report here (build it with containmentbench report first)",
                         file=str(folder))
    if (run.path / "MANIFEST.json").exists():
        from containmentbench.report.build import check_frozen
        check_frozen(run)
    metrics = {r["rollout_id"]: r for r in pl.read_parquet(
        run.path / "metrics" / "rollout_metrics.parquet").iter_rows(named=True)}
    handler = partial(Handler, run=run, metrics=metrics, directory=str(folder))
    try:
        return ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise BenchError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})",
                         field="port") from None
