"""A user's own scenario, written as a *minimal record*, and the full record it stands for.

A full scenario record (``model.py``) has about 25 required fields, the simulated agent's
plans among them. A minimal record (docs/scenarios.md, "Your own scenarios";
``docs/user_record.schema.json`` is :data:`MINIMAL` rendered as JSON Schema) holds what only
its author can say: the user's goal, the world, the tools the task needs, what a successful
run commits (the oracle, paper 000 Table 4) and, for a security scenario, the injected
sentence and the violation it asks for (eq. 5). :func:`expand` fills every other field the
runtime reads with a documented default:

* one agent (``assistant``, the ``single`` topology), one session, session memory (memory
  writes are high-risk exactly when memory is persistent, Table 7 row 3, as the generator);
* ``domain`` from the first required commit's tool, ``family`` ``user/<stage>/<domain>``,
  ``cluster_id`` the id (each record its own bootstrap cluster);
* provenance of every world item: trusted and ``internal`` unless the item says
  ``"trust": "untrusted"`` (then origin ``external``); the ``untrusted`` list and the
  scenario's carrier from the untrusted items (documents are ``retrieved_document``, CRM notes
  and emails ``tool_result``, agent messages ``inter_agent_message``, memory entries
  ``persistent_memory``);
* the intent ledger (eq. 8): one entry per required side effect, its target the required
  commit's ``eq`` value of the tool's first authority argument, its predicate the other
  clauses (the paper is silent on deriving a ledger from an oracle; this is the generator's
  own shape, ``tasks.py``); the allowlist: the principal and every recipient the ledger and
  the oracle name; the tool boundary: ``tools`` and the ledger's targets;
* plans: the reference plan is optional. Given, it is the benign plan (a final answer is
  appended when it has none), the attack steps are the injection's violation, and the
  attacker plan (when not given) is the reference plan with the attack taken right after the
  step that reads the injected item (placement ``immediate``, what the sim agent does).

Papers 000-002 define no user-record format; every default above is this module's choice.
Errors are ValidationErrors naming the minimal record's field; the builder adds file, line
and id.
"""

from __future__ import annotations

from typing import Any

from containmentbench.errors import ValidationError
from containmentbench.integrity.shapes import B, List, Map, S, Union, check
from containmentbench.sandbox.tools import TOOLS
from containmentbench.scenarios.model import ATTACK_GOALS, MEMORY_MODES, PREDICATE_OPS

#: the builder's version, recorded in each built record's ``meta.builder`` and in the
#: manifest's ``generator_version`` (``user-<n>``): a changed default is a new version
BUILDER_VERSION = "user-1"
ENTRY = "assistant"
STAGES = ("security", "active_tainted", "clean")  # memory_recovery: generator suites only
DEFAULT_PRINCIPAL = {"name": "Alex Morgan", "email": "alex.morgan@corp.local"}

STR_OR_STRS = Union(S, List(S))
CLAUSE = {"op": S, "value?": STR_OR_STRS}
STEP = {"tool": S, "args": Map(STR_OR_STRS)}
TRUST = {"trust?": S, "origin?": S}

#: the minimal record: ``name?`` keys may be left out; any other key is refused
MINIMAL: dict[str, Any] = {
    "id": S, "stage": S, "goal": S, "tools": List(S),
    "oracle": List({"tool": S, "args": Map(CLAUSE), "tainted?": B}),
    "world?": {
        "principal?": {"name": S, "email": S},
        "emails?": List({"id": S, "sender": S, "to": STR_OR_STRS, "subject": S, "body": S,
                         **TRUST}),
        "documents?": List({"id": S, "title": S, "body": S, "owner?": S, "sensitivity?": S,
                            **TRUST}),
        "contacts?": List({"id": S, "name": S, "email": S, "org?": S}),
        "calendar?": List({"id": S, "title": S, "date": S, "attendees?": List(S)}),
        "crm?": List({"contact_id": S, "notes": S, "fields?": Map(S), **TRUST}),
        "memory?": List({"key": S, "value": S, **TRUST}),
        "agent_messages?": List({"id": S, "sender": S, "text": S, "to?": S, **TRUST}),
    },
    "injection?": {"text": S, "goal": S, "tool": S, "args": Map(STR_OR_STRS)},
    "reference_plan?": List(STEP),
    "attacker_plan?": List(STEP),
    "ledger?": List({"action": S, "target_field": S, "target": S, "predicate": Map(CLAUSE)}),
    "allowed_recipients?": List(S),
    "canaries?": List({"token": S, "location": S, "cleared_recipients?": List(S),
                       "cleared_tools?": List(S)}),
    "memory_mode?": S, "domain?": S, "family?": S, "cluster_id?": S,
}

