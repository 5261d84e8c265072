"""The lambda_curve kind's report (``slt_relu.kinds.lambda_curve_kind``): each estimator's entry of a case's metrics,
the warnings (two samplers' readings of one estimand that disagree, runs that left the posterior, SMC's free
energy against the exact one, a dslt_phase region that holds another phase), results.nc and the headline."""
from __future__ import annotations

import numpy as np

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

MCMC_ESTIMATOR = "nuts_tempered_loss"
SGLD_ESTIMATOR = "sgld_tempered_loss"
GIBBS_ESTIMATOR = "gibbs_tempered_loss"
ESTIMAND_READINGS = ("tempered_loss", GIBBS_ESTIMATOR, MCMC_ESTIMATOR, SGLD_ESTIMATOR)   # the readings of t E_t[L]


def estimate_entry(est) -> dict:
    """An estimator's entry of a case's metrics from its asymptotic fit (a ``LambdaEstimate`` of
    ``fit_learning_coefficient``, details ``AsymptoticFit``)."""
    d = est.details
    return {"lambda": est.lambda_, "lambda_se": est.se, "lambda_se_runs": d.lambda_se_runs, "m": est.m,
            "m_candidates": list(d.m_candidates),
            "lambda_by_m": {str(k): v for k, v in d.lambda_by_m.items()},
            "lambda_se_by_m": {str(k): v for k, v in d.lambda_se_by_m.items()},
            "chi2_by_m": {str(k): v for k, v in d.chi2_by_m.items()},
            "residual_p": d.residual_p, "reason": est.m_reason, "t_range": list(est.window), "loss_min": d.loss_min,
            "run_loss_min": list(d.run_loss_min)}


def estimand_disagreement(name: str, estimators: dict) -> list[str]:
    """Warnings where two samplers' readings of the same estimand t E_t[L] (SMC's tempered_loss, Gibbs's, NUTS's,
    SGLD's: each pair that ran; their windows named where they differ) differ by more than 3 combined standard
    errors at a common m,
    or where both identify m and their m differ: then at least one sampler does not sample the tempered posterior
    (an MCMC chain at large t keeps the branch of the singular set it reached during warm-up; SMC's particles cross
    between branches while t is small)."""
    present = [e for e in ESTIMAND_READINGS if e in estimators]
    out = []
    for j, first in enumerate(present):
        for second in present[j + 1:]:
            a, b = estimators[first], estimators[second]
            label = lambda e: "SMC's tempered_loss" if e == "tempered_loss" else e
            m = str(a["m"] if a["m"] is not None else b["m"] if b["m"] is not None else 1)
            diff = b["lambda_by_m"][m] - a["lambda_by_m"][m]
            se = float(np.hypot(a["lambda_se_by_m"][m], b["lambda_se_by_m"][m]))
            ra, rb = a.get("t_range"), b.get("t_range")
            windows = "" if ra is None or rb is None or np.allclose(ra, rb, rtol=1e-9) else \
                " (over t = {:.3g} .. {:.3g} and {:.3g} .. {:.3g})".format(*rb, *ra)
            if abs(diff) > 3 * se:
                out.append(f"{name}: {label(second)} and {label(first)} differ by {diff:+.4g} at m = {m}{windows} "
                           f"({abs(diff) / se:.1f} combined standard errors): one sampler misses part of the posterior"
                           + (" or a window is not asymptotic" if windows else ""))
            if a["m"] is not None and b["m"] is not None and a["m"] != b["m"]:
                out.append(f"{name}: {label(second)} identifies m = {b['m']}, {label(first)} m = {a['m']}")
    return out


REMEDY = {"SMC": "a smaller t_max, or more smc.num_mcmc_steps", "Gibbs": "a smaller t_max",
          "NUTS": "a smaller mcmc.t_max, or more mcmc.num_warmup", "SGLD": "a smaller sgld.t_max, or a higher "
          "sgld.accept_target"}


