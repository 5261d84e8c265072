"""Checks of a measured TMS Bayesian transition (a Dataset of ``slt_relu.tms.transition.bayesian_transition``; the
``tms_transition`` kind runs them): does the crossover depend on the SMC settings, on the labelling rule, and how
far are the phases' free energies from their asymptotic form?

- :func:`settings_check`: at the n nearest the crossover, the first data sets again with more particles and
  more HMC moves per stage (independent runs); per data set z = (m_main - m_check) / sqrt(mcse_main^2 +
  mcse_check^2) for the two phases and "none" (|z| of a few: the settings have converged);
- :func:`labelling_sensitivity`: the same particles relabelled (``slt_relu.tms.transition.relabel``) with the
  angle tolerance doubled and halved and with dead columns counted by their length: the crossover under each;
- :func:`free_energy_fits`: the local free energy of a phase (docs/design.md), F_alpha = -log Z - log
  mass_alpha, against Watanabe's asymptotic form at the phase's point w_alpha (the refined k-gon):

      G_alpha(n) = F_alpha(n) - n beta L_n(w_alpha) = lambda_alpha log(n beta) + C_alpha + o(1),

  fitted per data set over the n where the phase's mean mass is at least ``min_mass``: the slope lambda_eff
  (pre-asymptotic where it differs from the first-principles lambda), the constant C_alpha = mean of
  G_alpha - lambda_alpha log(n beta), and the formula's crossover with these constants,
  n beta L_a + lambda_a log(n beta) + C_a = n beta L_b + lambda_b log(n beta) + C_b;
  :func:`free_energy_dataset`: the fitted phases' G_alpha, lambda and C as a Dataset (what the kind's figure draws).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023 (arXiv 2310.06301); Watanabe 2009 (the free energy's asymptotics).
"""
from __future__ import annotations

import math
import time

import numpy as np

__all__ = ["free_energy_dataset", "free_energy_fits", "labelling_sensitivity", "local_free_energies", "nested_inputs",
           "settings_check", "standard_error"]


def nested_inputs(k_data, c: int, n_max: int, datasets: int) -> np.ndarray:
    """(K, n_max, c) the nested data sets of ``bayesian_transition`` (data set k: key k of ``split(k_data, K)``)."""
    import jax
    import jax.numpy as jnp

    from ..models.tms import sample_inputs

    dtype = jnp.zeros(()).dtype
    return np.stack([np.asarray(sample_inputs(k, n_max, c, dtype)) for k in jax.random.split(k_data, datasets)])


def standard_error(v) -> float:
    """The standard error of the mean of the numbers v (std with ddof 1 over sqrt(len)); NaN for fewer than two."""
    v = np.asarray(v, float)
    return float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")


def labelling_sensitivity(ds, comparison: str, rule: dict) -> dict:
    """{rule name: n_crossover, n_crossover_se of ``comparison``, the "none" mass at the n nearest it, that n}
    under three other labelling rules (module docstring) of the Dataset's kept particles."""
    from .transition import relabel

    rules = {f"angle_tol {2 * rule['angle_tol']:g}": {**rule, "angle_tol": 2 * rule["angle_tol"]},
             f"angle_tol {rule['angle_tol'] / 2:g}": {**rule, "angle_tol": rule["angle_tol"] / 2},
             ("dead columns by length (phases.label alone)" if rule["dead_unused"] else "dead columns unused"):
                 {**rule, "dead_unused": not rule["dead_unused"]}}
    out = {}
    for name, alt in rules.items():
        other = relabel(ds, **alt)
        q = other.sel(comparison=comparison)
        n_star = float(q.n_crossover)
        ref = n_star if math.isfinite(n_star) else float(np.exp(np.mean(np.log(other.n.values))))
        near = int(other.n.values[np.argmin(np.abs(np.log(other.n.values) - math.log(ref)))])
        out[name] = {"n_crossover": n_star, "n_crossover_se": float(q.n_crossover_se),
                     "none_mass": float(other.phase_mass_mean.sel(n=near, phase="none")), "at_n": near}
    return out