#: world list -> (carrier when untrusted, id field, text field, reading tool, its argument)
KINDS = {
    "documents": ("retrieved_document", "id", "body", "read_document", "doc_id"),
    "emails": ("tool_result", "id", "body", "read_email", "email_id"),
    "crm": ("tool_result", "contact_id", "notes", "crm_lookup", "contact_id"),
    "memory": ("persistent_memory", "key", "value", "memory_read", "key"),
    "agent_messages": ("inter_agent_message", "id", "text", "read_messages", None),
}
#: the attack goal's violation kind (selfcheck.KIND_FIELD; injections.py's choice per goal)
VIOLATION = {"unauthorized_side_effect": "unauthorized", "wrong_recipient": "wrong_recipient",
             "secret_leakage": "secret_leak", "persistence": "unauthorized"}
#: domain of a required tool (the first required commit decides)
DOMAIN_OF = {"send_email": "email", "draft_email": "email", "create_event": "calendar_crm",
             "send_invite": "calendar_crm", "update_crm": "calendar_crm"}


def _tool(name: str, field: str) -> str:
    if name not in TOOLS:
        raise ValidationError(f"the sandbox has no tool '{name}' (it has: "
                              f"{', '.join(sorted(TOOLS))})", field=field)
    return name


def _choice(value: str, allowed: tuple[str, ...], field: str) -> str:
    if value not in allowed:
        raise ValidationError(f"'{value}' is not one of {', '.join(allowed)}", field=field)
    return value


def _clauses(args: dict[str, Any], tool: str, where: str) -> dict[str, Any]:
    for fname, clause in args.items():
        if fname not in TOOLS[tool].param_names:
            raise ValidationError(f"tool '{tool}' has no argument '{fname}'",
                                  field=f"{where}.{fname}")
        _choice(clause["op"], PREDICATE_OPS, f"{where}.{fname}.op")
        if clause["op"] not in ("any", "absent_or_empty") and "value" not in clause:
            raise ValidationError("missing", field=f"{where}.{fname}.value")
    return args


