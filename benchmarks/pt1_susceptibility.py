"""DSLT4 PT1 near its transition: which inputs pull the posterior towards the degenerate phase.

At t = pi/2 PT1's truth is 2 relu(x2 - 0.3): one node expresses it, and W0 has two phases, one node
degenerate (``+ | 1 degenerate``) and both nodes on the one boundary (``++``).  This script samples the
tempered posterior there by tempered SMC (the committed ``dslt4_pt1_smc`` config's sampler: waste-free,
7 HMC moves per stage, 512 particles; N(0, 1) prior, sigma = 1, n = 10,000, beta = 1/log n, float32) on K
data sets, R independent runs each, and computes for two observables

    O_radius   = 1[DSLT4's radius rule says "degenerate"]  (min_i r_i < 0.3, |max_i r_i - 2| < 0.3, r_i = |q_i| |w_i|),
    O_classify = 1[classify_phase at the data's resolution says the degenerate phase "+ | 1 degenerate"],

their susceptibility to upweighting the data in each cell A of a bins x bins grid over the input box
[-1, 1]^2 (``slt_relu.posterior.observables.susceptibility``):

    chi_A = d/d eps E_eps[O] under n beta (L_n + eps L_A) = -n beta Cov(O, L_A),  L_A = (1/n) sum_{k in A} ell_k,

per data set pooled over its runs by their evidence weights (``slt_relu.posterior.masses.run_weights``), with
the delete-one-run jackknife standard error.  chi_A > 0: more data in cell A would raise the degenerate
phase's posterior mass.  A cell's chi on one data set mixes where its inputs are with its outputs' realised
noise (the linear term of Cov(O, ell_k) is proportional to the residual y_k - f(x_k)); the mean over the K
data sets, with the standard error of their spread (K - 1 degrees of freedom; it holds the data's noise and
the Monte Carlo error), is what the figure shows: which inputs, not which data points.

    .venv/bin/python benchmarks/pt1_susceptibility.py [--t 1.5708] [--datasets 6] [--runs 6] [--particles 512]
                                                     [--bins 6] [--check] [--out results/dslt4_pt1_susceptibility]

--check: on data set 0, S = every other sample of the x2 band whose chi is the most significant is counted
twice (eps = +1) and removed (eps = -1), R new runs each: (E_+[O] - E_-[O]) / 2 = chi_S + O(eps^3) against
chi_S from the draws at eps = 0 (a test of the first-order formula on the real posterior).

Writes OUT/susceptibility.png, OUT/susceptibility.nc (the xarray Dataset: chi and chi_se per data set,
cell and observable, their mean over data sets and its se, the cells' edges) and OUT/metrics.json (the
settings, the masses, the per-cell numbers, the cells whose mean is at least 3 se from 0, wall times).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OBSERVABLES = ("radius rule: degenerate", "classify_phase: + | 1 degenerate")


def cells(x, bins: int, half_width: float = 1.0):
    """Each input's cell of a bins x bins grid over [-a, a]^2: label iy * bins + ix (n,), and the edges."""
    edges = np.linspace(-half_width, half_width, bins + 1)
    ix = np.clip(np.searchsorted(edges, x[:, 0], side="right") - 1, 0, bins - 1)
    iy = np.clip(np.searchsorted(edges, x[:, 1], side="right") - 1, 0, bins - 1)
    return iy * bins + ix, edges


def kink_lines(t: float, half_width: float = 1.0):
    """The truth's boundaries <w0_j, x> = 0.3 across the box as (label, xs, ys): w0 = (+-cos t, sin t), one line
    x2 = 0.3 at t = pi/2."""
    xs = np.linspace(-half_width, half_width, 2)
    if abs(math.cos(t)) < 1e-9:
        return [("truth's kink x2 = 0.3", xs, np.full(2, 0.3))]
    return [(lab, xs, (0.3 - sign * math.cos(t) * xs) / math.sin(t))
            for lab, sign in (("truth's kinks", 1.0), ("_nolegend_", -1.0))]


