"""How the fitted window limits the known-lambda suite's readings (results/known_lambda_suite): SMC's free-energy
curves of the same losses over other windows, beside checks that do not depend on the fit.

1. The two-parameter normal crossings K = w1^(2 k1) w2^(2 k2) and the zero-truth reduced-rank / deep linear cases
   with t_max = 1e8, 1e16 and 1e25 (WINDOWS: the fit over the last 5 decades of each, and over t = 1e3 .. 1e16,
   the suite's, and 1e3 .. 1e25): lambda for the m the rule chooses and at the exact m, the m it identifies (or
   "?"), and for the crossings two checks the fit does not enter: SMC's F against the exact quadrature
   (``check_free_energy``: the largest |z| over the window and its Student-t bound) and the same rule read off the
   exact curve itself (the quadrature with 1e-4 noise, 4 runs: what the window allows without SMC's noise or bias).
2. The reduced-rank / deep-linear / regular families from data sets of n = 1e5 (the suite's data cases: each run
   its own data set, L* fitted) beside their population loss K over the same window, the suite's t = 30 .. 3e4: the window,
   not the data, sets how close the reading comes.
3. SMC against an exact sampler along t: the linear population cases' t E_t[K] by SMC (8 runs to t = 1e16) and by
   blocked Gibbs sweeps (``linear_gibbs_curve``, 16 chains, 400 + 800 sweeps) at 12 t from 1e3 to 1e14 (the Gibbs
   sampler's MAX_T), point by point, with the chains whose t E_t[K] passes D (no loss of D parameters has lambda
   above D / 2).
4. The layers' GL(H) moves (``slt_relu.moves.LayerReparametrization``, the suite's smc.symmetry_moves): SMC with and
   without them on the five linear population cases to t = 1e16, lambda (F) at the exact m over t = 1e3 .. 1e16, and
   on zero-truth reduced rank 2-1-2 SMC's F against its exact quadrature (``reduced_rank_one_free_energy``).
5. A next pole's power in the fit: the six two-parameter crossings' exact t E_t[K] (quadrature, no sampler) over the
   suite's window t = 1e3 .. 1e16 at its 24 grid points, fitted with m = 1 and 2 by the rule's forms and by the same
   forms plus a t^(-delta) with delta free (profiled over 0.01 .. 1.5: Watanabe's expansion of Z(t) holds such a
   term for every further pole), each point weighted by the standard error of SMC's mean curve there (the committed
   results/known_lambda_suite, 8 runs): lambda's error at each m, and chi^2.  With the power, the wrong m fits as well
   as the right one, so m could not be identified and lambda would carry their difference.
6. Where a data set's window ends: the six data cases of part 2 (SMC, 8 runs of n = 1e5 each, to t = 1e5) on fresh
   data sets (``--data-seeds``), each curve fitted over the last 3 decades up to t = n beta_max for beta_max = 1 (the
   Bayes posterior), 0.3 (known_lambda_suite's) and 0.1 (the curve interpolated at the window's top, linearly in
   log t, as the fit interpolates its grid): lambda (F) for the m the rule prefers, at the exact m, and how many
   cases are within 3 standard errors and 5 % of the exact value at each beta_max.

SMC runs as the suite's (symmetry moves on the reduced-rank and deep linear cases) in parts 1-3 and 6.

    .venv/bin/python benchmarks/known_lambda_windows.py [--runs 8] [--particles 2048] [--part 1,2,3,4,5,6] [--data-seeds 1,2,3,4,5]

(parts 1-4 about 10 minutes on a 2-core CPU; part 5 seconds; parts 2 and 6 together 6 minutes.)
"""
from __future__ import annotations

import argparse
import functools
import math
import time
from pathlib import Path

import numpy as np

WINDOWS = {1e8: (5.0,), 1e16: (5.0, 13.0), 1e25: (5.0, 22.0)}     # t_max: the decades of each fitted window
DATA_T_MAX = 3e4                                                   # the suite's data cases: t = n beta, beta <= 0.3
CROSSINGS = [(1, 1), (1, 2), (2, 2), (1, 3), (2, 3), (3, 3)]
ZERO_TRUTH = [{"name": "RRR 3-2-3, r = 0", "family": "reduced_rank", "input_dim": 3, "hidden": 2, "output_dim": 3},
              {"name": "DLN 3-3-3-3, r = 0", "family": "deep_linear", "input_dim": 3, "widths": [3, 3, 3]}]
