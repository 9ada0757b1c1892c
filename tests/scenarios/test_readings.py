"""The competent/incompetent reading table (scenarios/readings.py): every task template has
hand-written variants, each run through the runtime under none and intent_ledger_v2; a
competent variant passes the oracle and is not blocked, an incompetent one fails; a template
without variants is refused."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from containmentbench.errors import BenchError
from containmentbench.scenarios import readings as R
from containmentbench.scenarios.design import SUITES
from containmentbench.scenarios.manifest import load_suite
from tests.conftest import ROOT, run_cli


def test_every_template_has_competent_and_incompetent_variants():
    for name, variants in R.READINGS.items():
        kinds = Counter(v.kind for v in variants)
        assert kinds["reading"] >= 2, name
        assert kinds["content"] + kinds["authority"] >= 2, name
        assert len({v.name for v in variants}) == len(variants), name
        assert all(v.competent == (v.kind == "reading") for v in variants), name


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_generated_scenario_has_a_template_with_variants(suite):
    for s in load_suite(ROOT / "scenarios" / suite):
        assert R.template_of(s) in R.READINGS, s.id


def test_every_template_and_variant_is_exercised_by_full_main(full_main):
    seen: Counter[tuple[str, str]] = Counter()
    for s in full_main:
        for v, _ in R.variants_of(s):
            seen[(R.template_of(s), v.name)] += 1
    want = {(t, v.name) for t, vs in R.READINGS.items() for v in vs}
    assert want == set(seen), want ^ set(seen)


@pytest.mark.parametrize("suite", ["smoke", "stress", "exposed_smoke", "full_main"])
def test_competent_readings_pass_and_incompetent_ones_fail(suite):
    results = R.check(load_suite(ROOT / "scenarios" / suite))
    bad = [(r.scenario_id, r.variant, r.problems) for r in results if not r.ok]
    assert not bad, bad[:10]
    summ = R.summary(results)
    assert summ["total"] == len(results) > 0


def test_the_judge_fails_a_competent_reading_the_oracle_rejects(smoke):
    """The judge is not vacuous: against an oracle that also wants another value, the
    'Name <addr>' reading is reported."""
    import dataclasses

    s = next(x for x in smoke if R.template_of(x) == "email_send")
    v = next(v for v in R.READINGS["email_send"] if v.name == "to_named")
    req = [dict(r) for r in s.oracle["required"]]
    to = req[0]["args"]["to"]["value"]
    req[0] = {**req[0], "args": {**req[0]["args"], "to": {"op": "contains_all",
                                                          "value": [to, "zzz"]}}}
    strict = dataclasses.replace(s, oracle={**s.oracle, "required": req})
    [(variant, vs)] = [(x, y) for x, y in R.variants_of(strict) if x is v]
    none, v2 = R._replay([vs], "none")[0], R._replay([vs], "intent_ledger_v2")[0]
    assert "the oracle rejects it under none" in R.judge(variant, vs, none, v2)


def test_a_template_without_variants_is_refused(smoke):
    import dataclasses

    s = smoke[0]
    odd = dataclasses.replace(s, oracle={**s.oracle, "required": [
        {"tool": "rollback", "args": {}}]})
    with pytest.raises(BenchError) as e:
        R.template_of(odd)
    msg = e.value.render()
    assert s.id in msg and "\n" not in msg and e.value.field == "oracle.required"


def test_check_cli_refuses_a_planted_template_with_exit_2(tmp_path, capsys):
    dst = tmp_path / "smoke"
    shutil.copytree(ROOT / "scenarios" / "smoke", dst)
    p = dst / "clean.jsonl"
    lines = p.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["oracle"]["required"] = [{"tool": "rollback", "args": {}}]
    lines[0] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    assert run_cli("scenarios", "check", "--suite", dst) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rec["id"] in err and "competent-variant readings" in err
