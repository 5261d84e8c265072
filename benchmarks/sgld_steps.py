"""SGLD's estimand t E_t[K] (slt_relu.posterior.estimand_curve.sgld_tempered_loss_curve, as the known_lambda_suite
config runs it: chains from the true set's deepest point, each t's step chosen by pilot chains' MALA acceptance)
against the exact value, with the suite's steps and ten times as many, measured in the same run: where the reading
rises towards the exact value with the steps, SGLD's shortfall is its mixing, not its estimand.  The exact values:
for K = w1^2 + w2^4 under N(0, I) by quadrature (the posterior factorizes), for the deep linear and reduced-rank
losses by the exact blocked Gibbs sampler (slt_relu.posterior.linear_gibbs, 8 chains x 2,000 + 2,000 sweeps).

    .venv/bin/python benchmarks/sgld_steps.py [--steps 12000] [--factor 10]

(about a minute on a 2-core CPU.)
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

T = (1e4, 1e6, 1e8)


def sum_exact(t: float) -> float:
    """t E_t[w1^2 + w2^4] under N(0, 1)^2 exp(-t (w1^2 + w2^4)): t / (2t + 1) for w1 (a Gaussian of precision
    2t + 1), and for w2 the ratio of two integrals on a grid scaled to t^(-1/4) (trapezoid rule, 2e5 points)."""
    s = t ** -0.25
    x = np.linspace(-12 * s, 12 * s, 200_001)
    p = np.exp(-t * x ** 4 - x ** 2 / 2)
    return t / (2 * t + 1) + t * np.trapezoid(x ** 4 * p, x) / np.trapezoid(p, x)


def main() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    from slt_relu.known_lambda.losses import PolynomialLoss, ProductLoss
    from slt_relu.posterior.estimand_curve import sgld_tempered_loss_curve
    from slt_relu.posterior.linear_gibbs import linear_gibbs_curve

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12_000, help="the suite's SGLD steps per chain")
    p.add_argument("--factor", type=int, default=10, help="the longer run's steps over the suite's")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    C1 = rng.standard_normal((3, 1)) @ rng.standard_normal((1, 3))
    cases = {"w1^2 + w2^4": PolynomialLoss("sum", (1, 2)),
             "RRR 3-2-3, r = 1": ProductLoss((3, 2, 3), tuple(map(tuple, C1))),
             "DLN 3-3-3-3, r = 0": ProductLoss((3, 3, 3, 3), tuple(map(tuple, np.zeros((3, 3)))))}
    print(f"{'case':>20} {'t':>6} {'exact':>16} {'SGLD, ' + str(a.steps) + ' steps':>22} "
          f"{'SGLD, ' + str(a.steps * a.factor) + ' steps':>24}   t eps_t")
    for name, loss in cases.items():
        if isinstance(loss, PolynomialLoss):
            exact = [(sum_exact(t), 0.0) for t in T]
        else:
            g = linear_gibbs_curve(jax.random.key(1), loss.widths, T[-1], decades=math.log10(T[-1] / T[0]),
                                   temperatures=len(T), chains=8, burn_in=2000, sweeps=2000,
                                   target=np.asarray(loss.target))
            tk = g.t * g.mean_loss
            exact = list(zip(tk.mean(0), tk.std(0, ddof=1) / math.sqrt(len(tk))))
        rows = []
        for steps in (a.steps, a.steps * a.factor):
            start = time.time()
            sgld = sgld_tempered_loss_curve(jax.random.key(2), loss, loss.true_point(), T[-1],
                                            decades=math.log10(T[-1] / T[0]), temperatures=len(T), chains=8,
                                            num_steps=steps, num_burnin=steps // 6, thin=10)
            curve, kappa = sgld.curve, sgld.step_scale
            tk = curve.t * curve.mean_loss
            rows.append((tk.mean(0), tk.std(0, ddof=1) / math.sqrt(len(tk)), kappa, time.time() - start))
        for g, t in enumerate(T):
            cells = [f"{r[0][g]:9.4f} +- {r[1][g]:.4f}" for r in rows]
            print(f"{name:>20} {t:6.0e} {exact[g][0]:8.4f} +- {exact[g][1]:.4f} {cells[0]:>22} {cells[1]:>24}   "
                  f"{rows[0][2][g]:.3g}")
        print(f"{'':>20} SGLD's wall time {rows[0][3]:.1f} s and {rows[1][3]:.1f} s")


if __name__ == "__main__":
    main()
