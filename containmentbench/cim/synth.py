"""Vectorized kernel of the generator: one (workflow, day, bucket) chunk of CIM rows.

Per delegation (§7.2.1 workflows):

* W1 cross-system, causally disconnected subtasks: calls split into subtasks (geometric,
  mean 2 calls) of reads/searches on one tool each; subtasks run in parallel waves of
  width K (the delegation's tool count), every subtask its own trace; a final synthesis
  call (write, or share half of the time) ends the delegation in a trace of its own.
* W2 multi-agent composition: delegation trees (Poisson(fanout) children per node, depth
  U{1..spawn_depth}); each delegation is one agent instance in one trace; a child continues
  its parent's trace with probability ``trace_propagation``, else its runtime starts a new
  one (fragmentation, §5.3). Children start part-way through their parent.
* W3 trial-and-adapt: steps of 1 + Geometric attempts (mean 1 + retry_rate); all but the
  last attempt of a step fail; each step is one trace; a backtrack restarts the agent
  instance (a new runtime session).

Every delegation starts with its ``delegate`` (minting) row, always captured. Delegation ids
follow depth-first order, so a closure is a contiguous id range (store.py); columns.py turns
the row arrays into Arrow columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.canonical import derive_rng
from containmentbench.cim.catalog import CATALOG, ChunkSpec, GenParams, tree_size
from containmentbench.cim.columns import VERBS, fixed_ids, rows_to_table
from containmentbench.cim.project import EPOCH_US
from containmentbench.cim.schema import DELEGATIONS
from containmentbench.errors import BenchError

_T = len(CATALOG)
_UNIV = {"files": 0, "channels": 1, "repos": 2, "tickets": 3, "records": 4, "mailboxes": 5}
_TOOL_UNIV = np.array([_UNIV[t.universe] for t in CATALOG])
_LABEL_CDF = np.array([0.2, 0.7, 0.92])
_VERB_P = {"W1": (0.65, 0.35, 0.0, 0.0), "W2": (0.45, 0.2, 0.25, 0.1),
           "W3": (0.3, 0.2, 0.35, 0.15)}
_DRIVE = 0
_OP_SHARE = np.array([v == "share" for v in VERBS])
_OP_TARGET = np.array([v in ("share", "invite") for v in VERBS])


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64: a cheap stable hash for resource attributes."""
    z = (x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sensitivity(universe: np.ndarray, idx: np.ndarray) -> np.ndarray:
    u = (_mix(universe.astype(np.uint64) * np.uint64(1 << 40) + idx.astype(np.uint64))
         >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return np.searchsorted(_LABEL_CDF, u, side="right")


def draw_calls(rng: np.random.Generator, n: int, p: GenParams, workflow: str) -> np.ndarray:
    """Tool calls per delegation: loops x LogNormal(0, 0.6) (mean 1), clipped (Table 4)."""
    x = p.loops(workflow) * rng.lognormal(0.0, 0.6, n) / np.exp(0.18)
    return np.clip(np.rint(x), p.events_min, p.events_max).astype(np.int64)


def _seg(flags: np.ndarray, owner_start: np.ndarray) -> np.ndarray:
    """0-based index of the segment each row is in, restarting at each owner start."""
    c = np.cumsum(flags)
    return c - c[owner_start] + flags[owner_start] - 1


def _trees(rng: np.random.Generator, n_roots: int, p: GenParams
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W2 forests in depth-first order: (root index, parent position, depth)."""
    d = p.spawn_depth
    paths = [np.column_stack([np.arange(n_roots), np.full((n_roots, d), -1)])]
    parent = [np.full(n_roots, -1)]
    level = [np.zeros(n_roots, dtype=np.int64)]
    max_depth = rng.integers(1, d + 1, size=n_roots)
    frontier = np.arange(n_roots)
    offset = n_roots
    for lev in range(d):
        fr_path = np.concatenate(paths)[frontier] if len(frontier) else np.empty((0, d + 1))
        keep = max_depth[fr_path[:, 0].astype(np.int64)] > lev if len(frontier) else \
            np.zeros(0, bool)
        fr, fr_path = frontier[keep], fr_path[keep]
        k = rng.poisson(p.spawn_fanout, size=len(fr))
        kids = int(k.sum())
        if kids == 0:
            break
        rep = np.repeat(np.arange(len(fr)), k)
        first = np.repeat(np.cumsum(k) - k, k)
        child_path = fr_path[rep].copy()
        child_path[:, lev + 1] = np.arange(kids) - first
        paths.append(child_path)
        parent.append(fr[rep])
        level.append(np.full(kids, lev + 1))
        frontier = np.arange(offset, offset + kids)
        offset += kids
    path = np.concatenate(paths).astype(np.int64)
    par = np.concatenate(parent)
    lev_all = np.concatenate(level)
    order = np.lexsort(tuple(path[:, c] for c in range(d, -1, -1)))
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    par_sorted = par[order]
    par_new = np.where(par_sorted >= 0, inv[np.maximum(par_sorted, 0)], -1)
    return path[order, 0], par_new, lev_all[order]


def _layout(rng: np.random.Generator, wf: str, p: GenParams, calls: np.ndarray,
            k_tools: np.ndarray) -> dict[str, np.ndarray]:
    """Per row (delegate row first, then calls): trace unit, tool slot, verb class,
    relative time (s), failure flag and restart count, following the workflow."""
    rows = calls + 1
    m = int(rows.sum())
    d = np.repeat(np.arange(len(calls)), rows)
    start = np.repeat(np.cumsum(rows) - rows, rows)
    j = np.arange(m) - start
    last = j == rows[d] - 1
    r = rng.random(m)
    out: dict[str, np.ndarray] = {"d": d, "j": j}
    if wf == "W1":
        new = (j == 0) | ((j >= 2) & (r < 0.5)) | (last & (j >= 2))
        unit = _seg(new, start)
        sub_start = np.maximum.accumulate(np.where(new, np.arange(m), 0))
        pos = np.arange(m) - sub_start
        n_sub = unit[np.cumsum(rows) - 1] + 1
        wave = np.where(last & (j >= 2), (n_sub[d] - 2) // k_tools[d] + 1, unit // k_tools[d])
        # a wave lasts as long as its longest subtask (2 s per call) plus a think pause
        # (delegation, wave) keys never decrease along the rows, so waves are runs
        key = d * (int(wave.max()) + 2) + wave
        run = np.diff(key, prepend=-1) != 0
        inv = np.cumsum(run) - 1
        uk = key[run]
        span = np.maximum.reduceat(pos * 2.0, np.flatnonzero(run))
        span += 3.0 + rng.exponential(5.0, len(uk))
        wave_d = uk // (int(wave.max()) + 2)
        cs = np.cumsum(span)
        first = np.searchsorted(wave_d, wave_d, side="left")
        wave_start = cs - span - (cs[first] - span[first])
        rel = wave_start[inv] + pos * 2.0 + np.where(j == 0, 0.0, rng.random(m))
        slot = np.where(last & (j >= 2), 0, unit % k_tools[d])
        verb = np.where(rng.random(m) < 0.65, 0, 1)
        verb = np.where(last & (j >= 2), np.where(rng.random(m) < 0.5, 2, 3), verb)
        out.update(unit=unit, slot=slot, verb=verb, rel=rel, fail=rng.random(m) < 0.02,
                   restart=np.zeros(m, np.int64))
    elif wf == "W2":
        gap = np.where(j == 0, 0.0, rng.exponential(4.0, m))
        cs = np.cumsum(gap)
        rel = cs - cs[start]
        out.update(unit=np.zeros(m, np.int64), slot=rng.integers(0, 1 << 30, m) % k_tools[d],
                   verb=rng.choice(4, m, p=_VERB_P["W2"]), rel=rel,
                   fail=rng.random(m) < 0.02, restart=np.zeros(m, np.int64))
    else:
        new = (j == 0) | ((j >= 2) & (r < 1.0 / (1.0 + p.retry_rate)))
        unit = _seg(new, start)
        step_start = np.maximum.accumulate(np.where(new, np.arange(m), 0))
        nxt = np.append(new[1:], True) | last
        back = new & (j >= 2) & (rng.random(m) < p.backtrack_rate)
        restart = _seg(back | (j == 0), start)
        gap = np.where(new, rng.exponential(5.0, m), rng.exponential(1.5, m))
        gap = np.where(back, gap + rng.exponential(30.0, m), gap)
        gap[j == 0] = 0.0
        cs = np.cumsum(gap)
        slot = (rng.integers(0, 1 << 30, m) % k_tools[d])[step_start]
        verb = rng.choice(4, m, p=_VERB_P["W3"])[step_start]
        out.update(unit=unit, slot=slot, verb=verb, rel=cs - cs[start],
                   fail=~nxt & (j >= 1), restart=restart)
    return out


def build_chunk(p: GenParams, spec: ChunkSpec, trace_cov: np.ndarray, rel_file: str
                ) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    wf, wi = spec.workflow, ("W1", "W2", "W3").index(spec.workflow)
    rng = derive_rng("cim-generate", p.seed, wf, spec.day, spec.bucket)
    users = np.arange(spec.user_lo, spec.user_hi)
    per_user = p.delegations_per_day / p.users
    if wf == "W2":
        per_user /= tree_size(p)
    n_roots_u = rng.poisson(per_user, size=len(users))
    root_user = np.repeat(users, n_roots_u)
    n_roots = len(root_user)
    if wf == "W2":
        root_of, parent, depth = _trees(rng, n_roots, p)
    else:
        root_of, parent, depth = np.arange(n_roots), np.full(n_roots, -1), np.zeros(n_roots, int)
    n = len(root_of)
    user = root_user[root_of]
    apu = p.agents // p.users
    pick = np.minimum(rng.zipf(1.6, n) - 1, apu - 1)
    pick = np.where(depth == 0, pick, rng.integers(0, apu, n))
    agent = user * apu + pick
    calls = draw_calls(rng, n, p, wf)
    k_tools = rng.integers(p.tools_min, p.tools_max + 1, n)
    perm = np.argsort(rng.random((n, _T)), axis=1)
    drift = rng.random(n) < p.drift_rate
    approved = drift & (rng.random(n) < p.approval_rate)
    lay = _layout(rng, wf, p, calls, k_tools)
    d, j = lay["d"], lay["j"]
    m = len(d)
    rows_d = calls + 1
    d_start = np.cumsum(rows_d) - rows_d
    dur = lay["rel"][d_start + rows_d - 1]

    # ---- schedule: child offsets (W2), then root bursts per user (overlap_rate)
    rel_start = np.zeros(n)
    for lev in range(1, int(depth.max(initial=0)) + 1):
        at = np.nonzero(depth == lev)[0]
        rel_start[at] = rel_start[parent[at]] + rng.uniform(0.1, 0.7, len(at)) * dur[parent[at]]
    roots = np.nonzero(depth == 0)[0]
    rpos = np.searchsorted(roots, np.arange(n), side="right") - 1  # root position per node
    fam_end = np.zeros(len(roots))
    np.maximum.at(fam_end, rpos, rel_start + dur)
    r_user = user[roots]
    overlap_user = derive_rng("cim-overlap", p.seed, wf).random(p.users) < p.overlap_rate
    k_in_user = np.arange(len(roots)) - np.searchsorted(r_user, r_user, side="left")
    ov = overlap_user[r_user]
    new_burst = (k_in_user == 0) | ~ov | ((k_in_user >= 2) & (rng.random(len(roots)) < 0.4))
    burst = np.cumsum(new_burst) - 1
    b_len = np.zeros(int(burst.max(initial=-1)) + 1)
    np.maximum.at(b_len, burst, fam_end)
    b_user = r_user[new_burst]
    busy = np.bincount(np.searchsorted(users, b_user), weights=b_len, minlength=len(users))
    nb = np.bincount(np.searchsorted(users, b_user), minlength=len(users))
    idle = np.maximum(60.0, (86_400.0 - busy) / np.maximum(nb, 1))[np.searchsorted(users, b_user)]
    step = b_len + rng.exponential(idle)
    cs = np.cumsum(step)
    first_b = np.searchsorted(b_user, b_user, side="left")
    b_start = rng.exponential(idle)[first_b] + cs - step - (cs[first_b] - step[first_b])
    root_start = b_start[burst] + np.where(new_burst, 0.0, rng.uniform(0, 30.0, len(roots)))
    start_s = root_start[rpos] + rel_start

    # ---- instances: concurrent delegations of one user on one agent share a runtime
    burst_of = burst[rpos]
    shared = ov[rpos] & (depth == 0)
    base = np.where(shared, (agent.astype(np.int64) << 21) + burst_of, -1 - np.arange(n))
    ikey = base[d] * 64 + np.minimum(lay["restart"], 63)
    _, inst = np.unique(ikey, return_inverse=True)

    # ---- per row attributes
    tool = perm[d, lay["slot"]]
    verb_cls = lay["verb"].copy()
    t_abs = EPOCH_US + spec.day * 86_400_000_000 + \
        np.rint((start_s[d] + lay["rel"]) * 1e6).astype(np.int64)
    is_del = j == 0
    late = np.full(n, -1)
    late[drift] = d_start[drift] + 1 + np.floor(0.85 * calls[drift]).astype(np.int64)
    late[drift] = np.minimum(late[drift], d_start[drift] + rows_d[drift] - 1)
    dr_rows = late[drift]
    tool[dr_rows] = _DRIVE
    verb_cls[dr_rows] = 3
    univ = _TOOL_UNIV[tool]
    sizes = np.array([p.files, p.channels, p.repos, p.tickets, p.records, p.users * 1000])
    anchor = (_mix(user[d] * 7 + univ) % np.uint64(1 << 40)).astype(np.int64)
    local = anchor + rng.geometric(1 / 50.0, m)
    zipf_ix = np.floor(sizes[univ] * rng.random(m) ** 2).astype(np.int64)
    ridx = np.where(np.isin(univ, (1, 2)), zipf_ix, local % sizes[univ])
    ridx = np.where(univ == 5, user[d] * 1000 + rng.integers(0, 1000, m), ridx)
    if wf == "W3":  # retries touch the same resource
        step_start = np.maximum.accumulate(np.where(np.append(True, np.diff(lay["unit"]) != 0)
                                                    | is_del, np.arange(m), 0))
        ridx = ridx[step_start]
    label = sensitivity(univ, ridx)
    if len(dr_rows):  # drift: a restricted file shared externally late in the delegation
        cand = rng.integers(0, p.files, (len(dr_rows), 64))
        lab = sensitivity(np.zeros_like(cand), cand)
        hit = np.argmax(lab == 3, axis=1)
        ridx[dr_rows] = cand[np.arange(len(dr_rows)), hit]
        label[dr_rows] = sensitivity(np.zeros(len(dr_rows), np.int64), ridx[dr_rows])
    op_ix = tool * 4 + verb_cls
    is_share = _OP_SHARE[op_ix]
    external = is_share & (rng.random(m) < p.external_share_rate)
    external[dr_rows] = True
    has_target = _OP_TARGET[op_ix]
    is_search = verb_cls == 1

    # ---- capture, binding, integrity
    u = rng.random(m)
    capture = np.where(u < p.coverage - p.bypass, 0, np.where(u < p.coverage, 2, 1))
    capture[is_del] = 0
    gateway = capture == 0
    unbound = gateway & ~is_del & (rng.random(m) < p.unbound_rate)
    bound = gateway & ~unbound
    conflict = bound & ~is_del & (rng.random(m) < p.hint_conflict_rate)

    # ---- trace context: units, propagation (W2), per-tool coverage
    owner = np.arange(n)
    if wf == "W2":
        prop = rng.random(n) < p.trace_propagation
        for lev in range(1, int(depth.max(initial=0)) + 1):
            at = np.nonzero((depth == lev) & prop)[0]
            owner[at] = owner[parent[at]]
    tkey = owner[d].astype(np.int64) * (int(lay["unit"].max(initial=0)) + 1) + lay["unit"]
    traced = is_del | (rng.random(m) < trace_cov[tool])
    _, trace_local = np.unique(tkey, return_inverse=True)
    order = np.lexsort((np.arange(m), t_abs, trace_local, ~traced))
    prev = np.full(m, -1)
    o_tr = order[traced[order]]
    same = np.append(False, trace_local[o_tr][1:] == trace_local[o_tr][:-1])
    prev[o_tr[1:]] = np.where(same[1:], o_tr[:-1], -1)

    # ---- approvals (authority expansion after the envelope change, §5.4)
    appr_d = np.nonzero(approved)[0]
    a_rows = late[appr_d]
    k = len(appr_d)
    if m + k >= 10**7 or n >= 10**7:  # id widths: 7-digit span/delegation ids per bucket
        raise BenchError(f"bucket {spec.bucket} of {wf} holds {m + k:,} rows; lower "
                         "chunk_events", field="chunk_events")
    z = np.zeros(k, bool)
    zi = np.zeros(k, np.int64)
    r: dict[str, np.ndarray] = {
        "d": np.concatenate([d, appr_d]), "kind": np.concatenate([np.where(is_del, 2, 0),
                                                                  np.full(k, 5)]),
        "bound": np.concatenate([bound, ~z]), "unbound": np.concatenate([unbound, z]),
        "gateway": np.concatenate([gateway, ~z]), "is_del": np.concatenate([is_del, z]),
        "t": np.concatenate([t_abs, t_abs[a_rows] + 1_000_000]),
        "inst": np.concatenate([inst, inst[a_rows]]), "op": np.concatenate([op_ix, zi]),
        "tool": np.concatenate([tool, zi]), "univ": np.concatenate([univ, zi]),
        "ridx": np.concatenate([ridx, zi]), "label": np.concatenate([label, zi]),
        "search": np.concatenate([is_search, z]),
        "target": np.concatenate([has_target & ~is_del, z]),
        "ext": np.concatenate([external & ~is_del, z]),
        "fail": np.concatenate([lay["fail"] & ~is_del, z]),
        "capture": np.concatenate([capture, zi]), "traced": np.concatenate([traced, z]),
        "trace": np.concatenate([trace_local, zi]), "prev": np.concatenate([prev, zi - 1]),
        "conflict": np.concatenate([conflict, z]), "eid": np.arange(m + k),
        "tgt": rng.integers(0, p.users, m + k)}
    # rows of a delegation together, by time; rows without a bound delegation last
    order = np.lexsort((r["eid"], r["t"], np.where(r["bound"], r["d"], n)))
    r = {key: v[order] for key, v in r.items()}
    table = rows_to_table(r, spec, wi, user, agent, parent)
    n_ev = np.bincount(r["d"][r["bound"]], minlength=n)
    did = fixed_ids(f"dlg-{wf}-{spec.day:03d}-{spec.bucket:05d}-", np.arange(n), 7)
    side = pa.table({
        "delegation_id": did,
        "delegation_parent_id": pc.if_else(pa.array(parent >= 0),
                                                   did.take(pa.array(np.maximum(parent, 0))),
                                                   pa.scalar(None, pa.string())),
        "root_delegation_id": did.take(pa.array(roots[rpos])),
        "depth": pa.array(depth.astype(np.int16)),
        "principal_user_id": fixed_ids("user-", user, 5),
        "agent_id": fixed_ids("agent-", agent, 6),
        "agent_instance_id": fixed_ids(f"inst-{wf}-{spec.day:03d}-{spec.bucket:05d}-",
                                       inst[d_start], 7),
        "minted_time": pa.array(t_abs[d_start], pa.timestamp("us", tz="UTC")),
        "workflow": pa.array([wf] * n, pa.string()),
        "file": pa.array([rel_file] * n, pa.string()),
        "n_events": pa.array(n_ev.astype(np.int32)),
        "gt_drift": pa.array(drift), "gt_approved": pa.array(approved)}, schema=DELEGATIONS)
    stats = {"n_rows": m + k, "n_calls": int((~is_del).sum()),
             "n_uncovered": int((capture == 1).sum()), "n_bypass": int((capture == 2).sum()),
             "n_unbound": int(unbound.sum()), "n_approvals": len(appr_d)}
    return table, side, stats