def _losses_at(w, data) -> np.ndarray:
    """(K,) L_n of flat parameters w (3 c,) on each of K data sets of one n (their SortedInputs), as one program."""
    import jax
    import jax.numpy as jnp

    from .sorted_loss import sorted_empirical_losses

    stacked = jax.tree.map(lambda *a: jnp.stack(a), *data)
    return np.asarray(sorted_empirical_losses(jnp.broadcast_to(w, (len(data), 1) + np.shape(w)), stacked),
                      np.float64)[:, 0]


def local_free_energies(ds, xs, a: str, b: str, *, min_mass: float = 0.02) -> dict:
    """Per phase (a's formula variant and each variant of b, ``slt_relu.tms.crossover.formula_predictions``) that
    holds a mean mass >= ``min_mass`` at two n or more: ``n`` (B,) those n and ``G`` (B, K) the local free energy
    less the loss at the phase's point, G_alpha = F_alpha - n beta L_n(w_alpha), per data set (module docstring);
    with ``lambda`` (first principles, None without one) and ``loss`` (exact population loss, None without one).

    Args:
        ds: a Dataset of ``bayesian_transition`` (``free_energy`` (n, dataset, variant), ``mass_mean``).
        xs: (K, n_max, c) its nested data sets (:func:`nested_inputs`).
        a, b: the compared k-gon groups.
    """
    from .crossover import formula_predictions, k_of
    from .kgon import refined_kgon
    from ..models.tms import to_flat
    from .sorted_loss import sorted_inputs

    c, beta = int(ds.attrs["c"]), float(ds.attrs["beta"])
    K = ds.sizes["dataset"]
    try:
        pred = formula_predictions(c, k_of(a), k_of(b), beta)
    except ValueError:
        pred = None
    lambdas, losses = {}, {}
    if pred:
        lambdas = {pred["a"]: pred["lambda_a"], **{v: d["lambda"] for v, d in pred["variants"].items()}}
        losses = {pred["a"]: pred["loss_a"], **{v: d["loss"] for v, d in pred["variants"].items()}}
    names = ([pred["a"]] if pred else []) + [v for v in ds.variant.values if str(v).startswith(b + " ")
                                             or str(v) == b]
    out = {}
    for nm in map(str, names):
        use = np.flatnonzero(ds.mass_mean.sel(variant=nm).values >= min_mass)
        if len(use) < 2:
            continue
        w = to_flat(refined_kgon(c, k_of(nm), nm.count("+")))
        ns = ds.n.values[use]
        Ln = np.array([_losses_at(w, [sorted_inputs(xs[kk, :int(n)]) for kk in range(K)]) for n in ns])  # (B, K)
        F = ds["free_energy"].sel(variant=nm).isel(n=use).transpose("n", "dataset").values
        out[nm] = {"n": ns, "G": F - (ns * beta)[:, None] * Ln, "lambda": lambdas.get(nm), "loss": losses.get(nm)}
    out["_prediction"] = pred
    return out


