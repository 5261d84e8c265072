"""Experiment kind ``learning_coefficient``: lambda by SGLD (local), the NUTS beta sweep (global)
and WBIC, on cases with known values or at the phases of W0 (slt_relu.llc).

[llc]            n (data set size, default 10000); methods (["sgld", "beta_sweep"]; also "wbic");
                 refine (true): localise SGLD (and a localized beta sweep) at the local minimum
                 of L_n next to the two-layer point (llc.minimize_loss), not at the point itself
                 (which misses it by O(1/sqrt n) and so lowers lambda_hat by
                 n beta (L_n(w*) - L_n(w_hat)), 0.3-0.75 in the shipped configs)
[llc.sgld]       num_chains (8), num_steps (20000), num_burnin (5000), thin (1), step_size (1e-5),
                 localization (1.0), nbeta (default n / log n), batch_size (0: full batch)
[llc.beta_sweep] factors (of 1/log n: [0.667, 1, 1.5, 2, 3]), chains_per_beta (4), num_warmup (500),
                 num_samples (1000), target_accept (0.8), prior_std (1.0), localization (0: the
                 global posterior under the N(0, prior_std^2) prior; gamma > 0: the localized
                 posterior around the case's point, as SGLD's, so the slope is the local lambda)
[llc.calibration] optional: case (a case name), step_sizes, localizations, num_steps, num_burnin:
                 estimate_llc on that grid (calibration.png)
[[cases]]        name; model = "two_layer" | "monomial".
    two_layer:   truth (a registered example), truth_options (table), width (default the
                 example's model), at = "truth" (the truth, padded with zero nodes to the width)
                 or "phases" (one representative of every phase of W0: true_set_representatives
                 of the truth's irreducible form), true_lambda (a number or "regular": (D - d)/2)
    monomial:    exponents k (list), theta0 (0): f(x, w) = (prod_i w_i^k_i) x against theta0 x,
                 x ~ U[-sqrt3, sqrt3], sigma^2 = 1/2, so K = (prod w^k - theta0)^2 exactly: at
                 w* = 0 (theta0 = 0) a normal crossing with lambda = 1 / (2 max k); theta0 != 0:
                 w* on the smooth zero set, lambda = 1/2.  For theta0 = 0 the row also holds the
                 exact finite-n value E[n beta K] of the localized posterior (llc.normal_crossing_expectation)
    sgld, beta_sweep: per-case tables overriding [llc.sgld], [llc.beta_sweep]; methods: overrides
                 [llc] methods for this case

Outputs: metrics.json ("cases": a list of {name, true_lambda, estimate, se, method, ...}),
llc.png (estimates against the known values), beta_sweep.png, calibration.png, arrays.npz.
"""
from __future__ import annotations

import math

import numpy as np

from ..config import ConfigError, Table

METHODS = ("sgld", "beta_sweep", "wbic")
SGLD_DEFAULTS = {"num_chains": 8, "num_steps": 20000, "num_burnin": 5000, "thin": 1, "step_size": 1e-5,
                 "localization": 1.0, "nbeta": 0.0, "batch_size": 0}
SWEEP_DEFAULTS = {"factors": [2 / 3, 1.0, 1.5, 2.0, 3.0], "chains_per_beta": 4, "num_warmup": 500,
                  "num_samples": 1000, "target_accept": 0.8, "prior_std": 1.0, "localization": 0.0}


def _read_sgld(t: Table, base: dict) -> dict:
    s = dict(base)
    for k in ("num_chains", "num_steps", "num_burnin", "thin", "batch_size"):
        s[k] = t.get(k, "int", base[k], low=0 if k in ("num_burnin", "batch_size") else 1)
    for k in ("step_size", "localization", "nbeta"):
        s[k] = t.get(k, "float", base[k], low=0.0)
    if s["step_size"] <= 0:
        t.fail("step_size", "a positive number", s["step_size"])
    if s["num_burnin"] >= s["num_steps"]:
        t.fail("num_burnin", f"an integer below num_steps = {s['num_steps']}", s["num_burnin"])
    t.done()
    return s


