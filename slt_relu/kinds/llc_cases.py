"""The learning coefficient kind's cases (``slt_relu.kinds.llc_kind``): the losses and points a case
estimates lambda at, and one case's estimates by SGLD, the NUTS beta sweep and WBIC, and the SGLD
calibration grid, as plain rows and arrays (checkpointed per case by ``slt_relu.workflow.sweep``).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..known_lambda.losses import MonomialLoss

__all__ = []   # nothing to import: a part of the kinds that import it, not an API


class Case(NamedTuple):
    """One [[cases]] entry resolved: its index, settings (a two-layer or monomial case), the methods it
    runs, its known lambda (a number, or "regular": (D - d) / 2 at each point), and for a two-layer case
    its example (``slt_relu.truths``) and model width."""

    index: int
    settings: object
    methods: tuple
    true_lambda: float | str
    example: object = None
    width: int | None = None


def targets(c: Case, n: int, key):
    """[(label, loss_fn, params_star, data, true_lambda, global params_init)] for one case."""
    import jax
    import jax.numpy as jnp

    from ..posterior.llc import restricted_two_layer_loss, two_layer_loss_for
    from ..loss import sample_dataset
    from ..network import make_params, num_params

    cs = c.settings
    if cs.model == "monomial":
        dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
        kx, ke = jax.random.split(key)
        x = jax.random.uniform(kx, (n,), dtype, -math.sqrt(3.0), math.sqrt(3.0))       # E x^2 = 1
        y = cs.theta0 * x + jax.random.normal(ke, (n,), dtype) / math.sqrt(2.0)     # sigma^2 = 1/2
        p = len(cs.exponents)
        if cs.theta0:
            star = jnp.full(p, cs.theta0 ** (1.0 / float(sum(cs.exponents))), dtype)
        else:
            star = jnp.zeros(p, dtype)
        return [(cs.name, MonomialLoss(tuple(cs.exponents)), star, (x, y), c.true_lambda, jnp.zeros(p, dtype))]
    ex = c.example
    truth = ex.truth
    x, y = sample_dataset(key, truth, ex.inputs, n, ex.sigma)
    sigma = ex.sigma
    restricted = ex.model.num_free != len(ex.model.free)
    out = []
    if cs.at == "truth":
        pad = c.width - truth.width
        star = truth if not pad else make_params(jnp.concatenate([truth.w, jnp.zeros((pad, truth.n_in))]),
                                                 jnp.concatenate([truth.b, jnp.zeros(pad)]),
                                                 jnp.concatenate([truth.q, jnp.zeros(pad)]), truth.c)
        if restricted:
            star = ex.model.base
        points = [(cs.name, star)]
    else:
        from ..phases import reduced_truth, true_set_representatives

        reps = true_set_representatives(reduced_truth(truth), c.width)
        points = [(f"{cs.name}: {rep.label}", rep.params.__class__(*(jnp.asarray(a, x.dtype) for a in rep.params)))
                  for rep in reps]
    for label, star in points:
        lam = c.true_lambda
        if lam == "regular":
            lam = (num_params(star.width, star.n_in) - star.width) / 2          # (D - d) / 2
        if restricted:
            loss, theta = restricted_two_layer_loss(star, ex.model.free, sigma)
            theta = jnp.asarray(theta, x.dtype)
            out.append((label, loss, theta, (x, y), lam, jnp.zeros_like(theta)))
        else:
            out.append((label, two_layer_loss_for(float(sigma)), star, (x, y), lam, star))
    return out


def case_result(c: Case, n: int, refine: bool, key) -> dict:
    """One case: its rows, its arrays and its SGLD estimates' traces (the kind's metrics rows, from the typed
    results of ``slt_relu.posterior.llc`` and ``slt_relu.posterior.beta_sweep``)."""
    import jax

    from ..posterior.beta_sweep import beta_sweep_curve, beta_sweep_lambda, wbic
    from ..posterior.llc import estimate_llc, minimize_loss, normal_crossing_expectation

    cs = c.settings
    rows, arrays, draws = [], {}, []
    k_data, k_sgld, k_nuts = jax.random.split(jax.random.fold_in(key, c.index), 3)
    g, b = cs.sgld.build(), cs.beta_sweep
    nuts = b.build()
    for label, loss, star, data, lam, init in targets(c, n, k_data):
        refined = None
        if refine and cs.model == "two_layer":
            before = float(loss(star, data))
            star, after = minimize_loss(loss, star, data)
            refined = {"loss_at_point": before, "loss_at_minimum": after}
        if "sgld" in c.methods:
            est = estimate_llc(k_sgld, loss, star, data, g)
            d = est.details
            exact = None
            if cs.model == "monomial" and not cs.theta0 and len(cs.exponents) <= 3:
                exact = normal_crossing_expectation(cs.exponents, d.n_beta, g.localization)
            rows.append({"name": label, "true_lambda": lam, "estimate": est.lambda_, "se": est.se, "method": "sgld",
                         "exact_finite_n": exact, "refined": refined, "per_chain": d.per_chain,
                         "accept_prob": float(np.mean(d.accept_prob)), "rhat": d.rhat,
                         "rhat_nested": _rhat_nested(d.loss_trace), "n_beta": d.n_beta,
                         "step_size": g.step_size, "localization": g.localization, "num_steps": g.num_steps,
                         "warnings": list(est.warnings)})
            arrays[f"{label} sgld trace"] = d.n_beta * (d.loss_trace.mean(0) - d.init_loss)
            draws.append({"label": label, "estimate": est.lambda_, "se": est.se, "warnings": list(est.warnings),
                          **d._asdict()})
        if "beta_sweep" in c.methods:
            betas = np.asarray(b.factors) / math.log(n)
            curve = beta_sweep_curve(k_nuts, loss, star if b.localization else init, data, betas=betas,
                                     chains=b.chains_per_beta, prior_std=b.prior_std, localization=b.localization,
                                     settings=nuts)
            rows.append(beta_sweep_row(label, lam, b.localization, n, betas, curve, beta_sweep_lambda(curve)))
        if "wbic" in c.methods:
            w = wbic(k_nuts, loss, init, data, chains=b.chains_per_beta, prior_std=b.prior_std, settings=nuts)
            rows.append({"name": label, "true_lambda": lam, "estimate": None, "se": None, "method": "wbic",
                         "wbic": w.value, "wbic_se": w.se})
    return {"rows": rows, "arrays": arrays, "draws": draws}


def beta_sweep_row(label: str, lam, localization: float, n: int, betas, curve, est) -> dict:
    """A beta sweep's metrics row from its curve and slope reading, in E_beta[n L_n] = n E_t[L_n] against 1 / beta
    (``expected_nl``, ``expected_nl_se``, ``intercept`` n L*), with each beta's R-hat and nested R-hat of L_n over
    the chains and their warnings."""
    d = est.details
    chains_at = [curve.draw_loss[:, k] for k in range(len(betas))]              # (chains, S) at each beta
    rhats = [_rhat(chains) for chains in chains_at]
    nested = [_rhat_nested(chains) for chains in chains_at]
    bad = [f"{beta:.3g}" for beta, r in zip(betas, rhats) if r is not None and r > 1.05]
    undefined = [f"{beta:.3g}" for beta, r in zip(betas, rhats) if r is not None and np.isnan(r)]
    warns = [f"R-hat of L_n above 1.05 at beta {', '.join(bad)} (NUTS chains disagree: E_beta[n L_n] is "
             "doubtful)"] if bad else []
    if undefined:                           # NaN > 1.05 is False: said apart
        warns.append(f"R-hat of L_n is NaN at beta {', '.join(undefined)}: undefined (non-finite or constant L_n)")
    return {"name": label, "true_lambda": lam, "estimate": est.lambda_, "se": est.se, "method": "beta_sweep",
            "localization": localization, "betas": betas, "expected_nl": n * d.mean_loss,
            "expected_nl_se": n * d.mean_loss_se, "intercept": n * d.loss_min, "rhat": rhats, "rhat_nested": nested,
            "warnings": warns}


def _rhat(trace) -> float | None:
    """Rank-normalised split R-hat of L_n traces (chains, draws), None with fewer than 2 chains."""
    from ..diagnostics import rhat

    trace = np.asarray(trace)
    return rhat(trace) if trace.shape[0] >= 2 and trace.shape[1] >= 4 else None


def _rhat_nested(trace) -> float | None:
    """Nested R-hat of SGLD's L_n traces (slt_relu.diagnostics.rhat_nested), each chain its own superchain:
    the chains all start at w*, so any grouping is faithful; with one chain per superchain it compares
    the chains' means with their halves' spread."""
    from ..diagnostics import rhat_nested

    trace = np.asarray(trace)
    if trace.shape[0] < 2 or trace.shape[1] < 8:
        return None
    return rhat_nested(trace, np.arange(trace.shape[0]))


def calibration_result(c: Case, llc, key) -> dict:
    """estimate_llc over the calibration grid of ``llc.calibration`` (the kind's [llc] table) at the case's
    first point (refined as the case's)."""
    import jax

    from ..posterior.llc import minimize_loss
    from ..posterior.llc_tuning import calibrate_llc

    cal, cs = llc.calibration, c.settings
    k_data = jax.random.split(jax.random.fold_in(key, c.index), 3)[0]
    label, loss, star, data, lam, _ = targets(c, llc.n, k_data)[0]
    if llc.refine and cs.model == "two_layer":
        star, _ = minimize_loss(loss, star, data)
    # every step kept (thin = 1): the traces show burn-in and drift at full resolution
    g = cs.sgld.build().replace(num_steps=cal.num_steps or cs.sgld.num_steps, thin=1,
                        num_burnin=cs.sgld.num_burnin if cal.num_burnin is None else cal.num_burnin)
    grid = calibrate_llc(jax.random.fold_in(key, 10_000), loss, star, data, cal.step_sizes, cal.localizations, g)
    return {"label": label, "true_lambda": lam, **grid._asdict()}


def dataset(rows: list, traces: dict, grid=None, case: str = "", true_lambda=None):
    """results.nc: every estimate (``estimate``, ``se``, ``true_lambda``, ``relative_error`` along ``row``,
    with its case's ``name`` and ``method``) with what the figures draw beside it (``row_localization``,
    ``exact_finite_n``; a beta sweep's ``beta``, ``expected_nl``, ``expected_nl_se`` along (row, beta_index) and
    ``intercept``), the SGLD traces n beta (mean L_n(t) - L_n(w*)) along ``step`` (NaN after a shorter trace's
    end) and the calibration grid over (``step_size``, ``localization``) of the point ``case`` (its
    ``calibration_case``, ``calibration_true_lambda``)."""
    import xarray as xr

    num = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
    ds = xr.Dataset({f: ("row", [num(row.get(f)) for row in rows])
                     for f in ("estimate", "se", "true_lambda", "relative_error")},
                    coords={"name": ("row", [row["name"] for row in rows]),
                            "method": ("row", [row["method"] for row in rows])})
    ds["row_localization"] = ("row", [num(row.get("localization")) for row in rows],
                              {"long_name": "gamma of the estimate's localization (SGLD, beta sweep), NaN: none"})
    ds["exact_finite_n"] = ("row", [num(row.get("exact_finite_n")) for row in rows],
                            {"long_name": "the exact finite-n value E[n beta K] of the localized posterior, NaN: "
                                          "not known"})
    B = max([len(row["betas"]) for row in rows if "betas" in row] + [0])
    if B:
        pad = lambda row, key: np.concatenate([np.asarray(row.get(key, ()), np.float64),
                                               np.full(B - len(row.get(key, ())), np.nan)])
        for key, name, words in (("betas", "beta", "the beta sweep's inverse temperatures, NaN: padding or no "
                                  "sweep"), ("expected_nl", "expected_nl", "E_beta[n L_n]"),
                                 ("expected_nl_se", "expected_nl_se", "E_beta[n L_n]'s standard error")):
            ds[name] = (("row", "beta_index"), np.stack([pad(row, key) for row in rows]), {"long_name": words})
        ds["intercept"] = ("row", [num(row.get("intercept")) for row in rows],
                           {"long_name": "the beta sweep's intercept n L*, NaN: no sweep"})
    if traces:
        T = max(len(t) for t in traces.values())
        padded = [np.concatenate([np.asarray(t, np.float64), np.full(T - len(t), np.nan)]) for t in traces.values()]
        ds["sgld_trace"] = xr.DataArray(np.stack(padded), dims=("trace", "step"),
                                        coords={"trace": [k.removesuffix(" sgld trace") for k in traces]})
    if grid is not None:
        cal = {"step_size": np.asarray(grid.step_sizes), "localization": np.asarray(grid.localizations)}
        for name, v in (("estimate", grid.estimate), ("se", grid.se), ("accept_prob", grid.accept),
                        ("rhat", grid.rhat)):
            ds[f"calibration_{name}"] = xr.DataArray(np.asarray(v), dims=tuple(cal), coords=cal)
        ds["calibration_mean_trace"] = xr.DataArray(np.asarray(grid.mean_trace),
                                                    dims=("step_size", "localization", "calibration_step"))
        ds["calibration_case"] = ((), case, {"long_name": "the calibrated point"})
        ds["calibration_true_lambda"] = ((), num(true_lambda), {"long_name": "its known lambda, NaN: unknown"})
        ds.attrs["calibration_n_beta"] = float(grid.n_beta)
    return ds
