"""NUTS on DSLT4's PT1 posterior: numpyro's sequential chains vs the vectorised runners, one run.

Setup (the issue's): n = 10,000, d = 2 (PT1 truth at t = 1.2), inputs uniform on [-1, 1]^2,
sigma = 1, N(0, 1) prior, beta = 1/log n, target acceptance 0.9; float32; every chain has
its own data set (a DSLT4 trial).  The same numpyro model (slt_relu.posterior.posterior_model) and the
same NUTS (numpyro's; the async runner replays it step for step) run four ways:

  sequential  numpyro's MCMC, one chain at a time (chain_method="sequential"), as DSLT4 ran Pyro
  lockstep    numpyro's kernel vmapped over the chains in one program (every iteration waits
              for the largest tree of any chain)
  async       slt_relu.sampling.nuts: one leapfrog step per tick, each chain on its own tree, all slots
  queue       the same with 16 slots and a task queue (the CPU default)

Reported: gradient evaluations per second (the chains' own counts, not the idle lanes), bulk
ESS of L_n per second (summed over chains, each chain its own posterior), and the ratio to the
sequential baseline.  --matmul also times the lockstep runner with the model's forward written
as a matrix product (x @ W^T) instead of slt_relu.network.forward_columns.

    .venv/bin/python benchmarks/bench_posterior.py [--chains 8] [--warmup 300] [--samples 300] [--sweep-points 8]

--sweep-points P also times P sweep points (PT1 at P values of t, 4 trials each) in programs of
1, 2, 4, ... P points (what the posterior kind's points_per_program trades: speed against
checkpoints).

The full PT1 sweep's wall time is the runner's, in results/dslt4_pt1_node_degeneracy/manifest.json
(printed at the end when present).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import slt_relu as S
from slt_relu.loss import gaussian_nll
from slt_relu import diagnostics as dg
from slt_relu.sampling import NUTSSettings
from slt_relu.posterior import draw_datasets, posterior_model, sample_posterior

ROOT = Path(__file__).resolve().parent.parent


def sequential(keys, x, y, nb, model, warmup, samples):
    """numpyro's MCMC, one chain per data set, one after another (compiled once, reused)."""
    from numpyro.infer import MCMC, NUTS

    kernel = NUTS(lambda xc, yc, b: posterior_model(xc, yc, b, model=model), target_accept_prob=0.9)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, num_chains=1, progress_bar=False)
    grads, ess, losses = 0, 0.0, []
    start = time.time()
    for k in range(x.shape[0]):
        mcmc.post_warmup_state = None
        mcmc.warmup(keys[k], x[k].T, y[k], nb, extra_fields=("num_steps",), collect_warmup=True)
        grads += int(np.sum(mcmc.get_extra_fields()["num_steps"]))
        mcmc.run(mcmc.post_warmup_state.rng_key, x[k].T, y[k], nb, extra_fields=("num_steps",))
        grads += int(np.sum(mcmc.get_extra_fields()["num_steps"]))
        draws = mcmc.get_samples()
        params = S.TwoLayer(draws["w"].reshape(-1, 2, 2), draws["b"], draws["q"], draws["c"][:, 0])
        loss = np.asarray(jax.vmap(lambda p: S.empirical_loss(p, x[k], y[k]))(params))
        losses.append(loss)
        ess += dg.ess_bulk(loss[None])
    return time.time() - start, grads, ess, None


def runner(keys, x, y, nb, model, warmup, samples, schedule, slots=None):
    s = NUTSSettings(num_warmup=warmup, num_samples=samples, schedule=schedule, target_accept_prob=0.9, slots=slots)
    start = time.time()
    ps = sample_posterior(keys, x, y, nb, model=model, settings=s)
    wall = time.time() - start
    ess = sum(dg.ess_bulk(ps.loss[c][None]) for c in range(ps.loss.shape[0]))
    return wall, int(ps.draws.grad_evals.sum()), ess, ps.draws.ticks


def matmul_lockstep(keys, x, y, nb, warmup, samples):
    """The lockstep runner with f = relu(x W^T + b) q + c as matrix products (same prior, same data)."""
    from slt_relu.sampling import sample

    def gen(xr, yr, b):
        def U(z):
            p = S.from_flat(z, 2, 2)
            return 0.5 * jnp.sum(z**2) + b * gaussian_nll(yr - S.forward(p, xr), 1.0)
        return U

    z0 = jax.vmap(lambda k: jax.random.uniform(k, (9,), x.dtype, -2, 2))(keys)
    s = NUTSSettings(num_warmup=warmup, num_samples=samples, schedule="lockstep", target_accept_prob=0.9)
    start = time.time()
    out = sample(keys, gen, z0, (x, y, jnp.full(x.shape[0], nb, x.dtype)), s)
    return time.time() - start, int(out.grad_evals.sum()), None, out.ticks


