"""A second estimator of DSLT4 PT2's log evidence: nested sampling (slt_relu.posterior.nested) against tempered SMC
with the orientation flips (dslt4_pt2_smc.toml's sampler), on one data set (default the first) of
the sweep points v = 1 and v = 1.5 (the same keys as `slt-relu run dslt4_pt2_smc`, so the sweep's
log_evidence_per_trial[dataset] is a third number for the same integral).

    .venv/bin/python benchmarks/dslt4_pt2_evidence_check.py [--runs 8] [--nested-runs 2] [--live 500]
        [--v 1.0 1.5] [--dataset 0] [--inner-steps K] [--out results/dslt4_pt2_evidence_check.json]

Per v: SMC's log Z (log of the mean Z of its runs) with its Monte Carlo error (the runs' spread), nested
sampling's (the mean of its runs; its error from the simulated volumes, or from the runs' spread where that
is larger), the difference in combined
standard errors, and whether it is within 3; and the sector rule's phase masses by both (SMC: each run's
masses weighted by its Z, the island estimator of slt_relu.posterior.masses; nested sampling: its points'
posterior weights, the mean over its runs).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from slt_relu.workflow import provenance, runner
from slt_relu.posterior.masses import log_evidence_mcse, phase_masses
from slt_relu.posterior.evidence import logmeanexp
from slt_relu.kinds.posterior_kind import point_keys
from slt_relu.posterior.nested import nested_log_evidence
from slt_relu.phases import SECTOR_PHASES, sector_phase
from slt_relu.posterior import draw_datasets, sample_posterior, tempered_target

CONFIG = runner.config_path("dslt4_pt2_smc")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--v", type=float, nargs="+", default=[1.0, 1.5])
    ap.add_argument("--runs", type=int, default=8, help="independent SMC runs on the data set")
    ap.add_argument("--nested-runs", type=int, default=2)
    ap.add_argument("--live", type=int, default=500, help="nested sampling's live points")
    ap.add_argument("--inner-steps", type=int, default=None,
                    help="nested sampling's slice moves per new point (default 6 x the free coordinates)")
    ap.add_argument("--dataset", type=int, default=0, help="which of the point's data sets")
    ap.add_argument("--out", type=Path, default=None, help="write the table as JSON here")
    args = ap.parse_args()
    prepared = runner.prepare(CONFIG)
    r = prepared.resolved
    jax.config.update("jax_enable_x64", r.settings.dtype == "float64")
    key = jax.random.PRNGKey(r.settings.seed)
    rows = []
    for v in args.v:
        pt = next((pt for pt in r.points if math.isclose(pt.values["truth.v"], v)), None)
        if pt is None:
            sys.exit(f"--v: expected values of the sweep {r.sweep['truth.v']}, got {v}")
        p = pt.settings
        kd, _ = point_keys(key, pt.index, p.data_index, p.datasets, p.chains_per_dataset)
        if not 0 <= args.dataset < p.datasets:
            sys.exit(f"--dataset: expected 0..{p.datasets - 1}, got {args.dataset}")
        x, y = draw_datasets(kd[args.dataset:args.dataset + 1], p.example.truth, p.inputs, p.n, p.sigma)
        R = args.runs
        start = time.time()
        ps = sample_posterior(jax.random.split(jax.random.fold_in(key, 10_000 + pt.index), R), jnp.repeat(x, R, 0),
                              jnp.repeat(y, R, 0), p.n_beta, model=p.model, prior=p.prior, sigma=p.sigma,
                              settings=p.sampler)
        smc_wall = time.time() - start
        lz = np.asarray(ps.draws.log_evidence, np.float64)
        smc, smc_se = float(logmeanexp(lz)), log_evidence_mcse(lz, np.zeros(R, int))
        pm = phase_masses(np.asarray(sector_phase(ps.params, p.example.truth)), SECTOR_PHASES, np.zeros(R, int), lz)
        nested = [nested_log_evidence(jax.random.PRNGKey(100 * pt.index + k), x[0], y[0], p.n_beta, model=p.model,
                                      prior=p.prior, sigma=p.sigma, num_live=args.live,
                                      num_inner_steps=args.inner_steps)
                  for k in range(args.nested_runs)]
        ns = float(np.mean([e.log_evidence for e in nested]))
        # the error of their mean: from the simulated volumes, or from the runs' spread where that is larger (the
        # simulated volumes do not see a constrained sampler that mixes poorly)
        ns_se_volumes = float(math.sqrt(sum(e.log_evidence_se ** 2 for e in nested)) / len(nested))
        ns_spread = float(np.std([e.log_evidence for e in nested], ddof=1)) if len(nested) > 1 else float("nan")
        ns_se = max(ns_se_volumes, ns_spread / math.sqrt(len(nested))) if len(nested) > 1 else ns_se_volumes
        ns_mass = np.array([_masses(e, p) for e in nested])                              # (runs, 3)
        z = (smc - ns) / math.hypot(smc_se, ns_se)
        rows.append({"v": v, "dataset": args.dataset, "n_beta": p.n_beta, "smc_log_evidence": smc, "smc_mcse": smc_se,
                     "smc_runs": lz.tolist(), "smc_mass": dict(zip(SECTOR_PHASES, pm.mass.tolist())),
                     "smc_mass_mcse": dict(zip(SECTOR_PHASES, pm.mcse_runs.tolist())),
                     "smc_mass_per_run": pm.per_chain.tolist(),
                     "smc_wall_s": smc_wall, "smc_grad_evals_per_run": float(ps.draws.grad_evals.mean()),
                     "nested_log_evidence": ns, "nested_se": ns_se,
                     "nested_se_volumes": ns_se_volumes, "nested_runs_sd": ns_spread,
                     "nested_inner_steps": args.inner_steps,
                     "nested_mass": dict(zip(SECTOR_PHASES, ns_mass.mean(0).tolist())),
                     "nested_runs": [{**{k: v for k, v in e._asdict().items() if k not in ("z", "weight")},
                                      "mass": dict(zip(SECTOR_PHASES, m.tolist()))} for e, m in zip(nested, ns_mass)],
                     "combined_se": math.hypot(smc_se, ns_se),
                     "difference_in_se": z, "agree_within_3_se": bool(abs(z) <= 3)})
        print(f"v = {v}, data set {args.dataset}: SMC log Z {smc:.3f} +- {smc_se:.3f} ({R} runs, sd "
              f"{lz.std(ddof=1):.3f}); nested {ns:.3f} +- {ns_se:.3f} ({len(nested)} runs: "
              f"{', '.join(f'{e.log_evidence:.3f}' for e in nested)}; {args.live} live points, {nested[0].wall_s:.0f} s "
              f"each); difference {smc - ns:+.3f} = {z:+.2f} combined se: {'agree' if abs(z) <= 3 else 'DISAGREE'}",
              flush=True)
        print("  masses " + ", ".join(f"{nm}: SMC {m:.3f} +- {e:.3f}, nested {', '.join(f'{r[k]:.3f}' for r in ns_mass)}"
                                      for k, (nm, m, e) in enumerate(zip(SECTOR_PHASES, pm.mass, pm.mcse_runs))),
              flush=True)
    if args.out:
        args.out.write_text(json.dumps({"config": str(CONFIG.name), "command": " ".join(sys.argv),
                                        "versions": provenance.versions(), "machine": provenance.machine(),
                                        "rows": rows}, indent=1))


def _masses(e, p) -> np.ndarray:
    """The sector rule's masses from nested sampling's weighted points (SECTOR_PHASES order)."""
    tg = tempered_target(p.model, p.prior, p.sigma)
    params = jax.vmap(lambda z: p.model.embed(tg.constrain(z)))(jnp.asarray(e.z))
    codes = np.asarray(sector_phase(jax.tree.map(np.asarray, params), p.example.truth))
    return np.array([e.weight[codes == k].sum() for k in range(len(SECTOR_PHASES))])


if __name__ == "__main__":
    main()
