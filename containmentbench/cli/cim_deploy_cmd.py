"""``containmentbench cim micro | coverage | tokens``: the micro-deployment of paper 002 §7.1,
coverage accounting against a declared tool inventory (App. C.5), and the delegation tokens
an auditor reads back with the gateway's key (I5, gateway/tokens.py)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from containmentbench.cli import argtypes as T
from containmentbench.cli.cim_common import emit, own_file, store_of

MICRO_HELP = {
    "runs": "runs per workflow (Table 4 micro: 50)",
    "users_per_run": "principals acting at once in a run",
    "overlap_rate": "share of users running a second delegation concurrently (10-40%%)",
    "reads_min": "fewest reads per W1 delegation (W2 agents and W3 steps: half)",
    "reads_max": "most reads per W1 delegation (W2 agents and W3 steps: half)",
    "retry_mean": "mean failing attempts per W3 step (Table 4: 0-10)",
    "backtrack_rate": "W3 backtracks per step", "seed": "plan seed"}


def register(csub: argparse._SubParsersAction) -> None:
    m = csub.add_parser("micro", help="micro-deployment: W1-W3 through the runtime and "
                        "gateway, live CIM, coverage and gateway latency (§7.1, Table 6)",
                        description="Run W1-W3 workflows through the real runtime and gateway "
                        "(sim agents, or any backend), emit CIM rows live at capture time, "
                        "account coverage against the declared tool inventory and time the "
                        "gateway per call; writes a CIM store whose manifest holds both.")
    m.add_argument("--out", type=Path, required=True, help="store folder (new or empty)")
    m.add_argument("--force", action="store_true", help="replace an earlier store")
    m.add_argument("--inventory", type=Path, required=True,
                   help="tool inventory YAML/JSON (config/study/cim_micro/inventory.yaml)")
    from containmentbench.cim.micro import MicroParams

    for f in dataclasses.fields(MicroParams):
        if f.name in ("suite", "stage", "workflows"):
            continue
        kind = (T.probability if f.name.endswith("_rate") else T.float_range(0.0)) \
            if isinstance(f.default, float) else T.non_negative_int
        m.add_argument("--" + f.name.replace("_", "-"), type=kind,
                       default=f.default, help=f"{MICRO_HELP[f.name]} [default {f.default}]")
    m.add_argument("--workflows", default="W1,W2,W3", help="comma-separated W1,W2,W3")
    m.add_argument("--backend", default="sim", help="sim | hf | vllm | openai (a real CPU "
                   "model: e.g. --backend hf --model <path>)")
    m.add_argument("--model", default="sim", help="model id or path (label for sim)")
    m.add_argument("--sim-profile", default="default", help="sim profile name or YAML file")
    m.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option (repeatable)")
    m.add_argument("--max-tokens", type=T.config_range("decoding.max_tokens"), default=512,
                   help="decoding.max_tokens of a real model's completions")
    m.add_argument("--max-steps", type=T.positive_int, default=400,
                   help="model calls per delegation (a real CPU model: lower it)")
    m.add_argument("--temperature", type=T.config_range("decoding.temperature", float),
                   default=0.0, help="decoding.temperature of a real model (0: greedy)")
    m.add_argument("--quiet", action="store_true", help="no progress lines")
    m.set_defaults(func=cmd_micro)

    cv = csub.add_parser("coverage", help="coverage against a declared tool inventory: "
                         "covered, unbound, uncovered calls per tool (App. C.5)",
                         description="Count every tool call of a store as covered (gateway, "
                         "bound), unbound (gateway, no valid delegation) or uncovered (no "
                         "gateway: unmediated tool or bypass) per declared tool, and name "
                         "mediated tools without telemetry (silent) and undeclared ones.")
    cv.add_argument("--store", type=Path, required=True, help="CIM store folder")
    cv.add_argument("--inventory", type=Path, required=True, help="tool inventory YAML/JSON")
    cv.add_argument("--out", type=Path, default=None, help="write the result as JSON too")
    cv.add_argument("--json", action="store_true", help="print rows as JSON")
    cv.set_defaults(func=cmd_coverage)

    tk = csub.add_parser("tokens", help="decode delegation tokens with the gateway's key; a "
                         "token it did not sign is bad input (I5)",
                         description="Read one delegation token per line and print its "
                         "claims (principal, delegation, parent, agent instance, expiry, "
                         "nonce). A token not signed with this key (forged, tampered, or "
                         "signed with another key) stops with one line naming its line.")
    tk.add_argument("--key-file", type=Path, required=True, help="the gateway's token key")
    tk.add_argument("--tokens", type=Path, required=True, help="one token per line")
    tk.add_argument("--out", type=Path, default=None, help="write the claims as JSON too")
    tk.add_argument("--json", action="store_true", help="print rows as JSON")
    tk.set_defaults(func=cmd_tokens)



def cmd_micro(args: argparse.Namespace) -> int:
    from containmentbench.cim.coverage import load_inventory
    from containmentbench.cim.deploy import run_micro, write_micro_store
    from containmentbench.cim.micro import MicroParams
    from containmentbench.cli.rollout_cmd import parse_options
    from containmentbench.integrity import writer
    from containmentbench.models.base import BackendConfig, make_backend

    inv = load_inventory(args.inventory)  # bad input: one line, before any work
    kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(MicroParams)
          if f.name not in ("suite", "stage", "workflows")}
    params = MicroParams(workflows=tuple(w.strip() for w in args.workflows.split(",")
                                         if w.strip()), **kw)
    params.check()
    if args.max_steps < 1:
        from containmentbench.errors import BenchError

        raise BenchError("must be >= 1", field="max-steps")
    writer.check_out(args.out, "cim-store", args.force)
    options = parse_options(args.option)
    label = args.model
    if args.backend == "sim":
        options.setdefault("profile", args.sim_profile)
        label = f"sim:{options['profile']}" if args.model == "sim" else args.model
    backend = make_backend(BackendConfig(name=args.backend, model=args.model,
                                         max_tokens=args.max_tokens,
                                         temperature=args.temperature, options=options))
    try:
        res = run_micro(params, inv, backend, label, progress=not args.quiet,
                        max_steps=args.max_steps)
    finally:
        backend.close()
    man = write_micro_store(args.out, res, params, inv, args.backend, label, args.force)
    lat, cov = man["latency"], man["coverage"]
    tag = " [simulated agent: harness validation, not a model result]" \
        if args.backend == "sim" else ""
    print(f"wrote {args.out}: {man['n_events']:,} CIM events from {man['n_rollouts']} "
          f"delegations in {res.wall_s:.1f} s; coverage {cov['coverage']:.3f} (unbound "
          f"{cov['unbound_share']:.3f}, uncovered {cov['uncovered_share']:.3f}); gateway "
          f"p50 {lat.get('gateway_p50_us', float('nan')):.1f} us, p95 "
          f"{lat.get('gateway_p95_us', float('nan')):.1f} us over {lat['n_calls']} calls{tag}")
    return 0


def cmd_coverage(args: argparse.Namespace) -> int:
    from containmentbench.cim.coverage import coverage, load_inventory

    if args.out:
        own_file(args.out, (".json",), "cim-coverage")
    inv = load_inventory(args.inventory)  # unknown tools: one line, exit 2, nothing written
    table, info = coverage(store_of(args), inv)
    if args.out:
        from containmentbench.integrity import writer

        writer.write_json(args.out, {"info": info, "rows": table.to_dicts()},
                          kind="cim-coverage")
    emit(args, "coverage", table, info)
    return 0


def _read(path: Path, what: str) -> bytes:
    """A key or tokens file through the one safe open: no FIFO, no device, at most 64 MiB."""
    from containmentbench.integrity import safeopen

    return safeopen.read_bytes(path, limit=safeopen.LIMIT_TEXT, what=what)


def cmd_tokens(args: argparse.Namespace) -> int:
    import polars as pl

    from containmentbench.errors import BenchError
    from containmentbench.gateway.tokens import TokenAuthority

    if args.out:
        own_file(args.out, (".json",), "cim-tokens")
    auth = TokenAuthority(_read(args.key_file, "key file").strip())
    rows = []
    for n, raw in enumerate(_read(args.tokens, "tokens file").splitlines(), start=1):
        line = raw.decode("utf-8", "replace").strip()
        if not line or line.startswith("#"):
            continue
        c = auth.claims(line)
        if c is None:  # every token must verify before anything is written
            raise BenchError(f"token {auth.why_not(line)}", file=str(args.tokens), line=n,
                             field="token")
        rows.append({"line": n, "principal_id": c.principal_id,
                     "delegation_id": c.delegation_id, "parent_id": c.parent_id,
                     "agent_instance": c.agent_instance, "expires_tick": c.expires_tick,
                     "nonce": c.nonce})
    table = pl.DataFrame(rows, schema={"line": pl.Int64, "principal_id": pl.String,
                                       "delegation_id": pl.String, "parent_id": pl.String,
                                       "agent_instance": pl.String,
                                       "expires_tick": pl.Int64, "nonce": pl.String})
    if args.out:
        from containmentbench.integrity import writer

        writer.write_json(args.out, {"tokens": rows}, kind="cim-tokens")
    emit(args, "tokens", table, {"n_tokens": table.height})
    return 0