def observables(ex, params, n: int, sigma: float, beta: float) -> np.ndarray:
    """(..., 2) O_radius and O_classify of draws with leading axes (...)."""
    from slt_relu.classify import classify_phase
    from slt_relu.phases import radius_rule

    radius = np.asarray(radius_rule(params)) == 1
    got = classify_phase(params, ex.truth, inputs=ex.inputs, n=n, sigma=sigma, beta=beta)
    classified = np.vectorize(str, otypes=[object])(got.label) == "+ | 1 degenerate"
    return np.stack([radius, classified], -1).astype(float)


def check(args, ex, x, y, in_s, beta, settings, key_runs, predicted) -> dict:
    """The first-order prediction against resampling: the posterior with S's samples counted twice (eps = +1: S
    appended again, n' = n + |S|) and removed (eps = -1), n' beta each (beta held), R new runs each; the central
    difference (E_+[O] - E_-[O]) / 2 = chi_S + O(eps^3) against chi_S from the draws at eps = 0."""
    from slt_relu.posterior import sample_posterior
    from slt_relu.posterior.masses import run_weights, runs_mcse

    R, n = args.runs, len(y)
    means, ses = {}, {}
    for eps, (xe, ye) in ((+1, (np.concatenate([x, x[in_s]]), np.concatenate([y, y[in_s]]))),
                          (-1, (x[~in_s], y[~in_s]))):
        ne = len(ye)
        keys = jax.random.split(jax.random.fold_in(key_runs, 1000 + eps), R)
        ps = sample_posterior(keys, jnp.repeat(jnp.asarray(xe)[None], R, 0), jnp.repeat(jnp.asarray(ye)[None], R, 0),
                              ne * beta, model=ex.model, settings=settings)
        per_run = observables(ex, ps.params, n, 1.0, beta).mean(1)          # (R, 2), O as at eps = 0 (n, beta held)
        w = run_weights(ps.draws.log_evidence, np.zeros(R, int))
        means[eps], ses[eps] = w @ per_run, runs_mcse(per_run, np.zeros(R, int), w)
    diff = (means[1] - means[-1]) / 2
    diff_se = np.sqrt(ses[1] ** 2 + ses[-1] ** 2) / 2
    z = (diff - np.array(predicted["chi_S"])) / np.sqrt(diff_se**2 + np.array(predicted["chi_S_se"]) ** 2)
    print(f"\nreweighting check: S = every other sample of the x2 band {predicted['band']} "
          f"({predicted['size']} samples)")
    for p, nm in enumerate(OBSERVABLES):
        print(f"  {nm}: E[O] at eps = +1 {means[1][p]:.3f} +- {ses[1][p]:.3f}, at eps = -1 {means[-1][p]:.3f} +- "
              f"{ses[-1][p]:.3f}; (P+ - P-)/2 = {diff[p]:+.4f} +- {diff_se[p]:.4f} against chi_S = "
              f"{predicted['chi_S'][p]:+.4f} +- {predicted['chi_S_se'][p]:.4f} (z = {z[p]:+.2f})")
    return {**predicted, "mass_plus": means[1].tolist(), "mass_plus_se": ses[1].tolist(),
            "mass_minus": means[-1].tolist(), "mass_minus_se": ses[-1].tolist(), "central_difference": diff.tolist(),
            "central_difference_se": diff_se.tolist(), "z": z.tolist()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--t", type=float, default=math.pi / 2)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--datasets", type=int, default=6)
    ap.add_argument("--runs", type=int, default=6, help="independent SMC runs per data set")
    ap.add_argument("--particles", type=int, default=512)
    ap.add_argument("--bins", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "dslt4_pt1_susceptibility")
    ap.add_argument("--check", action="store_true", help="also resample data set 0 with a subset S of its strongest "
                    "x2 band counted twice and removed (R runs each): (P+ - P-)/2 against chi_S")
    args = ap.parse_args(argv)

    import xarray as xr

    import slt_relu as S
    from slt_relu.netcdf import write_tree
    from slt_relu.plots import save_figure, susceptibility_figure
    from slt_relu.posterior import draw_datasets, sample_posterior
    from slt_relu.posterior.masses import effective_runs, run_weights
    from slt_relu.posterior.observables import per_sample_losses, susceptibility

    start = time.time()
    ex = S.truths.get("dslt4_pt1", t=args.t)
    n, K, R, B, sigma = args.n, args.datasets, args.runs, args.bins, 1.0
    beta = 1.0 / math.log(n)
    n_beta = n * beta
    key_data, key_runs = jax.random.split(jax.random.PRNGKey(args.seed))
    x, y = draw_datasets(jax.random.split(key_data, K), ex.truth, ex.inputs, n, sigma)
    settings = S.SMCSettings(num_particles=args.particles, waste_free=True, num_mcmc_steps=7)
    print(f"DSLT4 PT1 at t = {args.t:.4f}, n = {n}, n beta = {n_beta:.0f}, {K} data sets x {R} SMC runs of "
          f"{args.particles} particles (waste-free, 7 HMC moves per stage), {jax.devices()[0].platform}, "
          f"{jnp.zeros(()).dtype}")
    ps = sample_posterior(jax.random.split(key_runs, K * R), x, y, n_beta, model=ex.model, settings=settings,
                          chains_per_dataset=R)
    t_sample = time.time() - start
    O = observables(ex, ps.params, n, sigma, beta)                                # (K R, N, 2)
    names = list(OBSERVABLES)
    per_set, whole, eff, subset = [], [], [], None
    for k in range(K):
        mine = ps.dataset == k
        params = jax.tree.map(lambda a: a[mine], ps.params)
        ell = per_sample_losses(params, x[k], y[k], sigma)                          # (R, N, n)
        w = run_weights(ps.draws.log_evidence[mine], np.zeros(R, int))
        eff.append(float(effective_runs(ps.draws.log_evidence[mine], np.zeros(R, int))[0]))
        labels, edges = cells(np.asarray(x[k]), B)
        per_set.append(susceptibility(O[mine], ell, labels, n_beta, weights=w, observable_names=names)
                       .reindex(group=np.arange(B * B)))
        whole.append(susceptibility(O[mine], ell, np.zeros(n, int), n_beta, weights=w, observable_names=names))
        if args.check and k == 0:   # S: every other point of the x2 band with the largest |z| of the first observable
            bands = susceptibility(O[mine], ell, labels // B, n_beta, weights=w, observable_names=names)
            band = int(np.nanargmax(np.abs(bands.chi.values[:, 0] / bands.chi_se.values[:, 0])))
            members = np.flatnonzero(labels // B == band)
            in_s = np.zeros(n, bool)
            in_s[members[::2]] = True
            sub = susceptibility(O[mine], ell, in_s.astype(int), n_beta, weights=w, observable_names=names)
            subset = (in_s, {"band": [float(edges[band]), float(edges[band + 1])], "size": int(in_s.sum()),
                             "chi_S": sub.chi.sel(group=1).values.tolist(),
                             "chi_S_se": sub.chi_se.sel(group=1).values.tolist()})
        del ell
    t_obs = time.time() - start - t_sample
    ds = xr.concat(per_set, "dataset")                                              # (dataset, group, observable)
    ds["chi_whole"] = xr.concat([d.chi.isel(group=0, drop=True) for d in whole], "dataset")
    ds["chi_whole_se"] = xr.concat([d.chi_se.isel(group=0, drop=True) for d in whole], "dataset")
    ds["chi_mean"] = ds.chi.mean("dataset")
    ds["chi_mean_se"] = ds.chi.std("dataset", ddof=1) / math.sqrt(K)                # data noise + Monte Carlo
    ds["chi_mean_mcse"] = np.sqrt((ds.chi_se**2).sum("dataset")) / K                 # Monte Carlo only
    ds = ds.assign_coords(cell_x=("group", np.arange(B * B) % B), cell_y=("group", np.arange(B * B) // B))
    ds["edges"] = ("edge", edges)
    ds["effective_runs"] = ("dataset", eff)
    ds.attrs.update({"t": args.t, "datasets": K, "runs_per_dataset": R, "particles": args.particles, "bins": B,
                     "mean_se_method": "sd over data sets / sqrt(K)"})
    chi = ds.chi_mean.values.T.reshape(2, B, B)                                    # (observable, iy, ix)
    se = ds.chi_mean_se.values.T.reshape(2, B, B)
    mcse = ds.chi_mean_mcse.values.T.reshape(2, B, B)
    z = chi / se

    print(f"sampling {t_sample:.0f} s, labels and susceptibilities {t_obs:.0f} s; effective runs per data set "
          f"{np.round(eff, 1).tolist()} of {R}")
    print("cells: ix along x1, iy along x2, each [edge, edge) of", np.round(edges, 3).tolist())
    report = {}
    for p, nm in enumerate(names):
        mass = ds.observable_mean.values[:, p]
        cw, cw_se = ds.chi_whole.values[:, p], ds.chi_whole_se.values[:, p]
        print(f"\nO = {nm}: posterior mass per data set {np.round(mass, 3).tolist()}; whole-data chi per data set "
              + ", ".join(f"{a:+.3f} +- {b:.3f}" for a, b in zip(cw, cw_se)))
        print(f"mean over the {K} data sets of chi_A +- se (spread over data sets; rows: x2 high to low)")
        for iy in range(B - 1, -1, -1):
            print("  " + "  ".join(f"{chi[p, iy, ix]:+.4f}({se[p, iy, ix]:.4f})" for ix in range(B)))
        pull = [(int(ix), int(iy)) for iy, ix in zip(*np.nonzero(z[p] >= 3))]
        push = [(int(ix), int(iy)) for iy, ix in zip(*np.nonzero(z[p] <= -3))]
        print(f"  mean at least 3 se above 0 (pull towards): {pull}; 3 se below (push away): {push}")
        print(f"  Monte Carlo part of the se: median {np.median(mcse[p] / se[p]):.2f} of it")
        report[nm] = {"mass_per_dataset": mass.tolist(), "chi_whole_per_dataset": cw.tolist(),
                      "chi_whole_per_dataset_se": cw_se.tolist(), "chi_mean": chi[p].tolist(),
                      "chi_mean_se": se[p].tolist(), "chi_mean_mcse": mcse[p].tolist(), "pull_cells_z3": pull,
                      "push_cells_z3": push}
    checked = None
    if args.check:
        checked = check(args, ex, np.asarray(x[0]), np.asarray(y[0]), subset[0], beta, settings, key_runs, subset[1])

    args.out.mkdir(parents=True, exist_ok=True)
    fig = susceptibility_figure(edges, edges, chi, se, panel_titles=names, lines=kink_lines(args.t), significance=3.0,
                                title=f"DSLT4 PT1 at t = {args.t:.4g}, n = {n}, n beta = {n_beta:.0f}: which inputs "
                                      f"pull the posterior towards the degenerate phase (chi_A > 0: more data in "
                                      f"cell A raises its mass; mean over {K} data sets x {R} SMC runs, se from "
                                      f"their spread)")
    save_figure(fig, args.out / "susceptibility.png")
    write_tree(ds, args.out / "susceptibility.nc")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    metrics = {"truth": "dslt4_pt1", "t": args.t, "n": n, "beta": beta, "n_beta": n_beta, "sigma": sigma,
               "datasets": K, "runs_per_dataset": R, "particles": args.particles, "bins": B,
               "cell_edges": edges.tolist(), "seed": args.seed, "cell_index": "chi[iy][ix], ix along x1, iy along x2",
               "convention": per_set[0].attrs["convention"], "se_method": per_set[0].attrs["se_method"],
               "mean_se_method": ds.attrs["mean_se_method"],
               "run_weights": "evidence (slt_relu.posterior.masses.run_weights)", "effective_runs": eff,
               "observables": report, "reweighting_check": checked,
               "wall_s": {"sampling": t_sample, "susceptibility": t_obs, "total": time.time() - start},
               "command": "python benchmarks/pt1_susceptibility.py" + (" --check" if args.check else ""),
               "git_commit": commit, "jax": jax.__version__, "dtype": str(jnp.zeros(()).dtype)}
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(f"\nwrote {args.out}/susceptibility.png, susceptibility.nc, metrics.json ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