def _read_sweep(t: Table, base: dict) -> dict:
    s = dict(base)
    s["factors"] = t.get("factors", "list[float]", base["factors"], low=1e-6)
    if len(s["factors"]) < 2:
        t.fail("factors", "at least two factors of 1/log n", s["factors"])
    for k in ("chains_per_beta", "num_warmup", "num_samples"):
        s[k] = t.get(k, "int", base[k], low=0 if k == "num_warmup" else 1)
    s["target_accept"] = t.get("target_accept", "float", base["target_accept"], low=0.01, high=0.999)
    s["prior_std"] = t.get("prior_std", "float", base["prior_std"], low=1e-9)
    s["localization"] = t.get("localization", "float", base["localization"], low=0.0)
    t.done()
    return s


def _read_methods(t: Table, default: list[str]) -> list[str]:
    methods = t.get("methods", "list[str]", default)
    if not methods or not set(methods) <= set(METHODS):
        t.fail("methods", f"a non-empty list of {', '.join(METHODS)}", methods)
    return methods


def _read_case(t: Table, sgld: dict, sweep: dict, methods: list[str]) -> dict:
    from .. import truths

    c = {"name": t.get("name", "str"), "methods": _read_methods(t, methods)}
    c["model"] = t.get("model", "str", choices=["two_layer", "monomial"])
    if c["model"] == "two_layer":
        name = t.get("truth", "str", choices=truths.names())
        options = t.table("truth_options").rest()
        try:
            c["example"] = truths.get(name, **options)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{t.key('truth_options')}: {err}") from None
        c["width"] = t.get("width", "int", c["example"].model.base.width, low=1, high=16)
        c["at"] = t.get("at", "str", "truth", choices=["truth", "phases"])
        if c["at"] == "truth" and c["width"] < c["example"].truth.width:
            t.fail("width", f"at least the truth's {c['example'].truth.width} nodes", c["width"])
        if c["example"].model.num_free != len(c["example"].model.free) and c["width"] != c["example"].model.base.width:
            t.fail("width", "the example's (restricted) model width", c["width"])
        lam = t.data.get("true_lambda")
        t.used.add("true_lambda")
        if lam is not None and lam != "regular" and not (isinstance(lam, (int, float)) and lam > 0):
            t.fail("true_lambda", "a positive number or \"regular\"", lam)
        c["true_lambda"] = lam
    else:
        c["exponents"] = t.get("exponents", "list[int]", low=1, high=10)
        c["theta0"] = t.get("theta0", "float", 0.0)
        if c["theta0"] < 0:
            t.fail("theta0", "a number >= 0", c["theta0"])
        c["true_lambda"] = 0.5 if c["theta0"] else 1.0 / (2 * max(c["exponents"]))
    c["sgld"] = _read_sgld(t.table("sgld"), sgld)
    c["beta_sweep"] = _read_sweep(t.table("beta_sweep"), sweep)
    t.done()
    return c


def validate(root: Table) -> dict:
    t = root.table("llc", required=True)
    s = {"n": t.get("n", "int", 10000, low=10, high=10_000_000)}
    s["methods"] = _read_methods(t, ["sgld", "beta_sweep"])
    s["refine"] = t.get("refine", "bool", True)
    sgld = _read_sgld(t.table("sgld"), SGLD_DEFAULTS)
    sweep = _read_sweep(t.table("beta_sweep"), SWEEP_DEFAULTS)
    cal = t.table("calibration")
    s["calibration"] = None
    if cal.data:
        s["calibration"] = {"case": cal.get("case", "str"), "step_sizes": cal.get("step_sizes", "list[float]", low=1e-12),
                            "localizations": cal.get("localizations", "list[float]", low=0.0),
                            "num_steps": cal.get("num_steps", "int", sgld["num_steps"], low=2),
                            "num_burnin": cal.get("num_burnin", "int", sgld["num_burnin"], low=0)}
        cal.done()
    t.done()
    cases = root.tables("cases")
    if not cases:
        raise ConfigError("cases: missing; expected at least one [[cases]] table")
    s["cases"] = [_read_case(c, sgld, sweep, s["methods"]) for c in cases]
    names = [c["name"] for c in s["cases"]]
    if len(set(names)) != len(names):
        raise ConfigError(f"cases: expected distinct names, got {names}")
    if s["calibration"] and s["calibration"]["case"] not in names:
        raise ConfigError(f"llc.calibration.case: expected one of {names}, got {s['calibration']['case']!r}")
    return s


