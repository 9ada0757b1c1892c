"""The 10^6-row analysis path gives the same bytes as the plain one: cluster codes built in
bulk, exact means of numpy arrays, the polars Parquet reader, and intervals (comparisons,
divergence, figures) resampled in worker processes while the parent builds the tables."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from containmentbench.analysis import parallel
from containmentbench.analysis.bootstrap import _factorize, cluster_bootstrap, cluster_codes
from containmentbench.analysis.exact import fmean
from containmentbench.analysis.parts import read_frame
from containmentbench.analysis.run import analyze
from containmentbench.config.loader import load_option
from containmentbench.errors import BenchError
from containmentbench.metrics.compute import read_metrics

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("analysis_speed",
                                                  ROOT / "bench" / "analysis_speed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    p = tmp_path_factory.mktemp("syn") / "m.parquet"
    _bench().synthetic(7_000, p, seed=3)  # 200 scenarios x 7 defenses x 5 seeds
    return p


def test_cluster_codes_in_bulk_equal_the_python_loop():
    rng = np.random.default_rng(5)
    for n in (1, 7, 500, 20_000):
        labels = [f"s{int(x)}" for x in rng.integers(0, n // 3 + 1, n)]
        bulk = cluster_codes(pl.Series("c", labels))
        assert bulk.dtype == np.intp
        assert np.array_equal(bulk, _factorize(labels))
        assert np.array_equal(cluster_codes(bulk), bulk)  # codes are their own codes
    values = rng.random(300)
    labels = [f"c{i % 17}" for i in rng.permutation(300)]
    kw = {"n_resamples": 500, "confidence": 0.95, "seed": 9}
    assert cluster_bootstrap(values, cluster_codes(pl.Series(labels)), **kw) == \
        cluster_bootstrap(values, labels, **kw)


def test_fmean_of_numpy_arrays_equals_the_list_path():
    rng = np.random.default_rng(1)
    x = rng.normal(size=5_000) * 10.0 ** rng.integers(-8, 9, 5_000)
    x[::97] = np.nan
    assert fmean(x) == fmean(list(x)) == math.fsum(v for v in x if v == v) / np.sum(x == x)
    ints = rng.integers(-5, 5, 1_000)
    assert fmean(ints) == fmean([int(v) for v in ints])
    assert fmean(ints > 0) == fmean([bool(v) for v in ints > 0])
    assert fmean(np.array([np.nan])) is None


def test_read_frame_is_the_arrow_frame(synthetic, tmp_path):
    assert read_frame(synthetic).equals(pl.from_arrow(read_metrics(synthetic)), null_equal=True)
    assert read_frame(synthetic).n_chunks() == 1
    short = tmp_path / "short.parquet"
    pl.read_parquet(synthetic).drop("cluster_id").write_parquet(short)
    with pytest.raises(BenchError, match="cluster_id"):
        read_frame(short)
    with pytest.raises(BenchError, match="not found"):
        read_frame(tmp_path / "absent.parquet")


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes()
            for sub in ("tables", "figures") for p in sorted((out / sub).rglob("*"))
            if p.is_file()}


@pytest.mark.slow
def test_pool_and_in_process_analysis_write_identical_bytes(synthetic, tmp_path, monkeypatch):
    cfg = load_option("analysis", "default")
    cfg["resamples"] = 300
    one = analyze(synthetic, tmp_path / "one", cfg, workers=1)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)  # force the pool on small data
    two = analyze(synthetic, tmp_path / "two", cfg, workers=2)
    a, b = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert a == b and any(k.startswith("figures/fig04") for k in a)
    assert one["intervals"] == two["intervals"] > 0


def test_seed_variance_segments_match_a_per_group_reference():
    from containmentbench.analysis.seeds import seed_variance

    rng = np.random.default_rng(4)
    n = 3_000
    v = rng.random(n)
    g = rng.integers(0, 40, n)
    seed = rng.integers(0, 5, n)
    values = [None if (gi % 7 == 0 and si == 2) or rng.random() < 0.1 else float(x)
              for x, gi, si in zip(v, g, seed, strict=True)]  # whole (group, seed)s empty
    df = pl.DataFrame({"g": g, "seed": seed, "value": values})
    got = {r["g"]: r for r in seed_variance(df, ["g"], "seed", "value").iter_rows(named=True)}
    for gi in range(40):
        per_seed = {}
        for x, gj, si in zip(values, g, seed, strict=True):
            if gj == gi and x is not None:
                per_seed.setdefault(si, []).append(x)
        means = [math.fsum(xs) / len(xs) for xs in per_seed.values()]
        assert got[gi]["n_seeds"] == len(means)
        assert got[gi]["mean"] == math.fsum(means) / len(means)
        assert got[gi]["range"] == max(means) - min(means)
