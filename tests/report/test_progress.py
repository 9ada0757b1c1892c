"""Progress lines: done/total, rate and ETA; plain lines off a terminal; silent on request."""

from __future__ import annotations

import io
import re

from containmentbench.progress import Progress, progress


def test_plain_lines_carry_done_total_rate_eta():
    buf = io.StringIO()
    p = Progress(10, "metrics: rollouts", unit="rollout", stream=buf, interval=0, tty=False)
    for _ in range(4):
        p.update()
    p.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 5  # every update (interval 0) and the closing line
    assert re.match(r"metrics: rollouts: 1/10 \(10%\), [\d.]+ rollout/s, elapsed 00:00, "
                    r"ETA \d\d:\d\d$", lines[0])
    assert lines[-1].startswith("metrics: rollouts: 4/10 (40%)")
    assert "\r" not in buf.getvalue()


def test_interval_throttles_lines():
    buf = io.StringIO()
    with Progress(1000, "x", stream=buf, interval=3600, tty=False) as p:
        for _ in range(1000):
            p.update()
    assert buf.getvalue().splitlines() == [buf.getvalue().splitlines()[-1]]
    assert "1000/1000 (100%)" in buf.getvalue() and "ETA" not in buf.getvalue()


def test_disabled(monkeypatch, capsys):
    monkeypatch.setenv("CB_PROGRESS", "0")
    assert list(progress(range(3), "quiet")) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_iterator_counts_total(monkeypatch, capsys):
    monkeypatch.setenv("CB_PROGRESS_INTERVAL", "0")
    assert list(progress([1, 2], "two")) == [1, 2]
    err = capsys.readouterr().err
    assert "two: 2/2 (100%)" in err
