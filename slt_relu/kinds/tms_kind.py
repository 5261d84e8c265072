"""Experiment kind ``tms``: the k-gon critical points of the toy model of superposition and lambda per k-gon.

The toy model of superposition (``slt_relu.tms``: f(x) = ReLU(W^T W x + b), W (2, c), inputs x = mu e_i)
has the regular k-gons as critical points (Chen, Lau, Mendel, Wei, Murfet 2023).  For every c of ``[table]``
the run tabulates every k-gon and variant (the signs of the unused features' biases) exactly
(``slt_relu.tms.kgon_table``: refined length and bias, exact population loss, gradient norm, Hessian
counts, Fisher rank, whether it is a minimum or a saddle, and lambda from first principles where it
follows), and for the k-gon minima of ``[estimate]`` it measures the learning coefficient lambda from
tempered SMC's free-energy curve of the *local* potential (``slt_relu.posterior.free_energy_curve``):

    Z_a(t) = int_{U_a} phi(v) exp(-t (L(w* + v) - L(w*))) dv ~ C t^(-lambda),   phi = N(0, prior_std^2 I),

on a region U_a around the refined k-gon w* that keeps the first-principles lambda's hypotheses:

- **the rotation is gauge-fixed**: W[1, 0] (column 0's component across its direction, 0 at w*) is pinned
  at 0, a slice through the rotation orbit (L is rotation invariant, so lambda is that of the slice).  Left
  free, the orbit spreads the particles over the prior's width while the other directions narrow as
  1/sqrt(t), and SMC's HMC moves (a diagonal mass matrix) fall behind above t ~ 1e8: t E_t[L - L*] then grows
  without bound (docs/experiments/tms_kgons.md);
- **negative unused biases stay negative**: each b_u of a feature with a negative unused bias is folded,
  b_u = b_u* - |v_b| <= b_u* = -1/(2c).  Its first-principles lambda holds only while every unused bias is
  negative (at b_u > 0 the loss falls, towards the "+" variant, by up to 1/(4c^2), which exp(-t ...) at
  t = 1e10 would weight above any prior tail); the fold restricts the integral to b_u <= b_u* (Z changes
  by a factor 2 a fold, not its t-dependence).  A Gaussian localization (SGLD's gamma) would have to be
  ~1e4 to keep b_u < 0, which biases the soft directions (curvature 0.02-0.06) unless t >> 1e6;
- **a hard ball** |v| <= ``radius``: outside it the potential is t (a wall), so no lower basin (another
  k-gon) can take over at large t.  The run checks the region: projected gradient descent from random
  starts inside the ball finds no loss below L(w*) (``region_min_loss`` >= 0).

``prior_std`` sets the region's scale: small enough that the flat directions' walls (|W_u| ~ 0.06 for the
negative unused columns at c = 6) are rarely reached, large enough that the softest direction (Hessian
eigenvalue h ~ 0.02 at the 6-gon) is resolved over the window: t h prior_std^2 >> 1 there (80 at t = 1e7).
lambda is fitted over the last ``decades`` of t up to ``t_max`` (m fixed at 1 by default: at these minima
the volume of {L - L* < eps} scales as eps^lambda without a log factor), with its standard error over
``runs`` independent SMC runs; the fit is repeated on the window's two halves (a drift between them says
the window is not asymptotic).

Outputs: metrics.json (``kgons``: a row per k-gon and variant with the exact numbers and, where estimated,
``lambda``, ``lambda_se``, ``fit``, ``verdict``), results.nc (the table along ``row``, the free-energy curves
along (``estimated``, ``run``, ``stage``)), kgons.png, lambda.png, loss_landscape.png.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field

from ..sampling import SMCSettings
from ..settings import ConfigError, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment

MAX_C = 10                   # the table's cost grows like c^2 rows with a (3c)^2 Hessian each; c = 8 takes ~10 s
ESTIMATORS = ("free_energy", "tempered_loss", "thermodynamic")
WALL = 1.0                   # L - L* outside the ball: t * 1 at the fitted t is a wall


class TableSettings(Section):
    c: tuple[Annotated[int, Field(ge=2, le=MAX_C)], ...] = Field(
        (4, 5, 6, 8), min_length=1, max_length=8, description="the numbers of features c tabulated (every k = 1..c, "
                                                             "every variant)")


class KGonChoice(Section):
    c: int = Field(ge=2, le=MAX_C, description="the features (one of table.c)")
    k: int = Field(ge=1, le=MAX_C, description="the active features")
    variant: str = Field("", max_length=MAX_C, pattern=r"^\+*-*$",
                         description="the unused biases' signs, '+' * n_positive + '-' * (c - k - n_positive)")


class EstimateSettings(Section):
    c: tuple[Annotated[int, Field(ge=2, le=MAX_C)], ...] = Field(
        (5, 6), max_length=8, description="the c whose k-gon minima (kind 'minimum' in the table) get a lambda "
                                          "estimate (each one of table.c)")
    min_k: int = Field(4, ge=1, le=MAX_C, description="only k-gons with k >= min_k (docs/experiments/tms_kgons.md: "
                                                      "k <= 3 have flat cones SMC's moves do not follow at large t)")
    kgons: tuple[KGonChoice, ...] = Field((), max_length=32, description="more k-gons to estimate (minima or "
                                                                          "numerical minima of the table)")
    prior_std: float = Field(0.02, gt=0, le=1, description="phi = N(0, prior_std^2 I) on the local coordinates v")
    radius: float = Field(0.25, gt=0, le=10, description="the region's ball |v| <= radius (a wall outside)")
    t_max: float = Field(1e10, gt=10, le=1e14, description="the largest inverse temperature t")
    decades: float = Field(3.0, gt=0, le=13, description="the fitted window: the last decades of t")
    runs: int = Field(8, ge=2, le=64, description="independent SMC runs per k-gon (their spread: the errors)")
    estimator: Literal["free_energy", "tempered_loss", "thermodynamic"] = Field(
        "free_energy", description="the estimator reported as lambda (slt_relu.posterior.free_energy_curve)")
    max_multiplicity: int = Field(1, ge=1, le=4, description="the largest m the fit considers (1: m fixed at 1)")


class Settings(Experiment):
    """Experiment kind ``tms``: the k-gon critical points of the toy model of superposition and lambda per k-gon."""

    kind: Literal["tms"]
    table: TableSettings = TableSettings()
    estimate: EstimateSettings = EstimateSettings()
    smc: SMCSettings = Field(description="the SMC runs of the local free-energy curves (a target_ess near 1 gives "
                                         "the stages the fit needs: 0.9 gives ~12 a decade)")


class Choice(NamedTuple):
    """A k-gon to estimate: (c, k, n_positive) and where it was asked for (the key, for errors)."""

    c: int
    k: int
    n_positive: int
    where: str


class Resolved(NamedTuple):
    settings: Settings
    table_c: tuple
    extra: tuple              # Choice of estimate.kgons


def resolve(s: Settings, raw=None) -> Resolved:
    if s.dtype != "float64":
        raise ConfigError(f"dtype: expected 'float64' for kind 'tms' (t (L - L*) at t = {s.estimate.t_max:g} needs "
                          f"float64's resolution), got {s.dtype!r}")
    table_c = tuple(dict.fromkeys(s.table.c))
    for c in s.estimate.c:
        if c not in table_c:
            raise ConfigError(f"estimate.c: expected values of table.c {list(table_c)}, got {c}")
    extra = []
    for i, g in enumerate(s.estimate.kgons):
        where = f"estimate.kgons[{i}]"
        if g.c not in table_c:
            raise ConfigError(f"{where}.c: expected one of table.c {list(table_c)}, got {g.c}")
        if g.k > g.c:
            raise ConfigError(f"{where}.k: expected 1 <= k <= c = {g.c}, got {g.k}")
        if len(g.variant) != g.c - g.k:
            raise ConfigError(f"{where}.variant: expected c - k = {g.c - g.k} signs ('+' before '-'), got "
                              f"{g.variant!r}")
        extra.append(Choice(g.c, g.k, g.variant.count("+"), where))
    if s.estimate.t_max / 10 ** s.estimate.decades <= 1:
        raise ConfigError(f"estimate.decades: expected a window above t = 1 (t_max / 10^decades > 1), got "
                          f"t_max = {s.estimate.t_max:g}, decades = {s.estimate.decades:g}")
    return Resolved(s, table_c, tuple(extra))


# ----------------------------------------------------------------------------------------------
# the local potential


class LocalKGonLoss(NamedTuple):
    """L(w* + v) - L(w*) on the local coordinates v (3c - 1,) of a k-gon w* of c features (module docstring):
    v is the flat offset (W row-major, then b) without W[1, 0] (pinned at 0: the rotation's slice); the
    coordinates flagged in ``data["fold"]`` enter as -|v_j| (negative unused biases stay <= b_u*); outside
    |v| <= ``data["radius"]`` the value is WALL.  ``data``: {"center": (1, 3c) w*, "fold": (1, 3c) 0/1,
    "loss_star": (1,) L(w*), "radius": (1,)} (a leading data axis of 1).  Hashable: one compiled program per c."""

    num_features: int

    def __call__(self, v, data):
        import jax.numpy as jnp

        from ..tms import from_flat, population_loss

        c = self.num_features
        full = jnp.concatenate([v[:c], jnp.zeros((1,), v.dtype), v[c:]])
        full = jnp.where(data["fold"][0] > 0, -jnp.abs(full), full)
        dl = population_loss(from_flat(data["center"][0] + full, c)) - data["loss_star"][0]
        return jnp.where(jnp.sum(v * v) <= data["radius"][0] ** 2, dl, WALL)


def local_data(params, radius: float) -> dict:
    """The ``data`` of :class:`LocalKGonLoss` at the k-gon ``params`` (b_u < 0 on its zero columns are folded)."""
    import jax.numpy as jnp

    from ..tms import population_loss, to_flat

    center = to_flat(params)
    c = params.W.shape[1]
    zero_column = jnp.sum(params.W ** 2, axis=0) == 0
    fold = jnp.concatenate([jnp.zeros(2 * c), (zero_column & (params.b < 0)).astype(center.dtype)])
    return {"center": center[None], "fold": fold[None], "loss_star": jnp.asarray([population_loss(params)]),
            "radius": jnp.asarray([radius], center.dtype)}


def _region_min(loss, data, key, starts: int = 8, steps: int = 400, lr: float = 0.2):
    """:func:`_region_min_impl` compiled (once per c)."""
    return _region_min_jit()(loss, data, key, starts, steps, lr)


@lru_cache(maxsize=None)
def _region_min_jit():
    import jax

    return jax.jit(_region_min_impl, static_argnums=(0, 3, 4))


def _region_min_impl(loss, data, key, starts, steps, lr):
    """min over ``starts`` runs of projected gradient descent on the local loss inside the ball (random starts
    uniform in it, steps kept at 0.999 radius): below 0 exhibits a lower loss inside the region."""
    import jax
    import jax.numpy as jnp

    dim = 3 * loss.num_features - 1
    R = 0.999 * data["radius"][0]
    project = lambda v: v * jnp.minimum(1.0, R / jnp.maximum(jnp.linalg.norm(v), 1e-300))
    f = lambda v: loss(v, data)

    def run(k):
        k1, k2 = jax.random.split(k)
        u = jax.random.normal(k1, (dim,), data["center"].dtype)
        v = u / jnp.linalg.norm(u) * R * jax.random.uniform(k2, (), u.dtype) ** (1.0 / dim)
        v, _ = jax.lax.scan(lambda v, _: (project(v - lr * jax.grad(f)(v)), None), v, None, length=steps)
        return f(v)

    return jnp.min(jax.vmap(run)(jax.random.split(key, starts)))


def _below(curve, t_hi: float):
    """The curve with its stages above t_hi dropped (NaN)."""
    keep = curve.t <= t_hi * (1 + 1e-12)
    nan = lambda a: np.where(keep, a, np.nan)
    return curve._replace(t=nan(curve.t), free_energy=nan(curve.free_energy), mean_loss=nan(curve.mean_loss))


def estimate_lambda(key, params, e: EstimateSettings, smc: SMCSettings):
    """(curve, fit dict, warnings) of the local free-energy curve at the k-gon ``params`` (module docstring)."""
    import jax

    from ..posterior.free_energy_curve import fit_learning_coefficient, smc_free_energy_curve

    c = params.W.shape[1]
    loss, data = LocalKGonLoss(c), local_data(params, e.radius)
    k_curve, k_region = jax.random.split(key)
    curve = smc_free_energy_curve(k_curve, loss, 3 * c - 1, e.t_max, smc, num_runs=e.runs, prior_std=e.prior_std,
                                  data=data)
    fit = lambda cv, est, dec: fit_learning_coefficient(cv, est, loss_min=0.0, decades=dec,
                                                        max_multiplicity=e.max_multiplicity)
    estimators = {}
    for name in ESTIMATORS:
        f = fit(curve, name, e.decades)
        estimators[name] = {"lambda": f.lambda_, "lambda_se": f.lambda_se, "m": f.m, "reason": f.reason}
    main = fit(curve, e.estimator, e.decades)
    warnings = []
    halves = {}
    half = e.decades / 2
    for part, cv in (("lower", _below(curve, e.t_max / 10 ** half)), ("upper", curve)):
        try:
            f = fit(cv, e.estimator, half)
            halves[part] = (f.lambda_, f.lambda_se)
        except ValueError:                       # too few stages in half the window
            halves[part] = (None, None)
    drift = None
    if halves["lower"][0] is not None and halves["upper"][0] is not None:
        drift = abs(halves["upper"][0] - halves["lower"][0]) / max(np.hypot(halves["lower"][1], halves["upper"][1]),
                                                                    1e-300)
    region_min = float(_region_min(loss, data, k_region))
    short = float(np.nanmin(np.nanmax(curve.t, axis=1)))
    if short < e.t_max * (1 - 1e-9):
        warnings.append(f"an SMC run stopped at t = {short:.3g} < t_max (smc.max_stages)")
    if region_min < -1e-10:
        warnings.append(f"the region holds a lower loss (L - L* = {region_min:.3g}): not a local minimum at "
                        "estimate.radius")
    if drift is not None and drift > 3:
        warnings.append(f"lambda drifts across the window: {halves['lower'][0]:.4g} +- {halves['lower'][1]:.2g} on "
                        f"its lower half, {halves['upper'][0]:.4g} +- {halves['upper'][1]:.2g} on its upper half")
    out = {"lambda": main.lambda_, "lambda_se": main.lambda_se,
           "fit": {"estimator": e.estimator, "t_range": list(main.t_range), "m": main.m, "reason": main.reason,
                   "lambda_lower_half": halves["lower"][0], "lambda_lower_half_se": halves["lower"][1],
                   "lambda_upper_half": halves["upper"][0], "lambda_upper_half_se": halves["upper"][1],
                   "drift_z": drift, "estimators": estimators, "grad_evals": curve.grad_evals,
                   "region_min_loss": region_min, "num_params": 3 * c - 1,
                   "pinned": "W[1,0]",
                   "folded": [f"b[{j - 2 * c}]" for j in np.flatnonzero(np.asarray(data["fold"][0]))]}}
    return curve, out, warnings


def verdict(lam: float, se: float, exact: float | None) -> tuple[str, float | None]:
    """('agrees'/'differs' ... within 3 se, z) against the first-principles value, or ('no first-principles
    value', None)."""
    if exact is None:
        return "no first-principles value", None
    z = (lam - exact) / se if se > 0 else float("inf")
    word = "agrees" if abs(z) <= 3 else "differs"
    return f"{word} ({lam - exact:+.3g} = {z:+.1f} se, {100 * (lam / exact - 1):+.1f} %)", float(z)


# ----------------------------------------------------------------------------------------------
# the run


def _row(rec) -> dict:
    from ..tms import kgon_loss_formula

    return {"c": rec.c, "k": rec.k, "variant": rec.variant, "n_positive": rec.n_positive, "length": rec.length,
            "bias": rec.bias, "positive_bias": rec.positive_bias, "negative_bias": rec.negative_bias,
            "loss": rec.loss, "loss_formula": kgon_loss_formula(rec.c, rec.k, rec.n_positive),
            "grad_norm": rec.grad_norm, "kind": rec.kind, "smooth": rec.smooth,
            "hessian": {"positive": rec.hessian_positive, "zero": rec.hessian_zero, "negative": rec.hessian_negative},
            "fisher_rank": rec.fisher_rank, "lambda_exact": rec.lambda_, "lambda_rule": rec.lambda_rule,
            "note": rec.note, "lambda": None, "lambda_se": None}


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    from ..tms import kgon_table, refined_kgon

    s, e = r.settings, r.settings.estimate
    records = kgon_table(r.table_c)
    rows = [_row(rec) for rec in records]
    index = {(row["c"], row["k"], row["n_positive"]): i for i, row in enumerate(rows)}
    chosen = [i for i, row in enumerate(rows) if row["c"] in e.c and row["kind"] == "minimum" and row["k"] >= e.min_k]
    for ch in r.extra:
        i = index[(ch.c, ch.k, ch.n_positive)]
        if rows[i]["kind"] not in ("minimum", "numerical minimum"):
            raise ConfigError(f"{ch.where}: the {ch.k}-gon {rows[i]['variant']!r} of c = {ch.c} is a {rows[i]['kind']} "
                              "(kgon_table): lambda is local to a minimum")
        if i not in chosen:
            chosen.append(i)
    chosen.sort()
    warnings, curves = [], []
    for i in tqdm(chosen, desc="k-gons", disable=not ctx.progress, leave=False):
        row = rows[i]
        name = f"c = {row['c']} {row['k']}-gon {row['variant']}".rstrip()
        params = refined_kgon(row["c"], row["k"], row["n_positive"])
        try:
            curve, est, warn = estimate_lambda(jax.random.fold_in(key, i), params, e, s.smc)
        except ValueError as err:               # too few stages in the window: the settings' doing
            raise ConfigError(f"{name}: {err}; see smc.target_ess, estimate.decades") from None
        row.update(est)
        row["verdict"], row["z"] = verdict(row["lambda"], row["lambda_se"], row["lambda_exact"])
        warnings += [f"{name}: {w}" for w in warn]
        curves.append(curve)
    estimated = [rows[i] for i in chosen]
    metrics = {"kgons": rows, "region": {"prior_std": e.prior_std, "radius": e.radius, "t_max": e.t_max,
                                         "decades": e.decades, "runs": e.runs},
               "warnings": warnings}
    return Output(metrics, _dataset(rows, chosen, curves), _figures(rows, estimated, curves))


def _figures(rows, estimated, curves) -> dict:
    from ..plots import kgon_gallery_figure, kgon_loss_figure, tms_lambda_figure
    from ..tms import refined_kgon

    panels = []
    for row in rows:
        if row["kind"] != "minimum":
            continue
        p = refined_kgon(row["c"], row["k"], row["n_positive"])
        panels.append({"W": np.asarray(p.W), "b": np.asarray(p.b), **{k: row[k] for k in (
            "c", "k", "variant", "loss", "lambda_exact", "lambda", "lambda_se")}})
    figures = {"kgons": kgon_gallery_figure(panels), "loss_landscape": kgon_loss_figure(rows)}
    if estimated:
        figures["lambda"] = tms_lambda_figure(estimated, curves)
    return figures


def _dataset(rows, chosen, curves):
    """The table along ``row``; the estimated k-gons' free-energy curves along (estimated, run, stage)."""
    import xarray as xr

    num = lambda key: np.array([np.nan if row[key] is None else row[key] for row in rows], np.float64)
    ds = xr.Dataset(
        {"loss": ("row", num("loss"), {"long_name": "exact population loss L"}),
         "length": ("row", num("length")), "bias": ("row", num("bias")), "grad_norm": ("row", num("grad_norm")),
         "fisher_rank": ("row", np.array([row["fisher_rank"] for row in rows], np.int64)),
         "hessian_positive": ("row", np.array([row["hessian"]["positive"] for row in rows], np.int64)),
         "hessian_zero": ("row", np.array([row["hessian"]["zero"] for row in rows], np.int64)),
         "hessian_negative": ("row", np.array([row["hessian"]["negative"] for row in rows], np.int64)),
         "lambda_exact": ("row", num("lambda_exact"), {"long_name": "lambda from first principles, NaN: none"}),
         "lambda": ("row", num("lambda"), {"long_name": "lambda estimated, NaN: not estimated"}),
         "lambda_se": ("row", num("lambda_se"))},
        coords={"c": ("row", np.array([row["c"] for row in rows], np.int64)),
                "k": ("row", np.array([row["k"] for row in rows], np.int64)),
                "variant": ("row", [row["variant"] for row in rows]),
                "critical_kind": ("row", [row["kind"] for row in rows])})
    if curves:
        from ..posterior.free_energy_curve import stack_curves

        dims = ("estimated", "run", "stage")
        ds = ds.assign({"t": (dims, stack_curves(curves, "t")),
                        "free_energy": (dims, stack_curves(curves, "free_energy"),
                                        {"long_name": "F(t) = -log Z(t) of t (L - L*) on the region"}),
                        "mean_loss": (dims, stack_curves(curves, "mean_loss"), {"long_name": "E_t[L - L*]"})})
        label = lambda row: f"c{row['c']} {row['k']}-gon {row['variant']}".rstrip()
        ds = ds.assign_coords(estimated=[label(rows[i]) for i in chosen],
                              estimated_row=("estimated", np.array(chosen, np.int64)))
    return ds


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    e = s.estimate
    c = max([*s.table.c, *(g.c for g in e.kgons)])
    D = 3 * c
    return [Need("table.c", f"the Hessian and Fisher matrices of the k-gon table ({D} parameters)", 2 * D * D),
            Need("smc.num_particles, estimate.runs, estimate.c, estimate.kgons", "the particles and their moves of "
                 f"every run of the largest k-gon ({D - 1} local parameters)", 2 * e.runs * s.smc.num_particles * D)]


def headline(metrics: dict) -> list[str]:
    """The c = 6 4-, 5-, 6-gon losses with their (length, bias), then each estimated k-gon's lambda +- se against
    its first-principles value with the verdict."""
    rows = metrics.get("kgons", [])
    out = []
    for c in sorted({row["c"] for row in rows}):
        parts = [f"{row['k']}-gon{(' ' + row['variant']) if row['variant'] else ''} {row['loss']:#.4g} "
                 f"(l {row['length']:#.4g}, b {row['bias']:#.4g})" for row in rows
                 if row["c"] == c and row["kind"] == "minimum" and row["k"] >= max(c - 2, 1)]
        out.append(f"c = {c} minima, exact L: " + "; ".join(parts))
    for row in rows:
        if row.get("lambda") is None:
            continue
        exact = (f"first principles {row['lambda_exact']:.4g} ({row['lambda_rule']})" if row["lambda_exact"] is not None
                 else "no first-principles value")
        out.append(f"c = {row['c']} {row['k']}-gon {row['variant']}".rstrip()
                   + f": lambda {row['lambda']:.4g} +- {row['lambda_se']:.2g}, {exact}: {row['verdict']}")
    return out


KIND = register_kind(Kind("tms", Settings, resolve, run, headline, description=first_line(__doc__),
                          memory=memory))
