"""Tempered SMC against NUTS for a phase mass: the cost of one standard error, in one run.

Target: DSLT4 PT1 at t (default 1.2), n = 10,000, beta = 1/log n (n beta = 1,086), N(0, 1) prior, one
data set, float32; the phase: the radius rule's non-degenerate phase (DSLT4).  Each sampler runs R
independent times on the same data set (SMC: R runs of N particles; NUTS: R chains from random starts,
one per run), so the spread of the R masses is the Monte Carlo error of one run, whatever the sampler
believes about itself (a NUTS chain that stays in its starting basin reports 0 or 1, and the spread
across chains shows it).  The cost of a standard error `target` on the mass is then
(sd / target)^2 runs, each with its gradient evaluations and wall time.

    .venv/bin/python benchmarks/bench_smc.py [--runs 8] [--particles 256 512 1024 2048] [--target 0.01]

SMC rows: waste-free (N / 8 particles resampled, 7 HMC moves each, all states kept) at each N, and the
classic resample-move SMC (N resampled, 5 moves, the last kept) at N = 512.  Prints per sampler: the
mean mass, the sd across runs, gradient evaluations and wall seconds per run,
and the gradients and seconds to reach the target standard error, with the ratio NUTS / SMC; the
particle rows show how the cost scales with N.  Wall times exclude compilation (each program runs once
beforehand with the same shapes).

    .venv/bin/python benchmarks/bench_smc.py --pt2 [--v 1.0] [--runs 8]

DSLT4 PT2 at v (the 3-symmetric truth, n beta = 1,086, one data set): SMC with and without the
orientation flips (slt_relu.moves), R runs each (1,024 particles, and with the flips 2,048 and 4,096:
the stopping rule's growth of particles), and NUTS with and without the flip between
trajectories, R chains from random starts; per row the plain mean of the runs' sector-rule masses, the
sd across runs (chains) of each mass and of log Z (SMC), gradients per run, and the gradients to bring the worst mass's standard
error to the target, with the ratio of the setting before the flips (waste-free, 7 moves) to each row.  A
small spread is not a right answer: the rows with 5 and 3 leapfrog steps per move spread less and find less
"other" (read the masses beside the ratio).
"""
from __future__ import annotations

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import slt_relu as S
from slt_relu.phases import radius_rule, sector_phase
from slt_relu.posterior import draw_datasets, sample_posterior

RADIUS = ("other", "degenerate", "non_degenerate")
SECTOR = ("other", "true_orientation", "reversed")


def runs(settings, x, y, nb, model, R, seed):
    """R independent runs on one data set: (per-run non-degenerate mass, grads per run, wall per run)."""
    keys = jax.random.split(jax.random.PRNGKey(seed), R)
    xs, ys = jnp.repeat(x, R, 0), jnp.repeat(y, R, 0)
    sample_posterior(keys, xs, ys, nb, model=model, settings=settings)            # compile
    start = time.time()
    ps = sample_posterior(keys, xs, ys, nb, model=model, settings=settings)
    wall = time.time() - start
    codes = np.asarray(radius_rule(ps.params, eps=0.3))
    mass = (codes == RADIUS.index("non_degenerate")).mean(1)
    return mass, float(ps.draws.grad_evals.mean()), wall / R


