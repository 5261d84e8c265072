"""How well the Monte Carlo error of a pool of independent SMC runs describes its actual spread.

At one point of the dslt4_pt1_smc sweep (default: n beta = 6,000, t = 1.18, where two sweeps disagreed), R fresh
runs per data set on the sweep's own data sets (new keys); then many random subsets of r runs per data set,
each pooled by its runs' evidence (slt_relu.posterior.masses.run_weights) as the sweep pools them: the actual
spread of the subsets' estimates (corrected for sampling without replacement from R, sqrt(1 - r / R)) against
the error each subset claims, by the delete-one-run jackknife (``runs_mcse``, what the stopping rule reads) and
by the delta method R / (R - 1) sum w^2 (x - xbar)^2 (what it read before); the same for log Z (the delta
method on the Z scale, ``log_evidence_mcse``, against the jackknife of log mean Z).

    .venv/bin/python benchmarks/runs_error_calibration.py [--point 31] [--runs 64] [--save runs.npz]
    .venv/bin/python benchmarks/runs_error_calibration.py --load runs.npz      # the analysis only

64 runs per data set take about 10 minutes on a 2-core CPU; the analysis seconds.  Prints, per r and phase,
the actual sd and the claimed / actual error (median and root mean square over subsets) of both methods.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

CONFIG = "experiments/dslt4_pt1_smc.toml"


def sample_runs(point: int, runs: int, round_: int) -> dict:
    """``runs`` fresh SMC runs per data set at sweep point ``point`` of dslt4_pt1_smc: each particle's rule code,
    each run's data set and log Z, the rule's phase names."""
    import jax

    from slt_relu.kinds.posterior_kind import sample_program
    from slt_relu.kinds.posterior_report import draws_params, point_rule
    from slt_relu.workflow import runner

    prep = runner.prepare(CONFIG)
    pt = prep.resolved.points[point]
    pt = pt._replace(settings=pt.settings._replace(chains_per_dataset=runs))
    start = time.time()
    res = sample_program([pt], jax.random.PRNGKey(0), round_)[0]
    codes, names = point_rule(pt.settings, draws_params(pt.settings, res["flat"]))
    print(f"{runs} runs per data set at point {point} ({pt.values}): {time.time() - start:.0f} s")
    return {"codes": np.asarray(codes), "ds": np.asarray(res["dataset"]), "lz": np.asarray(res["log_evidence"], float),
            "names": np.asarray(names)}


def pooled(x, lz):
    """One data set's runs x (R,) pooled by their evidence, as the sweep pools them."""
    from slt_relu.posterior.masses import run_weights

    return run_weights(lz, np.zeros(len(lz), int)) @ x


def delta_var(x, lz):
    """The delta method's variance of that pool, R / (R - 1) sum w^2 (x - xbar)^2 (the rule's error before)."""
    from slt_relu.posterior.masses import run_weights

    w = run_weights(lz, np.zeros(len(lz), int))
    R = len(x)
    return R / (R - 1) * np.sum(w**2 * (x - w @ x) ** 2)


def jackknife_var(estimate, *arrays):
    R = len(arrays[0])
    loo = np.array([estimate(*(np.delete(a, i) for a in arrays)) for i in range(R)])
    return (R - 1) / R * np.sum((loo - loo.mean()) ** 2)


def analyse(d: dict, subset_runs=(4, 6, 8, 12), subsets: int = 2000, seed: int = 0) -> None:
    from slt_relu.posterior.evidence import logmeanexp as log_mean_z
    from slt_relu.posterior.masses import log_evidence_mcse, run_weights, runs_mcse

    codes, ds, lz, names = d["codes"], d["ds"], d["lz"], [str(n) for n in d["names"]]
    groups = np.unique(ds)
    K, R = len(groups), int(np.min(np.bincount(ds)))
    rng = np.random.default_rng(seed)
    print(f"{K} data sets x {R} runs; log Z sd within data sets "
          f"{', '.join(f'{lz[ds == g].std(ddof=1):.2f}' for g in groups)} nats")
    print(f"{'r':>3s} {'quantity':16s} {'value':>7s} {'actual sd':>10s} {'delta: median / rms':>20s} "
          f"{'jackknife: median / rms':>24s}")
    for r in subset_runs:
        if r >= R:
            continue
        picks = [np.concatenate([rng.choice(np.flatnonzero(ds == g), r, replace=False) for g in groups])
                 for _ in range(subsets)]
        correction = np.sqrt(1 - r / R)
        for p, name in enumerate(names):
            x = (codes == p).mean(1)
            est, dv, jv = [], [], []
            for sel in picks:
                sds, slz, sx = ds[sel], lz[sel], x[sel]
                est.append(np.mean([pooled(sx[sds == g], slz[sds == g]) for g in groups]))
                dv.append(np.sqrt(sum(delta_var(sx[sds == g], slz[sds == g]) for g in groups)) / K)
                jv.append(runs_mcse(sx[:, None], sds, run_weights(slz, sds))[0])
            _row(r, name, np.mean([pooled(x[ds == g], lz[ds == g]) for g in groups]), np.std(est) / correction,
                 np.array(dv), np.array(jv))
        est, dv, jv = [], [], []
        for sel in picks:
            sds, slz = ds[sel], lz[sel]
            est.append(np.mean([log_mean_z(slz[sds == g]) for g in groups]))
            dv.append(log_evidence_mcse(slz, sds))
            jv.append(np.sqrt(sum(jackknife_var(log_mean_z, slz[sds == g]) for g in groups)) / K)
        _row(r, "log Z", np.mean([log_mean_z(lz[ds == g]) for g in groups]), np.std(est) / correction,
             np.array(dv), np.array(jv))


def _row(r, name, value, actual, delta, jack):
    ratio = lambda e: f"{np.median(e) / actual:.2f} / {np.sqrt(np.mean(e**2)) / actual:.2f}"
    print(f"{r:3d} {name:16s} {value:7.3f} {actual:10.4f} {ratio(delta):>20s} {ratio(jack):>24s}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--point", type=int, default=31, help="the sweep point (31: n beta = 6,000, t = 1.18)")
    ap.add_argument("--runs", type=int, default=64, help="fresh runs per data set")
    ap.add_argument("--round", type=int, default=9, help="the key round of the runs (the sweep uses 0-3)")
    ap.add_argument("--subsets", type=int, default=2000)
    ap.add_argument("--save", help="save the runs' codes, data sets and log Z to this .npz")
    ap.add_argument("--load", help="analyse runs saved by --save instead of sampling")
    args = ap.parse_args()
    if args.load:
        d = dict(np.load(args.load))
        d.setdefault("names", np.asarray(["other", "degenerate", "non_degenerate"]))
    else:
        d = sample_runs(args.point, args.runs, args.round)
        if args.save:
            np.savez(args.save, **d)
    analyse(d, subsets=args.subsets)


if __name__ == "__main__":
    sys.exit(main())