DATA = [*ZERO_TRUTH,
        {"name": "RRR 3-2-3, r = 1", "family": "reduced_rank", "input_dim": 3, "hidden": 2, "output_dim": 3,
         "true_rank": 1},
        {"name": "RRR 2-1-2, r = 0", "family": "reduced_rank", "input_dim": 2, "hidden": 1, "output_dim": 2},
        {"name": "DLN 2-2-2-2, r = 1", "family": "deep_linear", "input_dim": 2, "widths": [2, 2, 2], "true_rank": 1},
        {"name": "regular d = 4", "family": "regular", "num_params": 4}]


def _case(case: dict):
    from slt_relu.kinds.lambda_curve_kind import Settings, resolve
    from slt_relu.workflow.settings import parse

    return resolve(parse(Settings, {"kind": "lambda_curve", "smc": {"name": "smc"}, "cases": [case]})).cases[0]


def _curve(key, c, t_max, runs, settings):
    """SMC's runs of a case as the suite makes them (with settings.symmetry_moves, the layers' GL(H) moves on reduced
    rank and deep linear cases)."""
    import jax

    from slt_relu.known_lambda.losses import regression_statistics
    from slt_relu.kinds.lambda_readings import smc_moves
    from slt_relu.posterior.free_energy_curve import smc_free_energy_curve

    run_data = None if c.regression is None else regression_statistics(jax.random.fold_in(key, 2), *c.regression,
                                                                       c.settings.n, runs)
    settings, moves = smc_moves(settings, c)
    return smc_free_energy_curve(key, c.loss, c.num_params, t_max, settings, num_runs=runs, run_data=run_data,
                                 moves=moves)


def _reading(fit, lam, m) -> str:
    """lambda for the m the window prefers (identified, or '?' with the preferred m), and at the exact m."""
    d = fit.details
    at = d.lambda_by_m[m]
    preferred = next(k for k, v in d.lambda_by_m.items() if v == fit.lambda_)     # the same fit, bit for bit
    return (f"{fit.lambda_:.4f} +- {fit.se:.4f} m {fit.m if fit.m is not None else f'? (prefers {preferred})'}"
            f" | at m {m}: {at:.4f} "
            f"+- {d.lambda_se_by_m[m]:.4f} ({100 * (at / lam - 1):+.1f} %, z {(at - lam) / d.lambda_se_by_m[m]:+.1f})")


def _exact_curve_fit(k, t_max, decades):
    """The rule on the quadrature's F and t E_t[K] (central differences in log t), 4 runs with 1e-4 noise."""
    from slt_relu.posterior.exact_free_energy import normal_crossing_free_energy
    from slt_relu.posterior.free_energy_curve import fit_learning_coefficient
    from slt_relu.posterior.learning_coefficient import TemperedCurve

    t = np.logspace(math.log10(t_max) - decades - 0.5, math.log10(t_max), 80)
    F = functools.partial(normal_crossing_free_energy, k)
    slope = (F(t * math.exp(1e-4)) - F(t * math.exp(-1e-4))) / 2e-4
    rng = np.random.default_rng(0)
    noise = lambda: 1e-4 * rng.normal(size=(4, len(t)))
    curve = TemperedCurve(np.tile(t, (4, 1)), F(t) + noise(), (slope + noise()) / t, np.zeros(4), 0)
    return fit_learning_coefficient(curve, "free_energy", decades=decades)