def pt2(args):
    """SMC with and without the symmetry moves at PT2 v: sd of the masses and log Z over R runs."""
    ex = S.truths.get("dslt4_pt2", v=args.v)
    n = args.n
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(0), 1), ex.truth, ex.inputs, n, 1.0)
    nb = n / math.log(n)
    R = args.runs
    print(f"PT2 v = {args.v}, n = {n}, n beta = {nb:.0f}, one data set, {R} independent runs per row, float32, "
          f"{jax.devices()}; sector-rule masses, target standard error {args.target}")
    rows = [("waste-free, 7 moves (before the flips)", S.SMCSettings(waste_free=True, num_mcmc_steps=7)),
            ("waste-free, 7 moves + flips (config)", S.SMCSettings(waste_free=True, num_mcmc_steps=7,
                                                                   symmetry_moves=True)),
            ("waste-free, 3 moves + flips", S.SMCSettings(waste_free=True, num_mcmc_steps=3, symmetry_moves=True)),
            # shorter trajectories: the runs agree more, and on less "other" (docs/notes.md: they miss its basins)
            ("7 moves of 5 leapfrog steps + flips", S.SMCSettings(waste_free=True, num_mcmc_steps=7, num_leapfrog=5,
                                                                  symmetry_moves=True)),
            ("7 moves of 3 leapfrog steps + flips", S.SMCSettings(waste_free=True, num_mcmc_steps=7, num_leapfrog=3,
                                                                  symmetry_moves=True)),
            ("7 moves + flips, N = 2048", S.SMCSettings(num_particles=2048, waste_free=True, num_mcmc_steps=7,
                                                         symmetry_moves=True)),
            ("7 moves + flips, N = 4096", S.SMCSettings(num_particles=4096, waste_free=True, num_mcmc_steps=7,
                                                         symmetry_moves=True)),
            ("NUTS chain, 300 + 500 draws", S.NUTSSettings(num_warmup=300, num_samples=500)),
            ("NUTS chain + flips", S.NUTSSettings(num_warmup=300, num_samples=500, symmetry_moves=True))]
    print(f"{'SMC run (N = 1024 unless said) or NUTS':38s} {'true':>6s} {'rev':>6s} {'other':>6s} {'sd true':>8s} {'sd rev':>7s} "
          f"{'sd oth':>7s} {'sd logZ':>8s} {'grads/run':>10s} {'s/run':>6s} {'grads to target':>16s} {'ratio':>6s}")
    base = None
    keys = jax.random.split(jax.random.PRNGKey(1), R)
    xs, ys = jnp.repeat(x, R, 0), jnp.repeat(y, R, 0)
    for name, s in rows:
        # SMC: R runs, each on its copy of the data set; NUTS: R chains from random starts on the one data set
        smc = s.name == "smc"
        data = (xs, ys) if smc else (x, y)
        sample_posterior(keys, *data, nb, model=ex.model, settings=s, chains_per_dataset=1 if smc else R)  # compile
        start = time.time()
        ps = sample_posterior(keys, *data, nb, model=ex.model, settings=s, chains_per_dataset=1 if smc else R)
        wall = (time.time() - start) / R
        codes = np.asarray(sector_phase(ps.params, ex.truth))
        mass = np.stack([(codes == k).mean(1) for k in range(3)], 1)            # (R, 3) in SECTOR order
        sd = mass.std(0, ddof=1)
        grads = float(ps.draws.grad_evals.mean())
        need = grads * max((sd.max() / args.target) ** 2, 1.0)
        base = base or need
        m = mass.mean(0)
        print(f"{name:38s} {m[1]:6.3f} {m[2]:6.3f} {m[0]:6.3f} {sd[1]:8.3f} {sd[2]:7.3f} {sd[0]:7.3f} "
              f"{float(np.std(ps.draws.log_evidence, ddof=1)) if smc else float('nan'):8.3f} {grads:10.0f} {wall:6.2f} {need:16.3g} "
              f"{base / need:6.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pt2", action="store_true", help="PT2: SMC with and without the orientation flips")
    ap.add_argument("--v", type=float, default=1.0, help="PT2's v")
    ap.add_argument("--t", type=float, default=1.2)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--particles", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--nuts-warmup", type=int, default=500)
    ap.add_argument("--nuts-samples", type=int, default=2000)
    ap.add_argument("--target", type=float, default=0.01)
    ap.add_argument("--n", type=int, default=10000)
    args = ap.parse_args()
    if args.pt2:
        return pt2(args)
    ex = S.truths.get("dslt4_pt1", t=args.t)
    n = args.n
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(0), 1), ex.truth, ex.inputs, n, 1.0)
    nb = n / math.log(n)
    print(f"PT1 t = {args.t}, n = {n}, n beta = {nb:.0f}, one data set, {args.runs} independent runs per row, "
          f"float32, {jax.devices()}; phase: non-degenerate (radius rule); target standard error {args.target}")
    rows = []
    for N in args.particles:
        s = S.SMCSettings(num_particles=N, waste_free=True, num_mcmc_steps=7)
        rows.append((f"SMC waste-free, N = {N}", *runs(s, x, y, nb, ex.model, args.runs, 1)))
    s = S.SMCSettings(num_particles=512, num_mcmc_steps=5)
    rows.append(("SMC resample-move, N = 512", *runs(s, x, y, nb, ex.model, args.runs, 1)))
    s = S.NUTSSettings(num_warmup=args.nuts_warmup, num_samples=args.nuts_samples, target_accept_prob=0.9)
    nuts = (f"NUTS {args.nuts_warmup} + {args.nuts_samples}", *runs(s, x, y, nb, ex.model, args.runs, 2))
    rows.append(nuts)
    print(f"{'sampler':28s} {'mass':>6s} {'sd/run':>7s} {'grads/run':>10s} {'s/run':>7s} {'runs':>7s} "
          f"{'grads':>12s} {'seconds':>9s}")
    cost = {}
    for name, mass, grads, wall in rows:
        sd = float(mass.std(ddof=1))
        need = max((sd / args.target) ** 2, 1.0)
        cost[name] = (need * grads, need * wall)
        print(f"{name:28s} {mass.mean():6.3f} {sd:7.3f} {grads:10.0f} {wall:7.2f} {need:7.1f} {need * grads:12.3g} "
              f"{need * wall:9.1f}")
    best = min((c for n_, c in cost.items() if n_.startswith("SMC")), key=lambda c: c[0])
    print(f"NUTS / best SMC for the same standard error: {cost[nuts[0]][0] / best[0]:.1f}x the gradients, "
          f"{cost[nuts[0]][1] / best[1]:.1f}x the wall time (NUTS's per-chain masses: "
          f"{np.round(nuts[1], 3).tolist()})")


if __name__ == "__main__":
    main()
