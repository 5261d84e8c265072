"""Experiment kind ``tms``: the k-gon critical points of the toy model of superposition and lambda per k-gon.

The toy model of superposition (``slt_relu.tms``: f(x) = ReLU(W^T W x + b), W (2, c), inputs x = mu e_i)
has the regular k-gons as critical points (Chen, Lau, Mendel, Wei, Murfet 2023).  For every c of ``[table]``
the run tabulates every k-gon and variant (the signs of the unused features' biases) exactly
(``slt_relu.tms.kgon_table``: refined length and bias, exact population loss, gradient norm, Hessian
counts, Fisher rank, whether it is a minimum or a saddle, and lambda from first principles where it
follows), and for the k-gon minima of ``[estimate]`` it measures the learning coefficient lambda from
tempered SMC's free-energy curve of the *local* potential (``slt_relu.posterior.free_energy_curve``):

    Z_a(t) = int_{U_a} phi(v) exp(-t (L(w* + v) - L(w*))) dv ~ C t^(-lambda),   phi = N(0, prior_std^2 I),

on a region U_a around the refined k-gon w* that keeps the first-principles lambda's hypotheses: the rotation
gauge-fixed, negative unused biases folded, a hard ball of ``radius`` (``slt_relu.tms.local_lambda``, which says
why each is needed).  lambda is fitted over the last ``decades`` of t up to ``t_max`` (m fixed at 1 by default),
with its standard error over ``runs`` independent SMC runs, and again on the window's two halves (a drift between
them says the window is not asymptotic).

Outputs: metrics.json (``kgons``: a row per k-gon and variant with the exact numbers and, where estimated,
``lambda``, ``lambda_se``, ``fit``, ``verdict``), results.nc (the table along ``row``, the free-energy curves
along (``estimated``, ``run``, ``stage``), each row's refined k-gon ``W``, ``b``), kgons.png, lambda.png,
loss_landscape.png (drawn from results.nc).
"""
from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field

from ..workflow.settings import ConfigError, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment, SMCSection

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