def part_windows(args, settings):
    import jax
    from scipy.stats import t as student

    from slt_relu.known_lambda import normal_crossing
    from slt_relu.posterior.exact_free_energy import check_free_energy, normal_crossing_free_energy
    from slt_relu.posterior.free_energy_curve import fit_learning_coefficient

    print("1. the window: t_max = 1e8, 1e16, 1e25; the fit over the last 5 decades, and from t = 1e3 (the suite's: "
          "t_max = 1e16, 13 decades) (free_energy)")
    cases = [{"name": f"w1^{2 * a} w2^{2 * b}", "family": "normal_crossing", "k": [a, b]} for a, b in CROSSINGS]
    for i, spec in enumerate(cases + ZERO_TRUTH):
        c = _case(spec)
        for t_max, windows in WINDOWS.items():
            start = time.time()
            curve = _curve(jax.random.fold_in(jax.random.key(args.seed), 100 * i + int(math.log10(t_max))), c, t_max,
                           args.runs, settings)
            for decades in windows:
                try:
                    fit = fit_learning_coefficient(curve, "free_energy", decades=decades)
                except ValueError as err:              # a run that ends with too few stages in the window
                    print(f"  {spec['name']:20s} t <= {t_max:.0e}, {decades:g} decades: no fit ({err})", flush=True)
                    continue
                line = (f"  {spec['name']:20s} t <= {t_max:.0e}, {decades:g} decades: "
                        f"{_reading(fit, c.lambda_exact, c.m_exact)}")
                if spec["family"] == "normal_crossing":
                    k = tuple(spec["k"])
                    chk = check_free_energy(curve, functools.partial(normal_crossing_free_energy, k), *fit.window)
                    bound = student.ppf(1 - 0.01 / (2 * len(chk.t)), args.runs - 1)
                    exact_fit = _exact_curve_fit(k, t_max, decades)
                    lam, m = normal_crossing(k)
                    line += (f" | quadrature |z| {np.max(np.abs(chk.z)):.1f} (bound {bound:.1f}) | exact curve's "
                             f"reading: m {exact_fit.m if exact_fit.m is not None else '?'}, at m {m}: "
                             f"{100 * (exact_fit.details.lambda_by_m[m] / float(lam) - 1):+.1f} %")
                print(line + f" | {curve.grad_evals:.2e} gradients, {time.time() - start:.0f} s", flush=True)


def part_data(args, settings):
    import jax

    from slt_relu.posterior.free_energy_curve import fit_learning_coefficient

    print(f"2. data sets of n = 1e5 (L* fitted) against the population K, both over the last 3 decades up to "
          f"t = {DATA_T_MAX:g} (free_energy)")
    for i, spec in enumerate(DATA):
        for n in (100_000, None):
            c = _case({**spec, **({"n": n, "t_max": DATA_T_MAX, "decades": 3.0} if n else {})})
            curve = _curve(jax.random.fold_in(jax.random.key(args.seed + 1), i), c, DATA_T_MAX, args.runs, settings)
            fit = fit_learning_coefficient(curve, "free_energy", loss_min=None if n else 0.0, decades=3.0)
            print(f"  {spec['name']:20s} {'n = 1e5  ' if n else 'population'}: "
                  f"{_reading(fit, c.lambda_exact, c.m_exact)}", flush=True)


def part_gibbs(args, settings):
    import jax

    from slt_relu.posterior.linear_gibbs import linear_gibbs_curve

    print("3. SMC's t E_t[K] against the exact Gibbs sampler's, t = 1e3 .. 1e14 (mean +- se over runs / chains)")
    for i, spec in enumerate(DATA[:5]):
        c = _case(spec)
        smc = _curve(jax.random.fold_in(jax.random.key(args.seed + 2), i), c, 1e16, args.runs, settings)
        gibbs = linear_gibbs_curve(jax.random.fold_in(jax.random.key(args.seed + 3), i), c.loss.widths, 1e14,
                                   decades=11.0, temperatures=12, chains=16, burn_in=400, sweeps=800,
                                   target=np.asarray(c.loss.target))
        g = gibbs.t * gibbs.mean_loss
        s = np.array([np.interp(np.log(gibbs.t[0]), np.log(t[np.isfinite(t)]), (t * y)[np.isfinite(t)])
                      for t, y in zip(smc.t, smc.mean_loss)])
        print(f"  {spec['name']} (exact {c.lambda_exact:.4g}, m {c.m_exact}; Gibbs chains above D = {c.num_params}: "
              f"{int(np.sum(np.any(~(g <= c.num_params), axis=1)))} of {len(g)})", flush=True)
        for k, t in enumerate(gibbs.t[0]):
            gm, gs = np.mean(g[:, k]), np.std(g[:, k], ddof=1) / math.sqrt(len(g))
            sm, ss = np.mean(s[:, k]), np.std(s[:, k], ddof=1) / math.sqrt(len(s))
            print(f"    t = {t:.0e}: Gibbs {gm:.3f} +- {gs:.3f}, SMC {sm:.3f} +- {ss:.3f} "
                  f"(z {(sm - gm) / math.hypot(gs, ss):+.1f})", flush=True)