def describe(s: dict) -> dict:
    out = {"n": s["n"], "methods": s["methods"], "calibration": s["calibration"], "cases": []}
    for c in s["cases"]:
        row = {k: c[k] for k in ("name", "model", "methods", "true_lambda", "sgld", "beta_sweep") if k in c}
        if c["model"] == "two_layer":
            row.update(truth=c["example"].description, width=c["width"], at=c["at"])
        else:
            row.update(exponents=c["exponents"], theta0=c["theta0"])
        out["cases"].append(row)
    return out


# ----------------------------------------------------------------------------------------


def _targets(c: dict, n: int, key):
    """[(label, loss_fn, params_star, data, true_lambda, global params_init)] for one case."""
    import jax
    import jax.numpy as jnp

    from ..llc import restricted_two_layer_loss, two_layer_loss_for
    from ..loss import sample_dataset
    from ..network import make_params, num_params

    if c["model"] == "monomial":
        k = jnp.asarray(c["exponents"], jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32)
        kx, ke = jax.random.split(key)
        x = jax.random.uniform(kx, (n,), k.dtype, -math.sqrt(3.0), math.sqrt(3.0))       # E x^2 = 1
        y = c["theta0"] * x + jax.random.normal(ke, (n,), k.dtype) / math.sqrt(2.0)     # sigma^2 = 1/2
        p = len(c["exponents"])
        if c["theta0"]:
            star = jnp.full(p, c["theta0"] ** (1.0 / float(sum(c["exponents"]))), k.dtype)
        else:
            star = jnp.zeros(p, k.dtype)
        loss = lambda w, d, k=k: jnp.mean((d[1] - jnp.prod(w ** k) * d[0]) ** 2) + 0.5 * jnp.log(jnp.pi)
        return [(c["name"], loss, star, (x, y), c["true_lambda"], jnp.zeros(p, k.dtype))]
    ex = c["example"]
    truth = ex.truth
    x, y = sample_dataset(key, truth, ex.inputs, n, ex.sigma)
    sigma = ex.sigma
    restricted = ex.model.num_free != len(ex.model.free)
    out = []
    if c["at"] == "truth":
        d = c["width"]
        pad = d - truth.width
        star = truth if not pad else make_params(jnp.concatenate([truth.w, jnp.zeros((pad, truth.n_in))]),
                                                 jnp.concatenate([truth.b, jnp.zeros(pad)]),
                                                 jnp.concatenate([truth.q, jnp.zeros(pad)]), truth.c)
        if restricted:
            star = ex.model.base
        points = [(c["name"], star)]
    else:
        from ..phases import true_set_representatives
        from .posterior_kind import _reduced_truth

        reps = true_set_representatives(_reduced_truth(truth), c["width"])
        points = [(f"{c['name']}: {rep.label}", rep.params.__class__(*(jnp.asarray(a, x.dtype) for a in rep.params)))
                  for rep in reps]
    for label, star in points:
        lam = c["true_lambda"]
        if lam == "regular":
            lam = (num_params(star.width, star.n_in) - star.width) / 2          # (D - d) / 2
        if restricted:
            loss, theta = restricted_two_layer_loss(star, ex.model.free, sigma)
            theta = jnp.asarray(theta, x.dtype)
            out.append((label, loss, theta, (x, y), lam, jnp.zeros_like(theta)))
        else:
            out.append((label, two_layer_loss_for(float(sigma)), star, (x, y), lam, star))
    return out


