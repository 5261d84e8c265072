"""Experiment kind ``lambda_curve``: lambda and m of losses with known values, from tempered SMC's free-energy curves.

Each [[cases]] entry is a population loss K whose learning coefficient and multiplicity are known in
closed form (``slt_relu.known_lambda``), with the prior N(0, prior_std^2 I) on its parameters:

- ``normal_crossing``: K = prod_i w_i^(2 k_i) (k_i = 0: a coordinate K does not depend on);
- ``sum``: K = sum_i w_i^(2 k_i);
- ``regular``: K = w^T H w / 2 with H = A A^T / d + I (A a d x d standard normal matrix);
- ``reduced_rank``: y = B A x with x ~ N(0, I) and unit noise: K = |B A - C0|_F^2 / 2, C0 = B0 A0 of rank r;
- ``deep_linear``: K = |W_L ... W_1 - C0|_F^2 / 2, C0 of rank r;

(the truths' factors are standard normal, drawn from the case's key).  For every case, ``curve.runs``
independent SMC runs from the prior to t_max give F(t) and E_t[K] at every stage
(``slt_relu.posterior.free_energy_curve``), and the three estimators read lambda and m off them.
Outputs: metrics.json (``cases``: name, family, num_params, lambda_exact, m_exact, and per estimator
lambda, lambda_se, m (null where not identifiable), lambda_by_m, the fitted t range, gradients), results.nc
(the estimates along (case, estimator) and the curves along (case, run, stage)), lambda_curve.png.
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from .. import known_lambda
from ..sampling import SMCSettings
from ..settings import ConfigError, Section
from .common import Experiment
from .kind import Kind, Output, first_line, register_kind

FAMILIES = ("normal_crossing", "sum", "regular", "reduced_rank", "deep_linear")
MAX_PARAMS = 2000            # SMC's particles x parameters x runs per program stay in memory


class CaseSettings(Section):
    name: str = Field(min_length=1, max_length=100, description="the case's label")
    family: Literal["normal_crossing", "sum", "regular", "reduced_rank", "deep_linear"] = Field(
        description="the loss family (module docstring)")
    k: tuple[int, ...] | None = Field(None, description="normal_crossing, sum: the half-exponents k_i")
    num_params: int | None = Field(None, ge=1, le=MAX_PARAMS, description="regular: the parameters d")
    input_dim: int | None = Field(None, ge=1, le=64, description="reduced_rank, deep_linear: the input width")
    hidden: int | None = Field(None, ge=1, le=64, description="reduced_rank: the hidden width")
    output_dim: int | None = Field(None, ge=1, le=64, description="reduced_rank: the output width")
    widths: tuple[int, ...] | None = Field(None, description="deep_linear: hidden widths, then the output width")
    true_rank: int = Field(0, ge=0, description="reduced_rank, deep_linear: the rank r of the true map")


class CurveSettings(Section):
    t_max: float = Field(1e8, gt=1, le=1e30, description="the largest inverse temperature t = n beta")
    decades: float = Field(5.0, gt=0, le=29, description="the fitted window: the last decades of t")
    runs: int = Field(8, ge=2, le=256, description="independent SMC runs per case (their spread: the errors)")
    prior_std: float = Field(1.0, gt=0, description="the prior N(0, prior_std^2 I)")
    max_multiplicity: int = Field(3, ge=1, le=8, description="the largest candidate m")


class Settings(Experiment):
    kind: Literal["lambda_curve"]
    curve: CurveSettings = CurveSettings()
    smc: SMCSettings = Field(description="the SMC runs (a target_ess near 1 gives the stages the fit needs: "
                             "0.9 gives 4-10 a decade)")
    cases: tuple[CaseSettings, ...] = Field(min_length=1, max_length=64, description="the losses")


class PolynomialLoss(NamedTuple):
    """K on flat w for the normal_crossing, sum and regular families; hashable (static in jit)."""

    family: str
    k: tuple
    hessian: tuple = ()

    def __call__(self, w, data):
        import jax.numpy as jnp

        if self.family == "regular":
            return 0.5 * w @ jnp.asarray(self.hessian, w.dtype) @ w
        powers = w ** (2 * jnp.asarray(self.k, w.dtype))
        return jnp.prod(powers) if self.family == "normal_crossing" else jnp.sum(powers)


class ProductLoss(NamedTuple):
    """K = |W_L ... W_1 - C0|_F^2 / 2 on flat w = (W_1, ..., W_L) row-major; widths (H_0, ..., H_L)."""

    widths: tuple
    target: tuple

    def __call__(self, w, data):
        import jax.numpy as jnp

        H, start, prod = self.widths, 0, None
        for a, b in zip(H[:-1], H[1:]):
            W = w[start:start + a * b].reshape(b, a)
            start += a * b
            prod = W if prod is None else W @ prod
        return 0.5 * jnp.sum((prod - jnp.asarray(self.target, w.dtype)) ** 2)


class Case(NamedTuple):
    """A case resolved: its settings, loss, parameter count and exact (lambda, m)."""

    settings: CaseSettings
    loss: object
    num_params: int
    lambda_exact: float
    m_exact: int


class Resolved(NamedTuple):
    curve: CurveSettings
    smc: SMCSettings
    cases: tuple


def _exact(c: CaseSettings, where: str):
    """(lambda, m, num_params, widths) of a case, ConfigError naming a missing or bad key."""
    def need(*keys):
        for k in keys:
            if getattr(c, k) is None:
                raise ConfigError(f"{where}.{k}: expected a value for family {c.family!r}")
    try:
        if c.family in ("normal_crossing", "sum"):
            need("k")
            if len(c.k) > MAX_PARAMS:
                raise ValueError(f"k: expected at most {MAX_PARAMS} half-exponents, got {len(c.k)}")
            lam, m = known_lambda.normal_crossing(c.k, "product" if c.family == "normal_crossing" else "sum")
            return lam, m, len(c.k), None
        if c.family == "regular":
            need("num_params")
            lam, m = known_lambda.regular(c.num_params)
            return lam, m, c.num_params, None
        if c.family == "reduced_rank":
            need("input_dim", "hidden", "output_dim")
            widths = (c.input_dim, c.hidden, c.output_dim)
            lam, m = known_lambda.reduced_rank(*widths, true_rank=c.true_rank)
        else:
            need("input_dim", "widths")
            widths = (c.input_dim,) + tuple(c.widths)
            lam, m = known_lambda.deep_linear(c.input_dim, c.widths, c.true_rank)
    except ValueError as err:
        raise ConfigError(f"{where}.{err}") from None
    D = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    if D > MAX_PARAMS:
        raise ConfigError(f"{where}: expected at most {MAX_PARAMS} parameters, got {D}")
    return lam, m, D, widths


def resolve(s: Settings, raw=None) -> Resolved:
    import jax

    cases = []
    for i, c in enumerate(s.cases):
        where = f"cases[{i}]"
        lam, m, D, widths = _exact(c, where)
        key = jax.random.fold_in(jax.random.key(s.seed), i)
        if c.family == "regular":
            A = np.asarray(jax.random.normal(key, (D, D)), np.float64)
            loss = PolynomialLoss("regular", (), tuple(map(tuple, A @ A.T / D + np.eye(D))))
        elif widths is None:
            loss = PolynomialLoss(c.family, tuple(c.k))
        else:
            k1, k2 = jax.random.split(key)
            r = c.true_rank
            left = np.asarray(jax.random.normal(k1, (widths[-1], r)), np.float64)
            right = np.asarray(jax.random.normal(k2, (r, widths[0])), np.float64)
            loss = ProductLoss(widths, tuple(map(tuple, left @ right)))
        cases.append(Case(c, loss, D, float(lam), int(m)))
    if len({c.name for c in s.cases}) != len(s.cases):
        raise ConfigError("cases: expected distinct names, got " + ", ".join(c.name for c in s.cases))
    return Resolved(s.curve, s.smc, tuple(cases))


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    from ..posterior.free_energy_curve import ESTIMATORS, fit_learning_coefficient, smc_free_energy_curve

    rows, curves = [], []
    for i, c in enumerate(tqdm(r.cases, desc="cases", disable=not ctx.progress, leave=False)):
        curve = smc_free_energy_curve(jax.random.fold_in(key, i), c.loss, c.num_params, r.curve.t_max, r.smc,
                                      num_runs=r.curve.runs, prior_std=r.curve.prior_std)
        estimators = {}
        for name in ESTIMATORS:
            try:
                fit = fit_learning_coefficient(curve, name, decades=r.curve.decades,
                                               max_multiplicity=r.curve.max_multiplicity)
            except ValueError as err:           # too few stages in the window: the settings' doing
                raise ConfigError(f"cases[{i}] ({c.settings.name}): {err}; see smc.target_ess, curve.decades") from None
            estimators[name] = {"lambda": fit.lambda_, "lambda_se": fit.lambda_se, "m": fit.m,
                                "lambda_by_m": {str(k): v for k, v in fit.lambda_by_m.items()},
                                "chi2_by_m": {str(k): v for k, v in fit.chi2_by_m.items()},
                                "residual_p": fit.residual_p, "reason": fit.reason}
        rows.append({"name": c.settings.name, "family": c.settings.family, "num_params": c.num_params,
                     "lambda_exact": c.lambda_exact, "m_exact": c.m_exact, "t_range": list(fit.t_range),
                     "grad_evals": curve.grad_evals, "estimators": estimators})
        curves.append(curve)
    from ..plots import lambda_curve_figure

    fig = lambda_curve_figure(rows, curves)
    return Output({"cases": rows}, _dataset(rows, curves), {"lambda_curve": fig})


def _dataset(rows, curves):
    """Estimates along (case, estimator), curves along (case, run, stage) NaN-padded."""
    import xarray as xr

    from ..posterior.free_energy_curve import ESTIMATORS, stack_curves

    est = lambda key: np.array([[row["estimators"][e][key] if row["estimators"][e][key] is not None else np.nan
                                 for e in ESTIMATORS] for row in rows], np.float64)
    return xr.Dataset(
        {"lambda": (("case", "estimator"), est("lambda")), "lambda_se": (("case", "estimator"), est("lambda_se")),
         "m": (("case", "estimator"), est("m"), {"long_name": "multiplicity, NaN where not identifiable"}),
         "lambda_exact": ("case", np.array([row["lambda_exact"] for row in rows])),
         "m_exact": ("case", np.array([row["m_exact"] for row in rows], np.int64)),
         "t": (("case", "run", "stage"), stack_curves(curves, "t")),
         "free_energy": (("case", "run", "stage"), stack_curves(curves, "free_energy"), {"long_name": "F(t) = -log Z(t)"}),
         "mean_loss": (("case", "run", "stage"), stack_curves(curves, "mean_loss"), {"long_name": "E_t[K]"})},
        coords={"case": [row["name"] for row in rows], "estimator": list(ESTIMATORS),
                "family": ("case", [row["family"] for row in rows])})


def headline(metrics: dict) -> list[str]:
    """Per case: the exact lambda (m) and each estimator's lambda +- se with its m ('?' where not identifiable)."""
    out = []
    for row in metrics.get("cases", []):
        parts = [f"{e}: {v['lambda']:.4g} +- {v['lambda_se']:.2g} m {v['m'] if v['m'] is not None else '?'}"
                 for e, v in row["estimators"].items()]
        out.append(f"{row['name']}: exact {row['lambda_exact']:.4g} (m {row['m_exact']}); " + "; ".join(parts))
    return out


KIND = register_kind(Kind("lambda_curve", Settings, resolve, run, headline, description=first_line(__doc__)))