def part_moves(args, settings):
    """SMC with and without the layers' GL(H) moves on the linear population cases to t = 1e16: lambda (F) at the
    exact m over t = 1e3 .. 1e16, and on reduced rank 2-1-2 (zero truth) F against its exact quadrature."""
    import functools

    import jax
    from scipy.stats import t as student

    from slt_relu.posterior.exact_free_energy import check_free_energy, reduced_rank_one_free_energy
    from slt_relu.posterior.free_energy_curve import fit_learning_coefficient

    print("4. the layers' GL(H) moves (smc.symmetry_moves): lambda (F) at the exact m over t = 1e3 .. 1e16, and "
          "RRR 2-1-2's F against the exact quadrature (largest |z| over 24 points; mean residual at 1e16)")
    exact = functools.partial(reduced_rank_one_free_energy, 2, 2)
    bound = student.ppf(1 - 0.01 / 48, args.runs - 1)
    for i, spec in enumerate(DATA[:5]):
        c = _case(spec)
        for moves in (False, True):
            start = time.time()
            curve = _curve(jax.random.fold_in(jax.random.key(args.seed + 4), i), c, 1e16, args.runs,
                           settings.model_copy(update={"symmetry_moves": moves}))
            fit = fit_learning_coefficient(curve, "free_energy", decades=13.0)
            line = f"  {spec['name']:20s} moves {'on ' if moves else 'off'}: {_reading(fit, c.lambda_exact, c.m_exact)}"
            if spec["name"].startswith("RRR 2-1-2"):
                chk = check_free_energy(curve, exact, 1e3, 1e16)
                line += (f" | exact F: |z| {np.max(np.abs(chk.z)):.1f} (bound {bound:.1f}), residual at 1e16 "
                         f"{chk.mean[-1]:+.3f} +- {chk.se[-1]:.3f} nats")
            print(line + f" | {curve.grad_evals:.2e} gradients, {time.time() - start:.0f} s", flush=True)


def part_power(args, settings):
    import xarray as xr

    from slt_relu.known_lambda import normal_crossing
    from slt_relu.posterior.exact_free_energy import normal_crossing_free_energy
    from slt_relu.posterior.free_energy_curve import _design, _on_grid

    grid = np.logspace(3.0, 16.0, 24)                  # the suite's window and grid
    deltas = np.concatenate([np.linspace(0.01, 0.2, 39), np.linspace(0.21, 1.5, 40)])
    committed = xr.open_dataset(Path(__file__).resolve().parent.parent / "results" / "known_lambda_suite" / "results.nc")
    print("5. a next pole's power t^(-delta) in the fit of t E_t[K] (exact curves, t = 1e3 .. 1e16, 24 points, "
          "weighted by SMC's standard errors of results/known_lambda_suite): lambda's error and chi^2 at m = 1, 2")

    def fit(y, se, m, delta):
        X, off = _design(grid, "tempered_loss", m, 0.0)            # the rule's form, then the power
        X = np.column_stack([X, grid ** -delta]) if delta else X
        beta = np.linalg.lstsq(X / se[:, None], (y - off) / se, rcond=None)[0]
        return beta[0], float(np.sum(((y - off - X @ beta) / se) ** 2))

    for a, b in CROSSINGS:
        name = f"w1^{2 * a} w2^{2 * b}"
        lam, m_exact = normal_crossing((a, b))
        F = functools.partial(normal_crossing_free_energy, (a, b))
        y = (F(grid * math.exp(1e-4)) - F(grid * math.exp(-1e-4))) / 2e-4
        run = committed.sel(case=name)
        slopes = _on_grid(run["t"].values, run["t"].values * run["mean_loss"].values, grid)    # (runs, 24) t E_t[K]
        se = slopes.std(0, ddof=1) / math.sqrt(len(slopes))
        cells = []
        for m in (1, 2):
            plain = fit(y, se, m, None)
            power = min((fit(y, se, m, d) + (d,) for d in deltas), key=lambda r: r[1])
            cells.append(f"m = {m}: {100 * (plain[0] / float(lam) - 1):+.1f} % (chi^2 {plain[1]:.1f}), with the power "
                         f"{100 * (power[0] / float(lam) - 1):+.1f} % (chi^2 {power[1]:.2f}, delta {power[2]:.2f})")
        print(f"  {name:10s} lambda {lam}, m {m_exact} | " + " | ".join(cells), flush=True)


