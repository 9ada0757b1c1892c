"""Every link of the report stays inside the report folder (issue 35, item 5): each href and
src of every page resolves to a file in the folder, whether the report is opened where the
pipeline wrote it, written elsewhere with ``--out``, moved (as in the ``snakemake --report``
archive) or served by ``report --serve``; the data files it links to are byte-identical
copies of the study's, hashed by ``freeze`` with the rest of the report."""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import threading
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from containmentbench.report.build import build_report
from tests.conftest import ROOT, SMALL_SMOKE, SNAKEMAKE, copy_finished_smoke

_LINK = re.compile(r'(?:href|src)="([^"]*)"')


def links(folder: Path) -> list[tuple[str, str]]:
    """(page, link) of every href and src of every page of the report folder."""
    out = []
    for p in sorted(folder.rglob("*.html")):
        for u in _LINK.findall(p.read_text()):
            out.append((p.relative_to(folder).as_posix(), html.unescape(u)))
    return out


def unresolved(folder: Path) -> list[tuple[str, str]]:
    """The links that name a scheme or host, or no existing file inside ``folder``."""
    root = folder.resolve()
    bad = []
    for page, u in links(folder):
        sp = urlsplit(u)
        if sp.scheme or sp.netloc:
            bad.append((page, u))
            continue
        if not sp.path:  # a fragment of the page itself
            continue
        target = ((root / page).parent / unquote(sp.path)).resolve()
        if not target.is_file() or root not in target.parents:
            bad.append((page, u))
    return bad


def test_every_link_resolves_inside_the_report_folder(run_dir):
    found = links(run_dir / "report")
    # the data links the index used to point outside the folder are there, inside it
    index = {u for p, u in found if p == "index.html"}
    assert "tables/results.parquet" in index and "tables/table11_utility.csv" in index
    assert not [u for p, u in found if "/" not in p and u.startswith("../")]
    assert len(found) > 500
    assert unresolved(run_dir / "report") == []


def test_out_and_moved_reports_resolve_every_link(run_dir, tmp_path):
    """``report --out`` elsewhere, and a report folder moved away from its study (what the
    ``snakemake --report`` archive holds): the same links, all inside."""
    out = build_report(run_dir, tmp_path / "elsewhere" / "rep").parent
    assert unresolved(out) == []
    moved = shutil.copytree(run_dir / "report", tmp_path / "archive" / "data" / "report")
    assert unresolved(moved) == []
    assert sorted(links(moved)) == sorted(links(out))


def test_linked_data_files_are_the_studys_bytes_and_frozen(run_dir):
    rep = run_dir / "report"
    copies = [p for d in ("tables", "audit") if (rep / d).is_dir()
              for p in sorted((rep / d).rglob("*")) if p.is_file()]
    copies += [p for p in (rep / "figures").iterdir() if p.suffix != ".png"]
    assert len(copies) > 20
    files = json.loads((run_dir / "MANIFEST.json").read_text())["files"]
    for p in copies:
        rel = p.relative_to(rep).as_posix()
        assert p.read_bytes() == (run_dir / rel).read_bytes(), rel
        assert files[f"report/{rel}"] == files[rel], rel  # hashed by freeze, same digest


def test_served_report_answers_every_link(run_dir):
    """``report --serve``: every link of every page (fragments dropped) is 200."""
    from containmentbench.report.serve import make_server

    server = make_server(run_dir, port=0, log=io.StringIO())
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        urls = set()
        for page, u in links(run_dir / "report"):
            path = urlsplit(u).path
            if path:
                urls.add(urljoin(f"/{page}", path))
        assert len(urls) > 50
        for url in sorted(urls):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{url}", method="HEAD")
            with urllib.request.urlopen(req) as resp:
                assert resp.status == 200, url
    finally:
        server.shutdown()
        server.server_close()


def archived_report(finished_smoke, tmp_path) -> Path:
    """The study report unpacked from ``snakemake --report out.zip`` of a copy of the
    finished smoke study (a folder under ``data/raw/<hash>/`` of the archive)."""
    import subprocess
    import zipfile

    base = copy_finished_smoke(finished_smoke, tmp_path / "study")
    archive = tmp_path / "report.zip"
    res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(base),
                          "--cores", "1", "--report", str(archive), "--config", "study=smoke",
                          f"overrides=[results_dir=results,{SMALL_SMOKE}]"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path / "unzipped")
    reports = [p.parent for p in (tmp_path / "unzipped").rglob("rollouts.html")
               if (p.parent / "index.html").is_file()]
    assert len(reports) == 1
    return reports[0]


@pytest.mark.slow
def test_snakemake_report_archive_resolves_every_link(finished_smoke, tmp_path):
    """``snakemake --report out.zip``: the study report inside the archive resolves every
    link of every page inside itself."""
    report = archived_report(finished_smoke, tmp_path)
    assert (report / "tables" / "results.parquet").is_file()
    assert len(links(report)) > 500
    assert unresolved(report) == []
