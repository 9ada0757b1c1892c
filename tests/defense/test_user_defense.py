"""A researcher's own defense, end to end, as a new user brings one: a file in a folder
outside the repository with its own YAML, and the installed example package
(examples/recipient_guard, an entry point), evaluated on the smoke study beside the paper's
defenses and in a three-layer stack with its ablation grid; then an edit of the file makes
exactly its shards stale and a rerun redoes them and nothing else; then the same defense
objects on AgentDojo's banking suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT
from tests.report.test_results_table import assert_tables_rebuild

pytestmark = pytest.mark.slow

GUARD = '''
from containmentbench.defense import Decision, Defense

class NoExternalMail(Defense):
    def authorize(self, call, ctx):
        if not (call.high_risk and call.tainted):
            return Decision.allow("allow_untainted_or_low_risk")
        domains = {w.split("@")[1].strip(".,") for w in " ".join(ctx.tasks).split() if "@" in w}
        for field in ctx.tools[call.tool].recipient_fields:
            value = call.args.get(field) or []
            for v in value if isinstance(value, list) else [value]:
                if str(v).rsplit("@", 1)[-1].strip().lower() not in domains:
                    return Decision.block("block_unnamed_domain", {"recipient": str(v)})
        return Decision.allow("allow_named_domains")
'''


def _env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), env.get("PYTHONPATH", "")])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CB_PROGRESS"] = "0"
    return env


def _sh(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"{' '.join(args)}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A folder outside the repository: the user's defense and YAML, the example package
    installed (its entry point) into a site folder, and a scratch root to run in."""
    home = tmp_path_factory.mktemp("user")
    (home / "mine").mkdir()
    (home / "mine" / "guard.py").write_text(GUARD)
    (home / "mine" / "defenses.yaml").write_text(
        "no_external_mail:\n  impl: guard.py:NoExternalMail\n  method_version: '0.1'\n"
        "  family: recipient_filter\n"
        # the installed example, configured by its entry point name (no impl)
        "recipient_guard:\n  name: recipient_guard\n  method_version: '0.1'\n"
        "  family: task_grounded\n")
    site = home / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(site),
                    str(ROOT / "examples" / "recipient_guard")], check=True, timeout=600)
    root = home / "run"
    root.mkdir()
    for name in ("Snakefile", "workflow", "config", "scenarios"):
        (root / name).symlink_to(ROOT / name)
    return home, root, _env(site)


def _smoke(user, *extra: str) -> list[str]:
    home, _, _ = user
    return [f"defenses_file={home / 'mine' / 'defenses.yaml'}",
            "overrides=[study.seeds=[1],study.defenses=[none,intent_ledger_v2,"
            "tool_boundary+no_external_mail+spotlighting],study.ablation=true]", *extra]