def left_the_posterior(name: str, curve, num_params: int, sampler: str = "SMC") -> list[str]:
    """A warning where a run's t E_t[K] on a population loss (SMC's, or a Gibbs, NUTS or SGLD chain's) passes
    D = num_params, or is not a number, at one of its t: every loss of D parameters has lambda <= D / 2 (the
    regular case is the largest), so a run that reads twice that has draws that left the tempered posterior
    (moves that diverged, or conditionals that lost float64's precision, at the largest t, where the posterior is
    narrowest)."""
    t = np.asarray(curve.t, float)
    y = t * np.asarray(curve.mean_loss, float)
    bad = np.isfinite(t) & ~(y <= num_params)                          # above D, or not a number at a stage
    if not bad.any():
        return []
    r, k = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(y, nan=np.inf), -np.inf)), y.shape)
    return [f"{name}: a run of {sampler} reaches t E_t[K] = {y[r, k]:.3g} at t = {curve.t[r, k]:.3g}, above the "
            f"{num_params} that no loss of {num_params} parameters reaches (lambda <= D / 2): its draws left the "
            f"posterior there, and its reading of this case is not to be trusted ({REMEDY[sampler]})"]


def exact_free_energy_check(name: str, exact, curve, t_range, warnings: list) -> dict:
    """A case's SMC free energy against its exact one over the fitted window (``exact``: one function of t or each
    run's, ``exact_free_energy.check_free_energy``; an evidence independent of SMC's): the largest |z| of the runs' mean
    residual over the window's grid against the Student-t bound at alpha = 0.01 (Bonferroni over the grid), the
    largest |mean residual| in nats; a warning where |z| passes the bound (SMC's curve departs from the exact one)."""
    from scipy.stats import t as student

    from ..posterior.exact_free_energy import check_free_energy

    chk = check_free_energy(curve, exact, *t_range)
    bound = float(student.ppf(1 - 0.01 / (2 * len(chk.t)), len(curve.t) - 1))
    out = {"max_abs_z": float(np.max(np.abs(chk.z))), "bound": bound,
           "max_abs_residual": float(np.max(np.abs(chk.mean)))}
    if out["max_abs_z"] > bound:
        warnings.append(f"{name}: SMC's free energy departs from the exact one by "
                        f"{out['max_abs_residual']:.3g} nats (|z| {out['max_abs_z']:.1f} > {bound:.1f}) over "
                        f"t = {t_range[0]:.3g} .. {t_range[1]:.3g}")
    return out


def phase_check(c, curve, cv, warnings: list) -> dict:
    """A dslt_phase case's region report (c: the kind's resolved Case, cv: its [curve]): its settings and checks,
    with the final particles' phases (a warning where under 90 % of them are in the case's phase: the ball then
    holds another phase that takes over)."""
    from ..known_lambda.phase import final_phases

    out = {**c.phase, "prior_std": cv.prior_std}
    fractions = final_phases(c.loss, curve.particles, cv.t_max)
    out["final_phases"] = fractions
    out["final_phase_fraction"] = fractions.get(c.phase["label"], 0.0)
    if out["final_phase_fraction"] < 0.9:
        warnings.append(f"{c.settings.name}: {100 * out['final_phase_fraction']:.0f} % of the final particles are in "
                        f"the phase {c.phase['label']!r} ({fractions}): the ball holds another phase")
    if float(np.nanmin(np.nanmax(curve.t, axis=1))) < cv.t_max * (1 - 1e-9):
        warnings.append(f"{c.settings.name}: an SMC run stopped short of t_max (smc.max_stages)")
    return out


def _at_exact_m(row: dict, est: str):
    """(lambda, se) of estimator ``est`` at the row's exact m where the fit left m unidentified and reported lambda
    for another m, else (NaN, NaN)."""
    v, at = row["estimators"].get(est), str(row.get("m_exact"))
    if v is None or row["lambda_exact"] is None or v["m"] is not None or at not in v.get("lambda_se_by_m", {}):
        return np.nan, np.nan
    return (np.nan, np.nan) if v["lambda_by_m"][at] == v["lambda"] else (v["lambda_by_m"][at], v["lambda_se_by_m"][at])