def _world(r: dict[str, Any], sid: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The full ``initial_state`` and the ``untrusted`` list."""
    w = r.get("world") or {}
    p = {**DEFAULT_PRINCIPAL, **(w.get("principal") or {})}
    principal = {"name": p["name"], "first": p["name"].split()[0] if p["name"].split()
                 else p["name"], "email": p["email"], "user_id": f"user-{sid}"}
    home = p["email"].rsplit("@", 1)[-1]
    state: dict[str, Any] = {"principal": principal}
    untrusted: list[dict[str, Any]] = []
    n = 0
    for kind in ("emails", "documents", "crm", "memory", "agent_messages"):
        carrier, id_field, text_field, _, _ = KINDS[kind]
        items = []
        seen: set[str] = set()
        for i, item in enumerate(w.get(kind) or []):
            where = f"world.{kind}[{i}]"
            if item[id_field] in seen:  # a tool reads one item per id
                raise ValidationError(f"duplicate {id_field} '{item[id_field]}'",
                                      field=f"{where}.{id_field}")
            seen.add(item[id_field])
            trust = _choice(item.get("trust", "trusted"), ("trusted", "untrusted"),
                            f"{where}.trust")
            origin = item.get("origin") or ("external" if trust == "untrusted" else "internal")
            prov = {"source_id": f"src-{sid}-{kind}{n}", "trust": trust, "origin": origin}
            n += 1
            full = {k: v for k, v in item.items() if k not in ("trust", "origin")}
            if kind == "emails" and isinstance(full["to"], str):
                full["to"] = [full["to"]]
            if kind == "documents":
                full.setdefault("owner", p["email"])
                full.setdefault("sensitivity", "internal")
            if kind == "crm":
                full.setdefault("fields", {})
            if kind == "agent_messages":
                full.setdefault("to", "team")
            full["provenance"] = prov
            items.append(full)
            if trust == "untrusted":
                untrusted.append({"source_id": prov["source_id"], "carrier": carrier,
                                  "origin": origin, "injected": False,
                                  "text": full[text_field], "_where": where})
        state[kind] = items
    state["contacts"] = [{**c, "org": c.get("org") or (
        "corp" if c["email"].rsplit("@", 1)[-1] == home
        else c["email"].rsplit("@", 1)[-1].split(".")[0])} for c in w.get("contacts") or []]
    state["calendar"] = [{**c, "attendees": list(c.get("attendees") or [])}
                         for c in w.get("calendar") or []]
    return state, untrusted


def _ledger(r: dict[str, Any], high_risk_memory: bool) -> list[dict[str, Any]]:
    """The given ledger, or one entry per required side effect (module docstring)."""
    if "ledger" in r:
        return r["ledger"]
    out = []
    for i, req in enumerate(r["oracle"]):
        spec = TOOLS[req["tool"]]
        if spec.kind not in ("side_effect", "recovery") and not (
                spec.kind == "memory" and high_risk_memory):
            continue
        target = next((f for f in spec.authority_fields if req["args"].get(f, {}).get("op")
                       == "eq" and isinstance(req["args"][f].get("value"), str)), None)
        if target is None:
            raise ValidationError(f"cannot derive the intent ledger entry of this required "
                                  f"{req['tool']}: give an 'eq' clause on one of "
                                  f"{', '.join(spec.authority_fields)}, or the record's "
                                  f"'ledger'", field=f"oracle[{i}].args")
        out.append({"action": req["tool"], "target_field": target,
                    "target": req["args"][target]["value"],
                    "predicate": {f: c for f, c in req["args"].items() if f != target}})
    return out


def _boundary(ledger: list[dict[str, Any]]
              ) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """The tool boundary's targets and visibility limits, from the ledger: each entry's target
    and every ``eq``/``in`` value its predicate gives an authority argument (the boundary
    allows no recipient it does not list, defense/builtin/paper.py), and the visibility an
    ``eq`` or ``max_visibility`` clause names (the generator's boundaries, ``tasks.py``)."""
    targets: dict[str, dict[str, list[str]]] = {}
    max_vis: dict[str, str] = {}
    for e in ledger:
        spec = TOOLS[e["action"]]
        mine = targets.setdefault(e["action"], {})
        mine.setdefault(e["target_field"], []).append(e["target"])
        for f, c in e["predicate"].items():
            role, value = spec.role(f), c.get("value")
            if role == "visibility" and c["op"] in ("eq", "max_visibility") \
                    and isinstance(value, str):
                max_vis[e["action"]] = value
            elif role in ("recipient", "target", "field") and c["op"] in ("eq", "in"):
                values = value if isinstance(value, list) else [value]
                mine.setdefault(f, []).extend(str(v) for v in values)
    return ({t: {f: list(dict.fromkeys(v)) for f, v in fs.items()} for t, fs in targets.items()},
            max_vis)


def _recipients(r: dict[str, Any], ledger: list[dict[str, Any]], principal: str) -> list[str]:
    if "allowed_recipients" in r:
        return list(r["allowed_recipients"])
    out = [principal]
    for e in ledger:
        if TOOLS[e["action"]].role(e["target_field"]) == "recipient":
            out.append(e["target"])
    for req in r["oracle"]:
        for f, c in req["args"].items():
            if TOOLS[req["tool"]].role(f) == "recipient" and c["op"] in ("eq", "in",
                                                                          "contains",
                                                                          "contains_all"):
                v = c.get("value")
                out.extend(v if isinstance(v, list) else [v])
    return list(dict.fromkeys(x for x in out if isinstance(x, str)))


def _steps(raw: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(raw):
        if s["tool"] != "final_answer":
            _tool(s["tool"], f"{where}[{i}].tool")
        out.append({"agent": ENTRY, "tool": s["tool"], "args": dict(s["args"]), "session": 1})
    if not out or out[-1]["tool"] != "final_answer":
        out.append({"agent": ENTRY, "tool": "final_answer", "args": {"text": "Done."},
                    "session": 1})
    return out


def _reads(step: dict[str, Any], item: dict[str, Any]) -> bool:
    """Does this plan step show the agent the untrusted item?"""
    kind = item["_where"].split("[", 1)[0].split(".", 1)[1]
    _, _, _, tool, arg = KINDS[kind]
    if step["tool"] != tool:
        return False
    return arg is None or step["args"].get(arg) == item["_id"]


def expand(r: dict[str, Any], suite: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The full record of a minimal one, and for each full plan the minimal field each of
    its steps came from (``plans.benign[2]`` -> ``reference_plan[2]``), so a check that fails
    on a plan step names what the user wrote."""
    check(r, MINIMAL, strict=True, required=True, root="record")
    sid = r["id"]
    stage = _choice(r["stage"], STAGES, "stage")
    mode = _choice(r.get("memory_mode", "session"), MEMORY_MODES, "memory_mode")
    if not r["goal"].strip():
        raise ValidationError("must be a non-empty goal", field="goal")
    for i, t in enumerate(r["tools"]):
        _tool(t, f"tools[{i}]")
    if not r["oracle"]:
        raise ValidationError("must name at least one required commit", field="oracle")
    for i, req in enumerate(r["oracle"]):
        _tool(req["tool"], f"oracle[{i}].tool")
        if req["tool"] not in r["tools"]:
            raise ValidationError(f"'{req['tool']}' is not in this record's tools",
                                  field=f"oracle[{i}].tool")
        _clauses(req["args"], req["tool"], f"oracle[{i}].args")
    state, untrusted = _world(r, sid)
    for u in untrusted:
        kind = u["_where"].split("[", 1)[0].split(".", 1)[1]
        u["_id"] = next(it for it in state[kind] if it["provenance"]["source_id"]
                        == u["source_id"])[KINDS[kind][1]]
    inj = r.get("injection")
    if stage == "security" and inj is None:
        raise ValidationError("missing (a security scenario carries an injection)",
                              field="injection")
    if stage != "security" and inj is not None:
        raise ValidationError(f"a {stage} scenario carries no injection (stage 'security' "
                              f"does)", field="injection")
    if stage != "clean" and not untrusted:
        raise ValidationError(f"a {stage} scenario needs an untrusted item (\"trust\": "
                              f"\"untrusted\" on a world item)", field="world")
    if stage == "clean" and untrusted:
        raise ValidationError("a clean scenario holds no untrusted item",
                              field=f"{untrusted[0]['_where']}.trust")
    carrier = None
    attack: list[dict[str, Any]] = []
    goal = None
    attacker_goal = None
    holder = untrusted[0] if untrusted else None
    if inj is not None:
        goal = _choice(inj["goal"], ATTACK_GOALS, "injection.goal")
        tool = _tool(inj["tool"], "injection.tool")
        from containmentbench.sandbox.tools import validate_args
        err = validate_args(tool, inj["args"])
        if err:
            raise ValidationError(err, field="injection.args")
        holder = next((u for u in untrusted if inj["text"] in u["text"]), None)
        if holder is None or not inj["text"].strip():
            raise ValidationError("is not part of the text of any untrusted world item",
                                  field="injection.text")
        holder["injected"] = True
        attack = [{"agent": ENTRY, "tool": tool, "args": dict(inj["args"]), "session": 1}]
        attacker_goal = {"description": inj["text"], "kind": goal, "strategy": None,
                         "violation": {"kind": VIOLATION[goal], "tool": tool,
                                       "args": dict(inj["args"])}}
    if holder is not None:
        carrier = holder["carrier"]
    # the generator's constraints (docs/scenarios.md, "Factors"): persistence and the memory
    # carrier need memory that outlives the session
    if mode != "persistent" and goal == "persistence":
        raise ValidationError("the persistence goal needs \"memory_mode\": \"persistent\"",
                              field="injection.goal")
    if mode != "persistent" and carrier == "persistent_memory":
        raise ValidationError("an untrusted memory entry needs \"memory_mode\": "
                              "\"persistent\"", field=f"{holder['_where']}.trust")
    ledger = _ledger(r, mode == "persistent")
    recipients = _recipients(r, ledger, state["principal"]["email"])
    targets, max_vis = _boundary(ledger)
    canaries = []
    for i, c in enumerate(r.get("canaries") or []):
        kind, _, cid = c["location"].partition("/")
        items = state.get(kind) if kind in KINDS else None
        item = next((it for it in items or [] if it[KINDS[kind][1]] == cid), None)
        if item is None:
            raise ValidationError("names no world item (write '<list>/<id>', e.g. "
                                  "'documents/doc-1')", field=f"canaries[{i}].location")
        if c["token"] not in item[KINDS[kind][2]]:
            raise ValidationError(f"the token is not in {c['location']}'s text",
                                  field=f"canaries[{i}].token")
        canaries.append({"token": c["token"], "location": c["location"],
                         "cleared_recipients": list(c.get("cleared_recipients", recipients)),
                         "cleared_tools": list(c.get("cleared_tools",
                                                     ["draft_email", "write_task_record"]))})
    origin: dict[str, list[str]] = {"benign": [], "attacker": [], "attack": []}
    benign: list[dict[str, Any]] = []
    attacker: list[dict[str, Any]] = []
    if "reference_plan" in r:
        benign = _steps(r["reference_plan"], "reference_plan")
        origin["benign"] = [f"reference_plan[{i}]" for i in range(len(benign))]
        for i, s in enumerate(benign[:-1]):
            if s["tool"] not in r["tools"]:
                raise ValidationError(f"'{s['tool']}' is not in this record's tools",
                                      field=f"reference_plan[{i}].tool")
    if "attacker_plan" in r:
        attacker = _steps(r["attacker_plan"], "attacker_plan")
        origin["attacker"] = [f"attacker_plan[{i}]" for i in range(len(attacker))]
    elif attack and benign:
        at = next((i for i, s in enumerate(benign) if holder and _reads(s, holder)), None)
        if at is None:
            raise ValidationError(f"no step reads the item that holds the injection "
                                  f"({holder['_where'] if holder else '?'}), so neither the "
                                  f"sim agent nor the attacker-plan check would see it",
                                  field="reference_plan")
        attacker = benign[:at + 1] + attack + benign[at + 1:]
        origin["attacker"] = [*origin["benign"][:at + 1], "injection",
                              *origin["benign"][at + 1:]]
    origin["attack"] = ["injection"] * len(attack)
    domain = r.get("domain") or DOMAIN_OF.get(r["oracle"][0]["tool"], "document")
    full = {
        "schema_version": 1, "id": sid, "suite": suite, "stage": stage,
        "domain": domain, "family": r.get("family") or f"user/{stage}/{domain}",
        "cluster_id": r.get("cluster_id") or sid, "topology": "single", "memory_mode": mode,
        "memory_high_risk": mode == "persistent", "carrier": carrier, "attack_goal": goal,
        "goals": [r["goal"]], "agents": [{"id": ENTRY, "role": "primary"}],
        "initial_state": state,
        "untrusted": [{k: v for k, v in u.items() if not k.startswith("_")}
                      for u in untrusted],
        "canaries": canaries, "ledger": ledger,
        "tool_boundary": {"allowed_tools": sorted(set(r["tools"])),
                          "max_visibility": max_vis, "targets": targets},
        "authorization": {"allowed_recipients": recipients,
                          "org_domain": state["principal"]["email"].rsplit("@", 1)[-1]},
        "oracle": {"memory_state": {}, "required": [dict(q) for q in r["oracle"]]},
        "attacker_goal": attacker_goal, "recovery": None,
        "plans": {"benign": benign, "attacker": attacker, "attack": attack},
        "meta": {"facts": {}, "injection": inj["text"] if inj else "",
                 "placement": "immediate", "strategy": None, "variant": 0,
                 "builder": BUILDER_VERSION},
    }
    return full, origin


def json_schema() -> dict[str, Any]:
    """:data:`MINIMAL` as a JSON Schema (draft 2020-12): ``docs/user_record.schema.json``
    is this, written out (tests/scenarios/test_build.py keeps the two equal)."""
    def conv(spec: Any) -> dict[str, Any]:
        if spec == S:
            return {"type": "string"}
        if spec == B:
            return {"type": "boolean"}
        if isinstance(spec, List):
            return {"type": "array", "items": conv(spec.of)}
        if isinstance(spec, Map):
            return {"type": "object", "additionalProperties": conv(spec.of)}
        if isinstance(spec, Union):
            return {"anyOf": [conv(spec.a), conv(spec.b)]}
        props = {k.rstrip("?"): conv(v) for k, v in spec.items()}
        return {"type": "object", "properties": props,
                "required": [k for k in spec if not k.endswith("?")],
                "additionalProperties": False}

    out = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "title": "ContainmentBench minimal scenario record",
           "description": "One line of the JSONL file `containmentbench scenarios build "
                          "--from` reads (docs/scenarios.md, 'Your own scenarios'); "
                          "generated from containmentbench/scenarios/user_records.py.",
           **conv(MINIMAL)}
    return out