def run(s: dict, outdir, key, progress: bool = True) -> dict:
    import jax
    from tqdm.auto import tqdm

    from ..llc import (calibrate_llc, estimate_llc, minimize_loss, normal_crossing_expectation, rlct_from_beta_sweep,
                       wbic)
    from ..nuts import SamplerSettings
    from ..plots import beta_sweep_figure, llc_calibration_figure, llc_cases_figure

    rows, sweeps, arrays, warnings = [], [], {}, []
    first_target = {}                   # case name -> (label, loss, w*, data, lambda), for the calibration
    cases = list(enumerate(s["cases"]))
    for ci, c in tqdm(cases, desc="cases", disable=not progress, leave=False):
        k_data, k_sgld, k_nuts = jax.random.split(jax.random.fold_in(key, ci), 3)
        for label, loss, star, data, lam, init in _targets(c, s["n"], k_data):
            g = c["sgld"]
            refined = None
            if s["refine"] and c["model"] == "two_layer":
                before = float(loss(star, data))
                star, after = minimize_loss(loss, star, data)
                refined = {"loss_at_point": before, "loss_at_minimum": after}
            first_target.setdefault(c["name"], (label, loss, star, data, lam))
            if "sgld" in c["methods"]:
                est = estimate_llc(k_sgld, loss, star, data, num_chains=g["num_chains"], num_steps=g["num_steps"],
                                   num_burnin=g["num_burnin"], thin=g["thin"], step_size=g["step_size"],
                                   localization=g["localization"], nbeta=g["nbeta"] or None,
                                   batch_size=g["batch_size"] or None)
                if c["model"] == "monomial" and not c["theta0"] and len(c["exponents"]) <= 3:
                    exact = normal_crossing_expectation(c["exponents"], est.nbeta, g["localization"])
                else:
                    exact = None
                rows.append({"name": label, "true_lambda": lam, "estimate": est.estimate, "se": est.se, "method": "sgld",
                             "exact_finite_n": exact, "refined": refined,
                             "per_chain": est.per_chain, "accept_prob": float(np.mean(est.accept_prob)),
                             "rhat": est.rhat, "nbeta": est.nbeta, "step_size": g["step_size"],
                             "localization": g["localization"], "num_steps": g["num_steps"],
                             "warnings": est.warnings})
                warnings += [f"{label} (sgld): {w}" for w in est.warnings]
                arrays[f"{label} sgld trace"] = est.nbeta * (est.loss_trace.mean(0) - est.init_loss)
            b = c["beta_sweep"]
            settings = SamplerSettings(num_warmup=b["num_warmup"], num_samples=b["num_samples"],
                                       target_accept_prob=b["target_accept"])
            if "beta_sweep" in c["methods"]:
                n = s["n"]
                bs = rlct_from_beta_sweep(k_nuts, loss, star if b["localization"] else init, data,
                                          betas=np.asarray(b["factors"]) / math.log(n),
                                          chains_per_beta=b["chains_per_beta"], prior_std=b["prior_std"],
                                          localization=b["localization"], settings=settings)
                rows.append({"name": label, "true_lambda": lam, "estimate": bs.slope, "se": bs.slope_se,
                             "method": "beta_sweep", "localization": b["localization"], "betas": bs.betas,
                             "expected_nl": bs.expected_nl, "expected_nl_se": bs.se, "intercept": bs.intercept})
                sweeps.append((label, bs, lam))
            if "wbic" in c["methods"]:
                v, se = wbic(k_nuts, loss, init, data, chains_per_beta=b["chains_per_beta"],
                             prior_std=b["prior_std"], settings=settings)
                rows.append({"name": label, "true_lambda": lam, "estimate": None, "se": None, "method": "wbic",
                             "wbic": v, "wbic_se": se})
    for row in rows:
        if row["estimate"] is not None and isinstance(row["true_lambda"], (int, float)):
            row["relative_error"] = (row["estimate"] - row["true_lambda"]) / row["true_lambda"]
    metrics = {"n": s["n"], "cases": rows, "warnings": warnings}
    llc_cases_figure(outdir / "llc.png", [r for r in rows if r["estimate"] is not None], title="Learning coefficient")
    if sweeps:
        beta_sweep_figure(outdir / "beta_sweep.png", sweeps, n=s["n"])
    if s["calibration"]:
        cal = s["calibration"]
        c = next(c for c in s["cases"] if c["name"] == cal["case"])
        label, loss, star, data, lam = first_target[c["name"]]
        g = c["sgld"]
        grid = calibrate_llc(jax.random.fold_in(key, 10_000), loss, star, data, cal["step_sizes"],
                             cal["localizations"], num_chains=g["num_chains"], num_steps=cal["num_steps"],
                             num_burnin=cal["num_burnin"], nbeta=g["nbeta"] or None,
                             batch_size=g["batch_size"] or None)
        metrics["calibration"] = {"case": label, "true_lambda": lam, "step_sizes": grid.step_sizes,
                                  "localizations": grid.localizations, "estimate": grid.estimate, "se": grid.se,
                                  "accept_prob": grid.accept, "rhat": grid.rhat, "nbeta": grid.nbeta}
        llc_calibration_figure(outdir / "calibration.png", grid, true_lambda=lam, title=f"Calibration: {label}")
        arrays["calibration_mean_trace"] = grid.mean_trace
    np.savez_compressed(outdir / "arrays.npz", **{k.replace(" ", "_"): v for k, v in arrays.items()})
    return metrics
