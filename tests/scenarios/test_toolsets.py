"""Tools offered per role (scenarios/toolsets.py): what each mode offers, which suites can
provide the domain mode, and that the factor reaches the prompt, the keys and the trace."""

from __future__ import annotations

import json

import pytest

from containmentbench.config.compose import load_study
from containmentbench.defense.loading import load_defense
from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import run_key, shard_key, shards
from containmentbench.runtime.driver import ShardContext, run_episodes, shard_tables
from containmentbench.runtime.episode import Episode, RuntimeConfig
from containmentbench.runtime.state import RolloutSpec
from containmentbench.scenarios.manifest import load_suite
from containmentbench.scenarios.toolsets import (
    DOMAIN_TOOLS,
    MEMORY_TOOLS,
    check_suite,
    missing_step,
    offered,
)
from containmentbench.scenarios.topology import ROLE_TOOLS
from tests.cli.badinput import one_line_error


def test_all_is_the_roles_toolset_and_domain_a_part_of_it():
    for role, tools in ROLE_TOOLS.items():
        for domain in DOMAIN_TOOLS:
            for memory in ("session", "persistent"):
                assert offered(role, domain, memory, "all") == tuple(sorted(tools))
                dom = set(offered(role, domain, memory, "domain"))
                assert dom < set(tools)
                assert (dom & MEMORY_TOOLS != set()) == (memory == "persistent" and
                                                         bool(tools & MEMORY_TOOLS))
                other = set().union(*(t for d, t in DOMAIN_TOOLS.items() if d != domain))
                assert not dom & other - DOMAIN_TOOLS[domain]
    # the agent tools stay with their roles: a supervisor can still delegate
    assert "delegate" in offered("supervisor", "email", "session", "domain")
    assert "handoff" in offered("reviewer", "document", "session", "domain")
    assert offered("primary", "email", "session", "domain") == (
        "draft_email", "lookup_contact", "read_email", "search_email", "send_email",
        "write_task_record")


def test_domain_mode_needs_a_suite_whose_plans_stay_in_their_domain():
    check_suite(load_suite("exposed_real"), "domain", "exposed_real")
    check_suite(load_suite("full_main"), "all", "full_main")
    with pytest.raises(BenchError) as e:
        check_suite(load_suite("smoke"), "domain", "smoke")
    assert e.value.field == "study.tools_offered"
    assert "sm-sec-0001" in str(e.value) and "read_document" in str(e.value)
    # the runtime's prefilled read is not the agent's step: exposed_real prefills carriers
    # outside the domain (a CRM note read for an e-mail task) and still passes
    real = load_suite("exposed_real")
    assert any(s.prefill and s.prefill[0].tool not in
               offered(s.agents[0]["role"], s.domain, s.memory_mode, "domain") for s in real)
    assert all(missing_step(s, "domain") is None for s in real)


def test_a_study_asking_for_a_mode_its_suite_cannot_provide_is_one_line(capsys, tmp_path):
    line = one_line_error(capsys, ["config", "check", "study=smoke",
                                   "study.tools_offered=domain"], tmp_path,
                          ("study.tools_offered",))
    assert "suite 'smoke' cannot offer 'domain' tools" in line
    line = one_line_error(capsys, ["config", "check", "study=smoke",
                                   "study.tools_offered=some"], tmp_path,
                          ("study.tools_offered",))
    assert "known: all, domain" in line
    one_line_error(capsys, ["rollout", "--suite", "smoke", "--stage", "security",
                            "--defense", "none", "--seed", "1", "--out",
                            str(tmp_path / "shard"), "--tools-offered", "domain"], tmp_path,
                   ("study.tools_offered",))


def test_the_mode_is_in_the_keys_only_when_it_is_not_the_default():
    base = ["study=smoke", "study.suite=exposed_real", "study.seeds=[1]",
            "study.defenses=[none]", "study.stages=[clean]"]
    every = load_study(base)
    legacy = json.loads(json.dumps(every))
    del legacy["study"]["tools_offered"]  # a config written before the factor existed
    dom = load_study([*base, "study.tools_offered=domain"])
    s = shards(every)[0]
    assert shard_key(every, s) == shard_key(legacy, s)
    assert run_key(every) == run_key(legacy)
    assert shard_key(dom, s) != shard_key(every, s) and run_key(dom) != run_key(every)


def _system_prompt(mode: str) -> str:
    s = next(x for x in load_suite("exposed_real", "clean") if x.topology == "single")
    ep = Episode(s, load_defense("none").layers, RolloutSpec("r", "t", "sim", "sim", "none", 1, None),
                 RuntimeConfig(tools_offered=mode))
    req = ep.request()
    assert req is not None
    names = {t["name"] for t in req.tools}
    assert names == set(offered("primary", s.domain, s.memory_mode, mode))
    return req.messages[0]["content"]


def test_the_prompt_offers_only_the_chosen_tools():
    every, dom = _system_prompt("all"), _system_prompt("domain")
    assert "update_crm" in every and "update_crm" not in dom
    assert len(every) > 2 * len(dom)  # the schemas are most of the prompt


def test_rollouts_record_the_mode():
    scen = load_suite("exposed_real", "security")
    ctx = ShardContext("t", "sim:default", "sim", "none", 1, "default")
    from containmentbench.models.base import BackendConfig, make_backend

    backend = make_backend(BackendConfig(name="sim", model="sim",
                                         options={"profile": "default"}))
    for mode in ("all", "domain"):
        policy = load_defense("none")
        eps, wall, model_s = run_episodes(scen, policy, backend, ctx,
                                          RuntimeConfig(tools_offered=mode), window=64)
        t = shard_tables(eps, ctx, policy, False, wall, model_s)
        assert set(t["rollouts"].column("tools_offered").to_pylist()) == {mode}