def sweep_programs(points: int, chains: int, n: int, warmup: int, samples: int):
    """PT1 at `points` values of t, `chains` trials each, run in programs of P points for P = 1, 2,
    4, ... up to all points (the posterior kind's points_per_program), compiled beforehand, so the
    wall times compare the sampling alone; ratio = the one-program time / this time."""
    from slt_relu.posterior import draw_datasets, sample_posterior

    ts = np.linspace(1.0, 1.5, points)
    s = NUTSSettings(num_warmup=warmup, num_samples=samples, target_accept_prob=0.9)
    nb = n / math.log(n)
    data = [draw_datasets(jax.random.split(jax.random.PRNGKey(10 + i), chains), S.truths.dslt4_pt1(float(t)),
                          S.UniformBox(1.0, 2), n, 1.0) for i, t in enumerate(ts)]
    keys = [jax.random.split(jax.random.PRNGKey(100 + i), chains) for i in range(points)]
    model = S.truths.get("dslt4_pt1").model
    sizes = sorted({2 ** k for k in range(int(math.log2(points)) + 1)} | {points})
    walls = {}
    for size in sizes:
        groups = [list(range(i, min(i + size, points))) for i in range(0, points, size)]

        def run(settings, groups=groups):
            for g in groups:
                sample_posterior(jnp.concatenate([keys[i] for i in g]), jnp.concatenate([data[i][0] for i in g]),
                                 jnp.concatenate([data[i][1] for i in g]), nb, model=model, settings=settings)

        run(s.replace(num_warmup=5, "num_samples": 5))        # compile every program size
        start = time.time()
        run(s)
        walls[size] = time.time() - start
    print(f"sweep of {points} PT1 points x {chains} chains, {warmup} + {samples} iterations, compiled beforehand "
          f"({jax.devices()[0].platform}, {len(jax.devices())} device(s)):")
    for size, wall in walls.items():
        print(f"  {size:3d} points per program: {len(range(0, points, size)):3d} programs, {wall:7.1f} s, "
              f"{walls[points] / wall:5.2f}x the one-program speed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chains", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--matmul", action="store_true")
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument("--sweep-points", type=int, default=0, help="also time a sweep: one program vs one per point")
    args = ap.parse_args()
    if args.sweep_points:
        sweep_programs(args.sweep_points, 4, args.n, args.warmup, args.samples)
    ex = S.truths.get("dslt4_pt1", t=1.2)
    n, C = args.n, args.chains
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(0), C), ex.truth, ex.inputs, n, 1.0)
    nb = n / math.log(n)
    keys = jax.random.split(jax.random.PRNGKey(1), C)
    print(f"PT1 t = 1.2, n = {n}, {C} chains (own data sets), {args.warmup} warm-up + {args.samples} draws each, "
          f"float32, devices {jax.devices()}")
    rows = []
    if not args.skip_sequential:
        rows.append(("sequential (numpyro MCMC)", *sequential(keys, x, y, nb, ex.model, args.warmup, args.samples)))
    rows.append(("lockstep (vmapped numpyro kernel)", *runner(keys, x, y, nb, ex.model, args.warmup, args.samples,
                                                              "lockstep")))
    if args.matmul:
        rows.append(("lockstep, matmul forward", *matmul_lockstep(keys, x, y, nb, args.warmup, args.samples)))
    rows.append(("async, all chains in slots", *runner(keys, x, y, nb, ex.model, args.warmup, args.samples, "async",
                                                       slots=C)))
    if C > 16:
        rows.append(("async, 16 slots + queue", *runner(keys, x, y, nb, ex.model, args.warmup, args.samples, "async",
                                                        slots=16)))
    base = rows[0]
    print(f"{'runner':36s} {'wall s':>8s} {'grads':>9s} {'grads/s':>9s} {'ESS(L_n)/s':>11s} {'ticks':>8s} "
          f"{'ratio':>6s}")
    for name, wall, grads, ess, ticks in rows:
        print(f"{name:36s} {wall:8.1f} {grads:9d} {grads / wall:9.0f} "
              f"{(ess / wall) if ess else float('nan'):11.2f} {ticks or 0:8d} {base[1] / wall:6.2f}x")
    print("(wall times include compilation; ratio = baseline wall / wall for the same chains and iterations)")
    manifest = ROOT / "results" / "dslt4_pt1_node_degeneracy" / "manifest.json"
    if manifest.exists():
        m = json.loads(manifest.read_text())
        print(f"full PT1 sweep (22 t x 4 chains x 5,000 iterations): {m['wall_time_s']:.0f} s on "
              f"{m['jax_devices']} ({m['finished_utc']})")


if __name__ == "__main__":
    main()
