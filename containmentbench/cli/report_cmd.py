"""``containmentbench report RUN_DIR | study=NAME [key=value ...]``: the static HTML report of
a study (``--serve``: over HTTP on 127.0.0.1, every rollout's trace page made on demand)."""

from __future__ import annotations

import argparse
import sys

from containmentbench.cli import argtypes as T
from containmentbench.cli import study_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="static HTML report (headline, tables, figures, rollout "
                                      "index, trace pages, case studies); opens from the "
                                      "file system")
    study_args.add(p, run_dir=True)
    p.add_argument("--out", default=None, help="report folder (default: RUN_DIR/report)")
    p.add_argument("--force", action="store_true", help="replace a different earlier report "
                   "(moved aside to .<name>.replaced-<n>, never deleted)")
    p.add_argument("--before-freeze", action="store_true",
                   help="pipeline use: build before freeze hashes it (no MANIFEST check)")
    p.add_argument("--workers", type=T.int_range(1, 64), default=1,
                   help="processes for the trace pages (default 1; the bytes are the same)")
    p.add_argument("--serve", action="store_true",
                   help="serve the built report on http://127.0.0.1:PORT/ and make the trace "
                        "page of any rollout on demand (nothing is written); Ctrl-C stops")
    p.add_argument("--port", type=T.int_range(0, 65535), default=8000,
                   help="port of --serve on 127.0.0.1 (default 8000; 0 picks a free one)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from containmentbench.errors import BenchError

    dirs = study_args.run_dirs(args.target, "report")
    if args.out and len(dirs) > 1:
        raise BenchError("--out names one folder; the study has several models (give one "
                         "run directory)", field="out")
    if args.serve:
        from containmentbench.report.serve import make_server

        if len(dirs) > 1:
            raise BenchError("--serve serves one run; give its run directory or model=...",
                             field="serve")
        if not 0 <= args.port <= 65535:
            raise BenchError("must be a port number from 0 to 65535", field="port")
        server = make_server(dirs[0], args.out, args.port)
        print(f"serving {dirs[0]}/report on http://127.0.0.1:{server.server_address[1]}/ "
              "(Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
    from pathlib import Path

    from containmentbench.metrics.schema import check_metrics_file
    from containmentbench.report.build import build_report

    for d in dirs:
        metrics = Path(d) / "metrics" / "rollout_metrics.parquet"
        if metrics.exists():  # checked before any page is rendered (one line naming a column)
            check_metrics_file(metrics)
        index = build_report(d, args.out, args.before_freeze, args.force, args.workers)
        print(index.resolve())
    return 0