def _up_to(curve, t_hi):
    """The curve's stages up to t_hi, with a last stage at t_hi itself (F and E_t[L] interpolated linearly in log t)."""
    from slt_relu.posterior.learning_coefficient import TemperedCurve

    t, F, L = (np.full_like(curve.t, np.nan) for _ in range(3))
    for r in range(len(curve.t)):
        ok = np.isfinite(curve.t[r]) & (curve.t[r] < t_hi)
        k = int(ok.sum())
        t[r, :k], F[r, :k], L[r, :k] = curve.t[r, ok], curve.free_energy[r, ok], curve.mean_loss[r, ok]
        inside = np.isfinite(curve.t[r])
        at = lambda y: np.interp(math.log(t_hi), np.log(curve.t[r, inside]), y[r, inside])
        t[r, k], F[r, k], L[r, k] = t_hi, at(curve.free_energy), at(curve.mean_loss)
    return TemperedCurve(t, F, L, curve.prior_mean_loss, curve.grad_evals)


def part_data_windows(args, settings):
    import jax

    from slt_relu.posterior.free_energy_curve import fit_learning_coefficient

    beta_max = (1.0, 0.3, 0.1)
    print(f"6. where a data set's window ends: the last 3 decades up to t = n beta_max, beta_max = "
          f"{', '.join(map(str, beta_max))} (n = 1e5, fresh data sets: seeds {args.data_seeds}; free_energy)")
    passed = dict.fromkeys(beta_max, 0)
    total = 0
    for seed in map(int, args.data_seeds.split(",")):
        for i, spec in enumerate(DATA):
            c = _case({**spec, "n": 100_000, "t_max": 1e5, "decades": 3.0})
            start = time.time()
            curve = _curve(jax.random.fold_in(jax.random.key(1000 + seed), i), c, 1e5, args.runs, settings)
            cells = []
            for b in beta_max:
                fit = fit_learning_coefficient(_up_to(curve, 1e5 * b), "free_energy", loss_min=None, decades=3.0)
                ok = abs(fit.lambda_ - c.lambda_exact) <= min(3 * fit.se, 0.05 * c.lambda_exact)
                passed[b] += ok
                cells.append(f"beta <= {b:g}: {fit.lambda_:.3f} +- {fit.se:.3f} "
                             f"({100 * (fit.lambda_ / c.lambda_exact - 1):+.1f} %{', within' if ok else ''}; at m "
                             f"{c.m_exact} {100 * (fit.details.lambda_by_m[c.m_exact] / c.lambda_exact - 1):+.1f} %)")
            total += 1
            print(f"  seed {seed} {spec['name']:20s} " + " | ".join(cells) + f" | {time.time() - start:.0f} s", flush=True)
    print("  within 3 standard errors and 5 %: " + ", ".join(f"beta <= {b:g}: {k} of {total}" for b, k in passed.items()))


def main():
    import jax

    jax.config.update("jax_enable_x64", True)
    from slt_relu.sampling import SMCSettings

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--particles", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--part", default="1,2,3,4,5,6", help="which tables: 1 (windows), 2 (data), 3 (SMC against Gibbs), "
                   "4 (SMC with and without the layers' moves), 5 (a next pole's power in the fit), "
                   "6 (where a data set's window ends)")
    p.add_argument("--data-seeds", default="1,2,3,4,5", help="part 6's data sets (each seed: the six cases' 8 runs)")
    args = p.parse_args()
    settings = SMCSettings(num_particles=args.particles, num_mcmc_steps=7, waste_free=True, target_ess=0.9,
                           max_stages=2000, symmetry_moves=True)        # the suite's
    start = time.time()
    if "1" in args.part.split(","):
        part_windows(args, settings)
    if "2" in args.part.split(","):
        part_data(args, settings)
    if "3" in args.part.split(","):
        part_gibbs(args, settings)
    if "4" in args.part.split(","):
        part_moves(args, settings)
    if "5" in args.part.split(","):
        part_power(args, settings)
    if "6" in args.part.split(","):
        part_data_windows(args, settings)
    print(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