def free_energy_fits(ds, xs, a: str, b: str, *, min_mass: float = 0.02, curves: dict | None = None) -> dict:
    """Per phase of :func:`local_free_energies` (``curves``, computed here if not given): ``n``, ``lambda_eff`` +-
    ``lambda_eff_se`` (mean and se over data sets of the slope of G against log(n beta)), ``C_fit`` (the
    intercept), ``lambda`` (first principles, None without one) and ``C`` +- ``C_se`` (the mean of
    G - lambda log(n beta)); and ``n_formula_with_constants`` (a against the variant of b that dominates at the
    formula's n), module docstring.

    Args:
        ds: a Dataset of ``bayesian_transition`` (``free_energy`` (n, dataset, variant), ``mass_mean``).
        xs: (K, n_max, c) its nested data sets (:func:`nested_inputs`).
        a, b: the compared k-gon groups.
        curves: :func:`local_free_energies` of the same arguments.
    """
    from scipy.optimize import brentq

    from ..posterior.learning_coefficient import weighted_least_squares

    beta = float(ds.attrs["beta"])
    curves = local_free_energies(ds, xs, a, b, min_mass=min_mass) if curves is None else curves
    pred = curves["_prediction"]
    fits = {}
    for nm, cv in curves.items():
        if nm == "_prediction":
            continue
        nb, G = cv["n"] * beta, cv["G"]
        ok = np.all(np.isfinite(G), axis=0)
        if not ok.any():
            continue
        X = np.stack([np.log(nb), np.ones_like(nb)], 1)
        coef = weighted_least_squares(X, G[:, ok]).coef                                # (2, K')
        lam = cv["lambda"]
        Cs = np.mean(G[:, ok] - lam * np.log(nb)[:, None], axis=0) if lam is not None else None
        fits[nm] = {"n": [int(v) for v in cv["n"]], "lambda_eff": float(coef[0].mean()),
                    "lambda_eff_se": standard_error(coef[0]), "C_fit": float(coef[1].mean()), "lambda": lam,
                    "C": None if Cs is None else float(Cs.mean()),
                    "C_se": None if Cs is None else standard_error(Cs),
                    "datasets": int(ok.sum())}
    dom = pred and pred["dominant"]
    if dom and fits.get(pred["a"], {}).get("C") is not None and fits.get(dom, {}).get("C") is not None:
        fa, fb = fits[pred["a"]], fits[dom]
        La, Lb = curves[pred["a"]]["loss"], curves[dom]["loss"]
        gap = lambda u: (math.exp(u) * Lb + fb["lambda"] * u + fb["C"]) - (math.exp(u) * La + fa["lambda"] * u
                                                                            + fa["C"])
        try:
            n_const = math.exp(brentq(gap, math.log(2.0), math.log(1e7))) / beta
        except ValueError:                                   # no sign change: no crossing in [2, 1e7]
            n_const = float("nan")
        fits["n_formula_with_constants"] = {"a": pred["a"], "b": dom, "n": n_const, "C_a_minus_C_b": fa["C"] - fb["C"]}
    return fits


def free_energy_dataset(ds, curves: dict, fits: dict):
    """The local free energies of the phases :func:`free_energy_fits` fitted, as a Dataset to merge with ``ds``.

    Args:
        ds: the Dataset of ``bayesian_transition`` the curves were read from.
        curves: :func:`local_free_energies` of it.
        fits: :func:`free_energy_fits` of the curves.

    Returns:
        A Dataset along ``fit_phase`` (the fitted phases, in the fits' order) and ``ds``'s ``n`` and ``dataset``,
        ``free_energy_less_loss`` (fit_phase, n, dataset) G_alpha per data set (NaN at the n the phase was not
        fitted at), ``free_energy_fitted`` (fit_phase, n) bool: the n of its fit, ``fit_lambda`` and ``fit_C``
        (fit_phase): the first-principles lambda and the fitted constant C (NaN: none).
    """
    import xarray as xr

    names = [nm for nm in fits if nm in curves and nm != "_prediction"]
    ns = [int(n) for n in ds.n.values]
    G = np.full((len(names), len(ns), ds.sizes["dataset"]), np.nan)
    used = np.zeros((len(names), len(ns)), bool)
    for i, nm in enumerate(names):
        at = [ns.index(int(n)) for n in curves[nm]["n"]]
        G[i, at], used[i, at] = curves[nm]["G"], True
    num = lambda v: np.nan if v is None else float(v)
    return xr.Dataset(
        {"free_energy_less_loss": (("fit_phase", "n", "dataset"), G, {"long_name": "G_alpha = F_alpha - n beta "
                                   "L_n(w_alpha) per data set where the phase was fitted (NaN elsewhere)"}),
         "free_energy_fitted": (("fit_phase", "n"), used, {"long_name": "the n of the phase's fit (mean mass at "
                                                                        "least min_mass)"}),
         "fit_lambda": ("fit_phase", np.array([num(fits[nm]["lambda"]) for nm in names], np.float64),
                        {"long_name": "first-principles lambda, NaN: none"}),
         "fit_C": ("fit_phase", np.array([num(fits[nm]["C"]) for nm in names], np.float64),
                   {"long_name": "C of lambda log(n beta) + C fitted to G_alpha, NaN: no lambda"})},
        coords={"fit_phase": names})


