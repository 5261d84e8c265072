"""The 5-gon / 6-gon Bayesian phase transition of the toy model of superposition (c = 6), measured by tempered SMC.

The tempered posterior phi(w) exp(-n beta L_n(w)) of f(x) = ReLU(W^T W x + b) (W (2, 6), b (6,); x = mu e_i;
beta = 1; prior N(0, 1) per coordinate) at log-spaced n, each with K nested data sets and R independent SMC runs
per data set (``slt_relu.tms.transition.bayesian_transition``): the posterior mass of each k-gon phase (labels of
``slt_relu.tms.transition.phase_codes``) pooled over the runs by their evidence, with its Monte Carlo error from
the runs (mcse) and its spread over data sets (se), log Z, and the n where the 6-gon takes the lead from the
5-gon (the log mass ratio interpolated linearly in log n; its se a two-stage bootstrap over data sets and
runs), beside the asymptotic formula n (L_5 - L_6) = (lambda_6 - lambda_5) log n from the exact losses and the
first-principles lambdas (``slt_relu.tms.kgon``).

After the scan, ``refine`` more n inside the bracket of the grouped crossover; with --check, at the n nearest
the crossover, the first 4 data sets are run again with twice the particles and twice the HMC moves per
stage: their masses must agree with the main run's within the combined Monte Carlo errors (the settings
converge).

    .venv/bin/python benchmarks/tms_transition.py [--ns 50,83,...] [--datasets 8] [--runs 4] [--particles 512]
                                                  [--moves 5] [--leapfrog 8] [--prior-std 1] [--refine 2]
                                                  [--no-check] [--out results/tms_transition] [--redraw]

Writes OUT/transition.nc (the xarray Dataset: dims n, dataset, run, variant, phase, comparison) and
OUT/transition.png (each phase's mass against n, the log mass ratio, the crossover and the formula's n) and
OUT/metrics.json (``transition``: n_crossover, n_crossover_se, n_formula of the grouped 6-gon / 5-gon
comparison; ``comparisons``: every pair; ``masses``: per n the mass, se and mcse of each phase, log Z; the
check; the settings; wall times).

Measured (the defaults, seed 0; 474 s on a 2-core CPU shared with other work): the 6-gon takes the lead from
the 5-gon at n = 435 +- 50 (the data sets' spread 49, the runs' 1.4), from the 5-gon "-" at 430 +- 47, and
leads the 5-gon "+" wherever either holds 1 % of the mass; the formula gives 445 (both the "-" variant and the
group, which that variant dominates; the "+" variant has the 6-gon's lambda, 8.5: no crossing).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parent.parent
SHOWN = ("6-gon", "5-gon", "4-gon", "3-gon", "none")
VARIANTS = ("5-gon +", "5-gon -")


def fmt(m, e):
    return f"{m:6.3f}+-{e:5.3f}" if np.isfinite(e) else f"{m:6.3f}+-  nan"


def row(n, p) -> str:
    g = lambda nm: fmt(float(p.phase_mass_mean.sel(phase=nm)), float(p.phase_mass_mcse.sel(phase=nm)))
    v = lambda nm: fmt(float(p.mass_mean.sel(variant=nm)), float(p.mass_mcse.sel(variant=nm)))
    return (f"{n:6d} " + " ".join(g(nm) for nm in SHOWN) + " " + " ".join(v(nm) for nm in VARIANTS)
            + f" {float(p.log_z_mean):9.2f}+-{float(p.log_z_mcse):5.3f} {float(p.num_stages.mean()):6.1f}"
            + f" {p.attrs['wall_s']:6.1f}")


def header() -> str:
    return (f"{'n':>6s} " + " ".join(f"{nm:>14s}" for nm in SHOWN + VARIANTS) + f" {'log Z':>16s} {'stages':>6s}"
            + f" {'wall_s':>6s}")


def finite(v):
    """v with NaN and infinities as None (JSON has no NaN), NumPy scalars as Python numbers."""
    if isinstance(v, dict):
        return {str(k): finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def per_dataset_mcse(ds, var, dim, name):
    """(K,) the Monte Carlo error of each data set's pooled mass (the delta method over its runs)."""
    from slt_relu.posterior.masses import runs_mcse

    x = ds[var].sel({dim: name}).values                    # (K, R)
    w = ds["weight"].values
    K, R = x.shape
    return np.array([runs_mcse(x[k][:, None], np.zeros(R, int), w[k])[0] for k in range(K)])


