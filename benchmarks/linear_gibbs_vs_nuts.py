"""The exact Gibbs sampler of deep linear networks (slt_relu.posterior.linear_gibbs) against NUTS
(slt_relu.posterior.estimand_curve) on the same estimand t E_t[K] of zero-truth deep linear networks, measured in
the same run: each sampler's t E_t[K] at t = 1e4 and 1e6 (4 chains, 300 + 300 iterations: NUTS's warm-up and
draws, Gibbs's burn-in and kept sweeps), its standard error over the chains, its wall time, and the ratio of
their costs for equal precision, (wall x se^2) of NUTS over that of Gibbs (above 1: Gibbs is cheaper).  lambda
is the exact value (Aoyagi 2024) the estimand approaches as t grows.

    .venv/bin/python benchmarks/linear_gibbs_vs_nuts.py [--widths 10-10-10-10,20-20-20-20-20]

(about 10 minutes on a 2-core CPU, most of it NUTS on the larger network.)
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    from slt_relu.known_lambda.losses import ProductLoss
    from slt_relu.known_lambda import deep_linear
    from slt_relu.posterior.estimand_curve import mcmc_tempered_loss_curve
    from slt_relu.posterior.linear_gibbs import linear_gibbs_curve
    from slt_relu.sampling import NUTSSettings

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", default="10-10-10-10,20-20-20-20-20", help="networks H_0-...-H_L, comma-separated")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--iterations", type=int, default=300, help="warm-up (burn-in) and kept, each")
    a = p.parse_args()
    print(f"{'network':>16} {'D':>6} {'lambda':>8} {'t':>6} {'NUTS t E_t[K]':>20} {'s':>6} "
          f"{'Gibbs t E_t[K]':>20} {'s':>6} {'cost ratio':>10}")
    for spec in a.widths.split(","):
        H = tuple(int(h) for h in spec.split("-"))
        D = sum(x * y for x, y in zip(H[:-1], H[1:]))
        lam = float(deep_linear(H[0], H[1:], 0)[0])
        common = dict(decades=2.0, temperatures=2, chains=a.chains)
        start = time.perf_counter()
        nuts = mcmc_tempered_loss_curve(jax.random.key(0), ProductLoss(H, tuple(map(tuple, np.zeros((H[-1], H[0]))))),
                                        D, 1e6, settings=NUTSSettings(num_warmup=a.iterations,
                                                                      num_samples=a.iterations), **common)
        nuts_s = time.perf_counter() - start
        start = time.perf_counter()
        gibbs = linear_gibbs_curve(jax.random.key(0), H, 1e6, burn_in=a.iterations, sweeps=a.iterations, **common)
        gibbs_s = time.perf_counter() - start
        for g, t in enumerate(nuts.t[0]):
            est = []
            for c in (nuts, gibbs):
                x = c.t[:, g] * c.mean_loss[:, g]
                est.append((x.mean(), x.std(ddof=1) / np.sqrt(len(x))))
            ratio = (nuts_s * est[0][1] ** 2) / (gibbs_s * est[1][1] ** 2)
            print(f"{spec:>16} {D:>6} {lam:>8.4g} {t:>6.0e} {est[0][0]:>11.4g} +- {est[0][1]:<6.2g} {nuts_s:>6.0f} "
                  f"{est[1][0]:>11.4g} +- {est[1][1]:<6.2g} {gibbs_s:>6.1f} {ratio:>10.3g}")


if __name__ == "__main__":
    main()
