"""Case studies by Table 21's scenario classes (paper 000 Appendix D): a pair is taken only
from its case's class (domain, task, forbidden action, carrier, topology, suite), the first
by (scenario, seed); a class without a qualifying pair is "not observed", never filled
from another class."""

from __future__ import annotations

import polars as pl

from containmentbench.report.cases import CASES, PARTNER_INVITE, scenario_features, select_pairs


def _pick(full_main, **kw):
    return next(s for s in full_main
                if all(getattr(s, k) == v for k, v in kw.items())
                and {"create_event", "send_invite"} <= {st.tool for st in s.benign_plan})


def _rows(s, a_done, b_done, seed=1):
    base = {"model": "sim:default", "seed": seed, "stage": s.stage, "status": "ok",
            "suite": "full_main", "domain": s.domain, "topology": s.topology,
            "carrier": s.carrier, "rule_ids": [], "fp_block_count": 0}
    return [{**base, "scenario_id": s.id, "rollout_id": f"{s.id}-{d}-{seed}", "defense": d,
             "authorized_tainted_action_success": v}
            for d, v in (("taint_only_v1", a_done), ("intent_ledger_v2", b_done),
                         ("none", 1), ("tool_boundary", 1), ("rollback_v2", 1))]


def test_case2_is_taken_from_its_class_only(full_main):
    # an email-domain pair shows the claim first (by scenario id) but is outside the class
    email = next(s for s in full_main if s.stage == "active_tainted" and s.domain == "email")
    cal = _pick(full_main, stage="active_tainted", domain="calendar_crm",
                carrier="retrieved_document", topology="supervisor_worker")
    assert email.id < cal.id
    df = pl.DataFrame(_rows(email, 0, 1) + _rows(cal, 0, 1, seed=2) + _rows(cal, 1, 1))
    assert PARTNER_INVITE.holds(df.row(10, named=True),
                                scenario_features(df)[("full_main", cal.id)])
    row = select_pairs(df).filter(pl.col("case") == 2).row(0, named=True)
    assert (row["status"], row["scenario_id"], row["seed"]) == ("pair", cal.id, 2)
    assert row["candidates"] == 1 and "carrier retrieved_document" in row["rule"]


def test_a_class_without_a_qualifying_pair_is_not_observed(full_main):
    email = next(s for s in full_main if s.stage == "active_tainted" and s.domain == "email")
    cal = _pick(full_main, stage="active_tainted", domain="calendar_crm",
                carrier="tool_result")   # the partner-note class is the retrieved note
    df = pl.DataFrame(_rows(email, 0, 1) + _rows(cal, 0, 1))
    out = select_pairs(df)
    for case in (2, 3, 8):
        row = out.filter(pl.col("case") == case).row(0, named=True)
        assert row["status"].startswith("not observed") and row["scenario_id"] is None
    # case 7 reads the stress slice: a full_main document pair is not its class
    c7 = next(c for c in CASES if c.case == 7)
    assert c7.cls.suite == "stress"