def draw(ds, out: Path) -> Path:
    """OUT/transition.png from the Dataset: each phase's mass against n and the 6-gon / 5-gon log mass ratio,
    with the crossover (and its se) and the formula's n."""
    from slt_relu.plots import save_figure, tms_transition_figure

    g = "6-gon vs 5-gon"
    fig = tms_transition_figure(ds.n.values, ds.phase.values, ds.phase_mass_mean.values, ds.phase_mass_se.values,
                                ds.log_mass_ratio.sel(comparison=g).values,
                                float(ds.n_crossover.sel(comparison=g)), float(ds.n_crossover_se.sel(comparison=g)),
                                float(ds.n_formula.sel(comparison=g)),
                                title=f"TMS c = {int(ds.attrs['c'])}, beta = {float(ds.attrs['beta']):g}: the posterior "
                                      f"mass of each k-gon phase (tempered SMC, {ds.sizes['dataset']} data sets x "
                                      f"{ds.sizes['run']} runs per n) and where the 6-gon takes the lead")
    return save_figure(fig, out / "transition.png")


def main(argv=None):
    from slt_relu.netcdf import write_tree
    from slt_relu.sampling import SMCSettings
    from slt_relu.tms import transition as T

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--c", type=int, default=6)
    ap.add_argument("--ns", default=None, help="comma-separated n (default 10 log-spaced from 50 to 5000)")
    ap.add_argument("--datasets", type=int, default=8)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--particles", type=int, default=512)
    ap.add_argument("--moves", type=int, default=5)
    ap.add_argument("--leapfrog", type=int, default=8)
    ap.add_argument("--prior-std", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--refine", type=int, default=2)
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "results" / "tms_transition"))
    ap.add_argument("--redraw", action="store_true", help="only redraw OUT/transition.png from OUT/transition.nc")
    a = ap.parse_args(argv)
    if a.redraw:
        import xarray as xr

        with xr.open_dataset(Path(a.out) / "transition.nc") as ds:
            print("wrote", draw(ds.load(), Path(a.out)))
        return
    start = time.time()
    c = a.c
    ns = ([int(v) for v in a.ns.split(",")] if a.ns else
          sorted({int(round(v)) for v in np.logspace(math.log10(50), math.log10(5000), 10)}))
    settings = SMCSettings(num_particles=a.particles, num_mcmc_steps=a.moves, num_leapfrog=a.leapfrog, target_ess=0.5,
                           max_stages=400, particle_batch=a.particles)
    print(f"TMS c = {c}, beta = {a.beta}, prior N(0, {a.prior_std}^2), {a.datasets} data sets x {a.runs} runs x "
          f"{a.particles} particles ({a.moves} HMC moves x {a.leapfrog} leapfrog per stage), ns = {ns}, "
          f"refine {a.refine}; CPU devices {jax.devices()}")
    print("mass (evidence-pooled, mean over data sets) +- Monte Carlo error from the runs; log Z +- its MC error")
    print(header(), flush=True)
    ds = T.bayesian_transition(jax.random.key(a.seed), c, ns, datasets=a.datasets, runs=a.runs, settings=settings,
                               prior_std=a.prior_std, beta=a.beta, n_boot=a.n_boot, refine=a.refine,
                               keep_particles=True, progress=lambda i, n, p: print(row(n, p), flush=True))
    scan_s = time.time() - start
    print("\nsorted by n, with the spread over data sets (se) of the 6-gon and 5-gon masses:")
    for n in ds.n.values:
        p = ds.sel(n=n)
        print(f"{int(n):6d}  6-gon {float(p.phase_mass_mean.sel(phase='6-gon')):.3f} se "
              f"{float(p.phase_mass_se.sel(phase='6-gon')):.3f}   5-gon "
              f"{float(p.phase_mass_mean.sel(phase='5-gon')):.3f} se "
              f"{float(p.phase_mass_se.sel(phase='5-gon')):.3f}   log(m6/m5) "
              f"{float(ds.log_mass_ratio.sel(comparison='6-gon vs 5-gon', n=n)):+.3f}")
    pred = T.formula_predictions(c, beta=a.beta)
    print(f"\nformula: {pred['a']} L = {pred['loss_a']:.7f}, lambda = {pred['lambda_a']}; " + "; ".join(
        f"{k} L = {v['loss']:.7f}, lambda = {v['lambda']}, n_formula = {v['n_formula']:.1f}"
        for k, v in pred["variants"].items()) + f"; the 5-gon group (sum over variants): n_formula = "
        f"{pred['group']:.1f}, where the {pred['dominant']} variant dominates it")
    print(f"\n{'comparison':20s} {'n_crossover':>12s} {'se':>7s} {'se_data':>7s} {'se_runs':>7s} {'found':>6s}"
          f" {'n_formula':>9s}")
    for cmp in ds.comparison.values:
        q = ds.sel(comparison=cmp)
        print(f"{cmp:20s} {float(q.n_crossover):12.1f} {float(q.n_crossover_se):7.1f} "
              f"{float(q.n_crossover_se_datasets):7.1f} {float(q.n_crossover_se_runs):7.1f} "
              f"{float(q.crossover_found):6.2f} {float(q.n_formula):9.1f}")

    # the labelling rule's part: the same particles under other rules
    rules = {"angle_tol 0.5": dict(angle_tol=0.5), "angle_tol 0.125": dict(angle_tol=0.125),
             "dead columns by length (phases.label alone)": dict(dead_unused=False)}
    sensitivity = {}
    print("\nthe same particles under other labelling rules (6-gon vs 5-gon; none's mass at the n nearest the "
          "crossover):")
    for nm, rule in rules.items():
        alt = T.relabel(ds, **rule)
        q = alt.sel(comparison="6-gon vs 5-gon")
        near = int(alt.n.values[np.argmin(np.abs(alt.n.values - (float(q.n_crossover)
                                                                 if np.isfinite(float(q.n_crossover)) else 500)))])
        none = float(alt.phase_mass_mean.sel(n=near, phase="none"))
        sensitivity[nm] = {"n_crossover": float(q.n_crossover), "n_crossover_se": float(q.n_crossover_se),
                           "none_mass": none, "at_n": near}
        print(f"  {nm:44s} n_crossover {float(q.n_crossover):7.1f} +- {float(q.n_crossover_se):5.1f}   none "
              f"{none:.3f} at n = {near}")

    # the local free energies against the asymptotic form: F_alpha - n beta L_n(w_alpha) = lambda log(n beta) + C
    from slt_relu.tms import refined_kgon, sample_inputs, to_flat
    k_data, _ = jax.random.split(jax.random.key(a.seed))
    n_max = int(ds.n.values[-1])
    xs = np.stack([np.asarray(sample_inputs(k, n_max, c)) for k in jax.random.split(k_data, a.datasets)])
    fits = {}
    print("\nlocal free energies: G = F_alpha - n beta L_n(w_alpha) (w_alpha the refined k-gon, L_n on each data set) "
          "against log(n beta), where the phase's mean mass >= 0.02: lambda_eff (slope, mean +- se over data sets), "
          "and C_alpha = mean of G - lambda_alpha log(n beta) with the first-principles lambda")
    for nm, k, npos in (("6-gon", 6, 0), ("5-gon -", 5, 0), ("5-gon +", 5, 1)):
        w = to_flat(refined_kgon(c, k, npos))
        mass = ds.mass_mean.sel(variant=nm).values
        use = np.flatnonzero(mass >= 0.02)
        if len(use) < 2:
            continue
        nb = ds.n.values[use] * a.beta
        Ln = np.array([[float(T.sorted_empirical_loss(w, T.sorted_inputs(xs[kk, :int(n)]))) for kk in range(a.datasets)]
                       for n in ds.n.values[use]])                                     # (B, K)
        F = ds["free_energy"].sel(variant=nm).isel(n=use).transpose("n", "dataset").values
        G = F - nb[:, None] * Ln
        ok = np.all(np.isfinite(G), axis=0)
        X = np.stack([np.log(nb), np.ones_like(nb)], 1)
        coef = np.linalg.lstsq(X, G[:, ok], rcond=None)[0]                             # (2, K')
        lam_fp = pred["variants"][nm]["lambda"] if nm in pred["variants"] else pred["lambda_a"]
        Cs = np.mean(G[:, ok] - lam_fp * np.log(nb)[:, None], axis=0)
        se = lambda v: float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
        fits[nm] = {"n": [int(v) for v in ds.n.values[use]], "lambda_eff": float(coef[0].mean()),
                    "lambda_eff_se": se(coef[0]), "C_fit": float(coef[1].mean()), "lambda": lam_fp,
                    "C": float(Cs.mean()), "C_se": se(Cs), "datasets": int(ok.sum())}
        print(f"  {nm:8s} n = {fits[nm]['n']}: lambda_eff = {fits[nm]['lambda_eff']:.2f} +- "
              f"{fits[nm]['lambda_eff_se']:.2f} (first principles {lam_fp}); C = {fits[nm]['C']:.2f} +- "
              f"{fits[nm]['C_se']:.2f}")
    if "6-gon" in fits and "5-gon -" in fits:
        from scipy.optimize import brentq
        f6, f5 = fits["6-gon"], fits["5-gon -"]
        L6, L5 = pred["loss_a"], pred["variants"]["5-gon -"]["loss"]
        F6 = lambda u: math.exp(u) * L6 + f6["lambda"] * u + f6["C"]
        gap = lambda u: math.exp(u) * L5 + f5["lambda"] * u + f5["C"] - F6(u)
        try:
            n_const = math.exp(brentq(gap, math.log(10.0), math.log(1e6))) / a.beta
        except ValueError:
            n_const = float("nan")
        fits["n_formula_with_constants"] = n_const
        print(f"  the formula with these constants, n (L_5- - L_6) = (lambda_6 - lambda_5-) log n + C_6 - C_5-: "
              f"n = {n_const:.1f} (C_6 - C_5- = {f6['C'] - f5['C']:+.2f} nats)")

    check = None
    grouped = ds.sel(comparison="6-gon vs 5-gon")
    if not a.no_check and np.isfinite(float(grouped.n_crossover)):
        n_star = float(grouped.n_crossover)
        n_chk = int(ds.n.values[np.argmin(np.abs(np.log(ds.n.values) - math.log(n_star)))])
        Kc = min(4, a.datasets)
        big = settings.model_copy(update=dict(num_particles=2 * a.particles, num_mcmc_steps=2 * a.moves,
                                              particle_batch=2 * a.particles))
        t0 = time.time()
        ref = T.posterior_phase_masses(jax.random.key(a.seed + 1000), c, n_chk, datasets=Kc, runs=a.runs,
                                       settings=big, prior_std=a.prior_std, beta=a.beta, inputs=xs[:Kc],
                                       pad_to=int(ds.n.values[-1]))
        main_pt = ds.sel(n=n_chk).isel(dataset=slice(0, Kc))
        check = {"n": n_chk, "datasets": Kc, "particles": big.num_particles, "moves": big.num_mcmc_steps,
                 "wall_s": time.time() - t0, "phases": {}}
        print(f"\ncheck at n = {n_chk}: data sets 0..{Kc - 1} again with {big.num_particles} particles and "
              f"{big.num_mcmc_steps} moves per stage (independent runs): per data set mass (main / check, "
              "difference in combined MC errors)")
        worst = 0.0
        for nm in ("6-gon", "5-gon", "none"):
            m1 = main_pt.phase_mass.sel(phase=nm).values
            m2 = ref.phase_mass.sel(phase=nm).values
            e1 = per_dataset_mcse(main_pt, "run_phase_mass", "phase", nm)
            e2 = per_dataset_mcse(ref, "run_phase_mass", "phase", nm)
            z = (m1 - m2) / np.sqrt(e1 ** 2 + e2 ** 2)
            worst = max(worst, float(np.max(np.abs(z))))
            check["phases"][nm] = {"main": m1.tolist(), "check": m2.tolist(), "main_mcse": e1.tolist(),
                                   "check_mcse": e2.tolist(), "z": z.tolist()}
            print(f"  {nm:6s} " + "  ".join(f"{x:.3f}/{y:.3f} ({zz:+.1f})" for x, y, zz in zip(m1, m2, z)))
        lz1, lz2 = main_pt.log_z.values, ref.log_z.values
        check["log_z"] = {"main": lz1.tolist(), "check": lz2.tolist()}
        check["max_abs_z"] = worst
        print(f"  log Z  " + "  ".join(f"{x:.2f}/{y:.2f}" for x, y in zip(lz1, lz2)))
        print(f"  largest |difference| / combined MC error: {worst:.2f} ({time.time() - t0:.0f} s)")

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_tree(ds.drop_vars(["particles", "particle_loss"]), out / "transition.nc")
    comps = {str(cmp): {"n_crossover": float(q.n_crossover), "n_crossover_se": float(q.n_crossover_se),
                        "n_crossover_se_datasets": float(q.n_crossover_se_datasets),
                        "n_crossover_se_runs": float(q.n_crossover_se_runs),
                        "crossover_found": float(q.crossover_found), "n_formula": float(q.n_formula)}
             for cmp, q in ((cmp, ds.sel(comparison=cmp)) for cmp in ds.comparison.values)}
    masses = []
    for n in ds.n.values:
        p = ds.sel(n=n)
        masses.append({"n": int(n), "log_z": float(p.log_z_mean), "log_z_se": float(p.log_z_se),
                       "log_z_mcse": float(p.log_z_mcse),
                       "mass": {str(k): float(v) for k, v in zip(ds.phase.values, p.phase_mass_mean.values)},
                       "mass_se": {str(k): float(v) for k, v in zip(ds.phase.values, p.phase_mass_se.values)},
                       "mass_mcse": {str(k): float(v) for k, v in zip(ds.phase.values, p.phase_mass_mcse.values)},
                       "variant_mass": {str(k): float(v) for k, v in zip(ds.variant.values, p.mass_mean.values)
                                        if v > 0},
                       "variant_mass_mcse": {str(k): float(e) for k, v, e in
                                             zip(ds.variant.values, p.mass_mean.values, p.mass_mcse.values) if v > 0},
                       "relative_free_energy": {str(k): float(v) for k, v in
                                                zip(ds.phase.values, p.phase_relative_free_energy.values)
                                                if np.isfinite(v)},
                       "stages_mean": float(p.num_stages.mean()), "wall_s": float(p.wall_s)})
    g = comps["6-gon vs 5-gon"]
    metrics = {
        "transition": {"c": c, "n_crossover": g["n_crossover"], "n_crossover_se": g["n_crossover_se"],
                       "n_formula": g["n_formula"], "n_formula_variant": "5-gon group (dominated by the "
                       f"{pred['dominant']} variant)",
                       "n_formula_by_variant": {k: v["n_formula"] for k, v in pred["variants"].items()}},
        "comparisons": comps, "masses": masses, "check": check, "labelling_sensitivity": sensitivity,
        "free_energy_fits": fits,
        "formula": {"a": pred["a"], "loss_a": pred["loss_a"], "lambda_a": pred["lambda_a"],
                    "variants": pred["variants"], "group": pred["group"], "dominant": pred["dominant"]},
        "settings": {"c": c, "ns": [int(v) for v in ds.n.values], "datasets": a.datasets, "runs": a.runs,
                     "prior_std": a.prior_std, "beta": a.beta, "refine": a.refine, "seed": a.seed,
                     "smc": json.loads(settings.model_dump_json()), "labels": {
                         "length_threshold": ds.attrs["length_threshold"], "angle_tol": ds.attrs["angle_tol"],
                         "dead_unused": bool(ds.attrs["dead_unused"])}},
        "wall_s": {"scan": scan_s, "total": time.time() - start}}
    (out / "metrics.json").write_text(json.dumps(finite(metrics), indent=1, allow_nan=False) + "\n")
    draw(ds, out)
    print(f"\nwrote {out / 'transition.nc'}, {out / 'metrics.json'} and {out / 'transition.png'}; wall {time.time() - start:.0f} s "
          f"(scan {scan_s:.0f} s)")


if __name__ == "__main__":
    main()