def _per_dataset_mcse(ds, name: str) -> np.ndarray:
    """(K,) the Monte Carlo error of each data set's pooled mass of phase ``name`` (the jackknife over its runs,
    ``slt_relu.posterior.masses.runs_mcse``)."""
    from ..posterior.masses import runs_mcse

    x = ds["run_phase_mass"].sel(phase=name).transpose("dataset", "run").values        # (K, R)
    w = ds["weight"].transpose("dataset", "run").values
    K, R = x.shape
    return np.array([runs_mcse(x[k][:, None], np.zeros(R, int), w[k])[0] for k in range(K)])


def settings_check(key, ds, xs, comparison: str, settings, datasets: int, rule: dict):
    """The check at the n of the Dataset nearest (in log n) the crossover of ``comparison`` (without one: the
    formula's n, else the geometric mean of the grid), module docstring: its first ``datasets`` data sets again
    with ``settings`` (more particles and moves), independent runs.

    Returns:
        (a dict for metrics.json, a Dataset with dims ``check_phase``, ``check_dataset``).
    """
    import xarray as xr

    from .transition import posterior_phase_masses

    q = ds.sel(comparison=comparison)
    ns = ds.n.values
    n_star = next((float(v) for v in (q.n_crossover, q.n_formula) if math.isfinite(float(v))),
                  float(np.exp(np.mean(np.log(ns)))))
    start = time.time()
    n_chk = int(ns[np.argmin(np.abs(np.log(ns) - math.log(n_star)))])
    a, b = comparison.split(" vs ")
    ref = posterior_phase_masses(key, int(ds.attrs["c"]), n_chk, datasets=datasets, runs=ds.sizes["run"],
                                 settings=settings, prior_std=float(ds.attrs["prior_std"]),
                                 beta=float(ds.attrs["beta"]), inputs=xs[:datasets], pad_to=int(ns[-1]), **rule)
    main = ds.sel(n=n_chk).isel(dataset=slice(0, datasets))
    out = {"n": n_chk, "datasets": datasets, "particles": settings.num_particles, "moves": settings.num_mcmc_steps,
           "phases": {}}
    worst = 0.0
    check_vars = {}
    for nm in (a, b, "none"):
        m1, m2 = main.phase_mass.sel(phase=nm).values, ref.phase_mass.sel(phase=nm).values
        e1, e2 = _per_dataset_mcse(main, nm), _per_dataset_mcse(ref, nm)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (m1 - m2) / np.sqrt(e1 ** 2 + e2 ** 2)
        z = np.where((m1 == m2), 0.0, z)                     # both without particles of the phase: no difference
        worst = max(worst, float(np.nanmax(np.abs(z))))
        out["phases"][nm] = {"main": m1.tolist(), "check": m2.tolist(), "main_mcse": e1.tolist(),
                             "check_mcse": e2.tolist(), "z": z.tolist()}
        check_vars[nm] = (m1, m2, e1, e2, z)
    out["log_evidence"] = {"main": main.log_z.values.tolist(), "check": ref.log_z.values.tolist()}
    out["max_abs_z"] = worst
    out["wall_s"] = time.time() - start
    dims = ("check_phase", "check_dataset")
    stack = lambda i: np.stack([check_vars[nm][i] for nm in (a, b, "none")])
    check_ds = xr.Dataset({"check_main_mass": (dims, stack(0)), "check_mass": (dims, stack(1)),
                           "check_main_mass_mcse": (dims, stack(2)), "check_mass_mcse": (dims, stack(3)),
                           "check_z": (dims, stack(4)),
                           "check_log_z": ("check_dataset", ref.log_z.values)},
                          coords={"check_phase": [a, b, "none"], "check_dataset": np.arange(datasets)},
                          attrs={})
    check_ds["check_z"].attrs.update(n=n_chk, particles=settings.num_particles, moves=settings.num_mcmc_steps)
    return out, check_ds