def dataset(rows, curves):
    """Estimates along (case, estimator), curves along (case, run, stage) NaN-padded, and what the figure draws
    beside them (the fit at the exact m, each case's fitted window and runs' L*, a reference estimate)."""
    import xarray as xr

    from ..posterior.free_energy_curve import ESTIMATORS
    from ..posterior.learning_coefficient import stack_curves

    names = [e for e in ESTIMATORS + (GIBBS_ESTIMATOR, MCMC_ESTIMATOR, SGLD_ESTIMATOR) if any(e in row["estimators"] for row in rows)]
    value = lambda row, e, key: row["estimators"].get(e, {}).get(key)
    est = lambda key: np.array([[np.nan if value(row, e, key) is None else value(row, e, key) for e in names]
                                for row in rows], np.float64)
    at_exact = np.array([[_at_exact_m(row, e) for e in names] for row in rows], np.float64).reshape(len(rows), len(names), 2)
    t = stack_curves(curves, "t")
    run_lstar = np.full(t.shape[:2], np.nan)
    for i, row in enumerate(rows):                  # a data set's own L* for each run of the case's curve, else 0
        lstar = row["estimators"].get(row["curve"], {}).get("run_loss_min") or [0.0] * len(curves[i].t)
        run_lstar[i, :len(lstar)] = lstar
    ref = [row.get("reference") or {} for row in rows]
    return xr.Dataset(
        {"lambda": (("case", "estimator"), est("lambda")), "lambda_se": (("case", "estimator"), est("lambda_se")),
         "lambda_se_runs": (("case", "estimator"), est("lambda_se_runs"), {"long_name": "lambda's standard error over "
                                                                           "runs alone, at the reported m"}),
         "m": (("case", "estimator"), est("m"), {"long_name": "multiplicity, NaN where not identifiable"}),
         "lambda_at_exact_m": (("case", "estimator"), at_exact[..., 0], {"long_name": "the fit's lambda at the exact m "
                                                                         "where m is not identified and another was "
                                                                         "reported (NaN otherwise)"}),
         "lambda_se_at_exact_m": (("case", "estimator"), at_exact[..., 1]),
         "lambda_exact": ("case", np.array([np.nan if row["lambda_exact"] is None else row["lambda_exact"]
                                            for row in rows], np.float64), {"long_name": "exact lambda, NaN: unknown"}),
         "m_exact": ("case", np.array([row["m_exact"] or 0 for row in rows], np.int64), {"long_name": "0: unknown"}),
         "n": ("case", np.array([row["n"] or 0 for row in rows], np.int64),
               {"long_name": "samples per data set, 0: the population loss K"}),
         "window": (("case", "bound"), np.array([row["t_range"] for row in rows], np.float64),
                    {"long_name": "the fitted window of t (the first estimator's)"}),
         "reference_lambda": ("case", np.array([r.get("estimate", np.nan) for r in ref], np.float64)),
         "reference_se": ("case", np.array([r.get("se", np.nan) for r in ref], np.float64)),
         "t": (("case", "run", "stage"), t),
         "free_energy": (("case", "run", "stage"), stack_curves(curves, "free_energy"), {"long_name": "F(t) = -log Z(t)"}),
         "mean_loss": (("case", "run", "stage"), stack_curves(curves, "mean_loss"), {"long_name": "E_t[K]"}),
         "run_loss_min": (("case", "run"), run_lstar, {"long_name": "each run's L* of the case's curve (0: K)"})},
        coords={"case": [row["name"] for row in rows], "estimator": names, "bound": ["lo", "hi"],
                "family": ("case", [row.get("family", "") for row in rows]),
                "curve": ("case", [row["curve"] for row in rows], {"long_name": "the estimator whose runs t, "
                                                                   "free_energy and mean_loss hold"}),
                "reference_name": ("case", [r.get("name", "") for r in ref], {"long_name": "a reference estimate's "
                                                                              "source, '' for none"})})


def headline(metrics: dict) -> list[str]:
    """Per case: the exact lambda (m) and each estimator's lambda +- se with its m ('?' where not identifiable; then
    also lambda +- se at the exact m where that is another), the reference beside it where the case has one; then
    the warnings."""
    out = []
    for row in metrics.get("cases", []):
        parts = []
        for e, v in row["estimators"].items():
            parts.append(f"{e}: {v['lambda']:.4g} +- {v['lambda_se']:.2g} m {v['m'] if v['m'] is not None else '?'}")
            at = str(row["m_exact"])           # the same fit's number where the exact m is the chosen one
            if v["m"] is None and at in v.get("lambda_se_by_m", {}) and v["lambda_by_m"][at] != v["lambda"]:
                parts[-1] += f" (at m {at}: {v['lambda_by_m'][at]:.4g} +- {v['lambda_se_by_m'][at]:.2g})"
        exact = ("no exact value" if row["lambda_exact"] is None
                 else f"exact {row['lambda_exact']:.4g} (m {row['m_exact']})")
        ref = row.get("reference")
        if ref:
            parts.append(f"{ref['name']}: {ref['estimate']:.4g} +- {ref['se']:.2g}")
        out.append(f"{row['name']}: {exact}; " + "; ".join(parts))
    return out + [f"warning: {w}" for w in metrics.get("warnings", [])]