def test_own_defenses_run_beside_the_paper_defenses_with_a_stack_and_its_grid(user):
    _, root, env = user
    snake = [str(Path(sys.executable).parent / "snakemake"), "--cores", "2", "--config",
             "study=smoke"]
    _sh([*snake, *_smoke(user)], root, env)
    run = root / "results" / "smoke" / "sim-default"
    head = json.loads((run / "tables" / "headline.json").read_text())
    shown = {r["defense"] for r in head["findings"]}
    grid = {"tool_boundary+no_external_mail+spotlighting", "tool_boundary", "no_external_mail",
            "spotlighting", "no_external_mail+spotlighting", "tool_boundary+spotlighting",
            "tool_boundary+no_external_mail"}
    assert {"none", "intent_ledger_v2", "recipient_guard"} | grid <= shown
    # per-layer attribution of the three-layer stack, with intervals
    att = pl.read_parquet(run / "tables" / "stack_attribution.parquet")
    stack = att.filter(pl.col("defense") == "tool_boundary+no_external_mail+spotlighting")
    assert set(stack["contained_by"]) == {"tool_boundary", "no_external_mail", "spotlighting",
                                          "no_layer", "not_contained"}
    for st in ("security", "memory_recovery"):
        shares = stack.filter(pl.col("stage") == st)["estimate"].sum()
        assert shares == pytest.approx(1.0)
    assert (stack["ci_low"] <= stack["estimate"]).all() and \
        (stack["estimate"] <= stack["ci_high"]).all()
    # the stack contains what its first layer would alone on security
    sec = stack.filter(pl.col("stage") == "security")
    assert sec.filter(pl.col("contained_by") == "not_contained")["estimate"][0] == 0.0
    # every decision records the layer that made it
    ev = pl.read_parquet(next((run / "traces").rglob(
        "tool_boundary+no_external_mail+spotlighting/seed=1/security/*/events.parquet")))
    dec = ev.filter(pl.col("kind").is_in(["decision", "output_check"]))
    assert dec.height and set(dec["layer"].drop_nulls()) <= {
        "tool_boundary", "no_external_mail", "spotlighting"} and dec["layer"].null_count() == 0
    # cost as a result: in its table and in results.parquet, with intervals
    res = pl.read_parquet(run / "tables" / "results.parquet")
    cost = res.filter(pl.col("source_table") == "defense_cost")
    assert set(cost["defense"]) >= {"none", "recipient_guard", "no_external_mail"}
    assert cost["ci_low"].null_count() == 0
    assert res.filter(pl.col("source_table") == "defense_overhead").height == 0  # wall clock
    # a study of stacks and user defenses: every table rebuilds from results.parquet alone
    assert "stack_attribution" in assert_tables_rebuild(run)
    assert (run / "tables" / "defense_overhead.parquet").exists()
    # the report shows the user's defenses like the others
    assert "recipient_guard" in (run / "report" / "index.html").read_text()


def test_editing_a_defense_redoes_exactly_its_shards(user):
    home, root, env = user
    run = root / "results" / "smoke" / "sim-default"
    before = {p.parent: p.stat().st_mtime_ns for p in (run / "traces").rglob("SHA256SUMS")}
    with open(home / "mine" / "guard.py", "a") as fh:
        fh.write("\n# an edit\n")
    status = _sh([str(Path(sys.executable).parent / "containmentbench"), "status",
                  "study=smoke", *_smoke(user)[:1], "study.seeds=[1]",
                  "study.defenses=[none,intent_ledger_v2,"
                  "tool_boundary+no_external_mail+spotlighting]", "study.ablation=true"],
                 root, env)
    mine = {d for d in before if "no_external_mail" in d.as_posix().split("/traces/")[1]}
    assert f"{len(mine)} stale shard(s): defense no_external_mail's code changed" in status
    _sh([str(Path(sys.executable).parent / "snakemake"), "--cores", "2", "--config",
         "study=smoke", *_smoke(user)], root, env)
    after = {p.parent: p.stat().st_mtime_ns for p in (run / "traces").rglob("SHA256SUMS")}
    redone = {d for d in before if after[d] != before[d]}
    assert redone == mine and len(mine) == 4 * 4  # its four stacks x four stages


def test_the_same_defenses_run_on_agentdojo_banking(user):
    pytest.importorskip("agentdojo")
    home, root, env = user
    _sh([str(Path(sys.executable).parent / "snakemake"), "--cores", "2", "--config",
         "study=agentdojo_smoke", f"defenses_file={home / 'mine' / 'defenses.yaml'}",
         "overrides=[study.adapter.suites=[banking],study.defenses=[none],"
         "results_dir=results/ad]"], root, env)
    run = root / "results" / "ad" / "agentdojo_smoke" / "agentdojo-ground_truth"
    m = pl.read_parquet(run / "metrics" / "rollout_metrics.parquet")
    harm = {d: m.filter((pl.col("defense") == d) & (pl.col("stage") == "security"))
            ["committed_harm"].mean() for d in ("none", "recipient_guard", "no_external_mail")}
    assert harm["none"] > 0  # the positive control: the ground-truth victim follows
    assert harm["recipient_guard"] < harm["none"]  # IBANs the user did not name are refused
    head = json.loads((run / "tables" / "headline.json").read_text())
    assert {"recipient_guard", "no_external_mail"} <= {r["defense"] for r in head["findings"]}
