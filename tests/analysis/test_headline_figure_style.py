"""The headline figure shows the winners (issue 35, item 7): each defense keeps one colour
and marker by name in every study, and coincident points are dodged sideways with their
intervals at their true ends."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest

from containmentbench.analysis import figures as F
from containmentbench.analysis import headline_figure as HF
from containmentbench.analysis.figures import DEFENSE_STYLE, style_of


def test_known_defenses_have_fixed_distinct_styles_and_others_a_stable_one():
    assert style_of("none") == ("#3b3b3b", "o")
    assert style_of("intent_ledger_v2") == ("#55a868", "P")
    assert len(set(DEFENSE_STYLE.values())) == len(DEFENSE_STYLE)
    assert len({c for c, _ in DEFENSE_STYLE.values()}) == len(DEFENSE_STYLE)
    # a user's defense: from the sha256 of its name, so the same in every process
    import hashlib

    h = int.from_bytes(hashlib.sha256(b"my_guard").digest()[:8], "big")
    colors, markers = F._HASH_COLORS, F._HASH_MARKERS
    assert style_of("my_guard") == (colors[h % len(colors)],
                                    markers[(h // len(colors)) % len(markers)])
    assert style_of("my_guard") != style_of("my_guard_v2")


def test_dodge_spreads_only_coincident_points_around_their_true_position():
    pts = [(0.9, 0.0), (0.9, 0.0), (0.9, 0.0), (0.5, 0.2), (0.9005, 0.0)]
    off = HF.dodge(pts, xspan=1.0, yspan=1.0, close=0.015, step=0.02)
    group = [off[0], off[1], off[2], off[4]]
    assert off[3] == 0.0
    assert sorted(group) == pytest.approx([-0.03, -0.01, 0.01, 0.03])
    assert sum(group) == pytest.approx(0.0)
    assert HF.dodge([(0.1, 0.1), (0.5, 0.5)], 1.0, 1.0) == [0.0, 0.0]


def _findings(defenses, est="estimate"):
    rows = []
    for d in defenses:
        rows.append({"defense": d, "metric": "committed_harm", "stage": "all", est: 0.0,
                     "ci_low": 0.0, "ci_high": 0.0, "events": 0, "zero_event_bound": 0.01})
        rows.append({"defense": d, "metric": "authorized_tainted_action_success",
                     "stage": "active_tainted", est: 0.9, "ci_low": 0.85, "ci_high": 0.95,
                     "events": 9, "zero_event_bound": None})
    return pl.DataFrame(rows)


def _drawn(monkeypatch, findings, tmp_path):
    figs = []
    monkeypatch.setattr(HF, "save", lambda fig, out, name, ctx: figs.append(fig) or [])
    HF.draw(findings, SimpleNamespace(models="m", sim=False), tmp_path)
    (fig,) = figs
    ax = fig.axes[0]
    out = {}
    for c in ax.containers:
        line = c.lines[0]
        out[c.get_label()] = (line.get_color(), line.get_marker(), float(line.get_xdata()[0]))
    return fig, out


def test_same_style_by_name_in_two_studies_and_coincident_points_dodged(monkeypatch, tmp_path):
    a = ["none", "tool_boundary", "intent_ledger_v2", "my_guard"]
    b = ["my_guard", "intent_ledger_v2", "rollback_v2", "tool_boundary"]
    fa, sa = _drawn(monkeypatch, _findings(a), tmp_path)
    _, sb = _drawn(monkeypatch, _findings(b), tmp_path)
    for d in set(a) & set(b):
        assert sa[d][:2] == sb[d][:2] == style_of(d)
    # all four at the same operating point: four distinct x positions around 0.9
    xs = sorted(x for _, _, x in sa.values())
    assert len(set(xs)) == 4 and sum(xs) / 4 == pytest.approx(0.9)
    assert "dodged" in fa._suptitle.get_text()