MAX_C = 10                   # the table's cost grows like c^2 rows with a (3c)^2 Hessian each; c = 8 takes ~10 s


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
    smc: SMCSection = Field(description="the SMC runs of the local free-energy curves (a target_ess near 1 gives "
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
    from ..tms.local_lambda import kgon_lambda, verdict

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
    kgons = [refined_kgon(row["c"], row["k"], row["n_positive"]) for row in rows]
    for i in tqdm(chosen, desc="k-gons", disable=not ctx.progress, leave=False):
        row = rows[i]
        name = f"c = {row['c']} {row['k']}-gon {row['variant']}".rstrip()
        try:
            est = kgon_lambda(jax.random.fold_in(key, i), kgons[i], s.smc.build(), prior_std=e.prior_std,
                              radius=e.radius, t_max=e.t_max, decades=e.decades, runs=e.runs,
                              estimator=e.estimator, max_multiplicity=e.max_multiplicity)
        except ValueError as err:               # too few stages in the window: the settings' doing
            raise ConfigError(f"{name}: {err}; see smc.target_ess, estimate.decades") from None
        row.update(_estimate_entry(est))
        row["verdict"], row["z"] = verdict(row["lambda"], row["lambda_se"], row["lambda_exact"])
        warnings += [f"{name}: {w}" for w in est.warnings]
        curves.append(est.details.curve)
    metrics = {"kgons": rows, "region": {"prior_std": e.prior_std, "radius": e.radius, "t_max": e.t_max,
                                         "decades": e.decades, "runs": e.runs},
               "warnings": warnings}
    return Output(metrics, dataset(rows, chosen, curves, kgons))


def _estimate_entry(est) -> dict:
    """A k-gon row's ``lambda``, ``lambda_se`` and ``fit`` from :func:`~slt_relu.tms.local_lambda.kgon_lambda`'s
    estimate (its details: the window's halves, every estimator's reading, the region's check)."""
    d = est.details
    half = lambda h, key: None if h is None else getattr(h, key)
    return {"lambda": est.lambda_, "lambda_se": est.se,
            "fit": {"estimator": d.estimator, "t_range": list(est.window), "m": est.m, "reason": est.m_reason,
                    "lambda_lower_half": half(d.lower_half, "lambda_"), "lambda_lower_half_se": half(d.lower_half, "se"),
                    "lambda_upper_half": half(d.upper_half, "lambda_"), "lambda_upper_half_se": half(d.upper_half, "se"),
                    "drift_z": d.drift_z,
                    "estimators": {name: {"lambda": f.lambda_, "lambda_se": f.se, "m": f.m, "reason": f.m_reason}
                                   for name, f in d.by_estimator.items()},
                    "grad_evals": d.curve.grad_evals, "region_min_loss": d.region_min_loss,
                    "num_params": d.num_params, "pinned": d.pinned, "folded": d.folded}}


def figures(r: Resolved, ds) -> dict:
    """kgons.png (the minima's columns of W), loss_landscape.png (every k-gon's loss) and, where k-gons were
    estimated, lambda.png, from the results Dataset."""
    from ..plots import kgon_gallery_figure, kgon_loss_figure, tms_lambda_figure

    minima = np.flatnonzero(ds["critical_kind"].values.astype(str) == "minimum")
    out = {"kgons": kgon_gallery_figure(ds.isel(row=minima)), "loss_landscape": kgon_loss_figure(ds)}
    if ds.sizes.get("estimated"):
        out["lambda"] = tms_lambda_figure(ds)
    return out


def dataset(rows, chosen, curves, kgons):
    """The table along ``row`` with each row's refined k-gon (``W``, ``b``: TMSParams, one per row); the estimated
    k-gons' (rows ``chosen``) free-energy curves (TemperedCurve, one each) along (estimated, run, stage) and fitted
    windows (``fit.t_range`` of their rows)."""
    import xarray as xr

    num = lambda key: np.array([np.nan if row[key] is None else row[key] for row in rows], np.float64)
    F = max(row["c"] for row in rows)
    W, b = np.full((len(rows), 2, F), np.nan), np.full((len(rows), F), np.nan)
    for i, (row, p) in enumerate(zip(rows, kgons)):
        W[i, :, :row["c"]], b[i, :row["c"]] = np.asarray(p.W, np.float64), np.asarray(p.b, np.float64)
    ds = xr.Dataset(
        {"loss": ("row", num("loss"), {"long_name": "exact population loss L"}),
         "length": ("row", num("length")), "bias": ("row", num("bias")), "grad_norm": ("row", num("grad_norm")),
         "fisher_rank": ("row", np.array([row["fisher_rank"] for row in rows], np.int64)),
         "hessian_positive": ("row", np.array([row["hessian"]["positive"] for row in rows], np.int64)),
         "hessian_zero": ("row", np.array([row["hessian"]["zero"] for row in rows], np.int64)),
         "hessian_negative": ("row", np.array([row["hessian"]["negative"] for row in rows], np.int64)),
         "lambda_exact": ("row", num("lambda_exact"), {"long_name": "lambda from first principles, NaN: none"}),
         "lambda": ("row", num("lambda"), {"long_name": "lambda estimated, NaN: not estimated"}),
         "lambda_se": ("row", num("lambda_se")),
         "W": (("row", "hidden", "feature"), W, {"long_name": "the refined k-gon's W (refined_kgon(c, k, "
                                                 "n_positive)), NaN beyond its c features"}),
         "b": (("row", "feature"), b, {"long_name": "the refined k-gon's b, NaN beyond its c features"})},
        coords={"c": ("row", np.array([row["c"] for row in rows], np.int64)),
                "k": ("row", np.array([row["k"] for row in rows], np.int64)),
                "n_positive": ("row", np.array([row["n_positive"] for row in rows], np.int64),
                               {"long_name": "unused features with a positive bias"}),
                "variant": ("row", [row["variant"] for row in rows]),
                "critical_kind": ("row", [row["kind"] for row in rows])})
    if curves:
        from ..posterior.learning_coefficient import stack_curves

        dims = ("estimated", "run", "stage")
        ds = ds.assign({"t": (dims, stack_curves(curves, "t")),
                        "free_energy": (dims, stack_curves(curves, "free_energy"),
                                        {"long_name": "F(t) = -log Z(t) of t (L - L*) on the region"}),
                        "mean_loss": (dims, stack_curves(curves, "mean_loss"), {"long_name": "E_t[L - L*]"}),
                        "window": (("estimated", "bound"), np.array([rows[i]["fit"]["t_range"] for i in chosen],
                                                                    np.float64), {"long_name": "the fitted window of t"})})
        label = lambda row: f"c{row['c']} {row['k']}-gon {row['variant']}".rstrip()
        ds = ds.assign_coords(estimated=[label(rows[i]) for i in chosen],
                              estimated_row=("estimated", np.array(chosen, np.int64)), bound=["lo", "hi"])
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
                          memory=memory, figures=figures))
