"""Experiment kind ``functional_dimension``: batch functional dimension at initialisation (Grigsby et al. 2023).

Architectures (n0, .., n0, 1), He-initialised, at i.i.d. N(0, I) points in R^n0 (as in the
paper).  For every cell: the bound (parameters minus hidden neurons), the functional dimensions,
bound - dimension per network, the fraction at the bound with a 95% Wilson interval, and the mean
numbers of hidden neurons that are dead (never active) or always active on the points (two
mechanisms of hidden symmetries, Grigsby et al. section 6; Petzka et al. Example 2).  Outputs:
functional_dimension.png, results.nc (one Dataset over (n_in, depth, point_factor, network): the
functional dimension and the dead and always-active neurons per network, the bound and the number of
points per cell), metrics.json (its per-cell rows derived from it).
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, field_validator

from ..workflow.settings import SCALE_BOUND, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)


class FunctionalDimensionSettings(Section):
    n_in: tuple[Annotated[int, Field(ge=1)], ...] = Field((5, 10, 15), min_length=1, description="input "
                                                          "dimensions n0; the hidden widths equal n0")
    depths: tuple[Annotated[int, Field(ge=2)], ...] = Field((2, 3, 4, 5, 6), min_length=1, description="numbers of "
                                                            "weight layers (2 = one hidden layer)")
    networks: int = Field(20, ge=1, le=10000, description="He-initialised networks per (n0, depth)")
    point_factors: tuple[Annotated[float, Field(gt=0)], ...] = Field((1.0, 2.0), min_length=1, description="numbers "
                                                                     "of points as multiples of the bound")
    bias_std: float = Field(0.1, ge=0, le=SCALE_BOUND, description="biases N(0, bias_std^2)")
    rtol: float | None = Field(None, ge=0, description="rank threshold (default max(shape) * eps)")

    @field_validator("n_in", "depths", "point_factors")
    @classmethod
    def _distinct(cls, values):
        """Each list is an axis of results.nc: each value once."""
        twice = [v for i, v in enumerate(values) if v in values[:i]]
        if twice:
            raise ValueError(f"expected distinct values, got {twice[0]!r} more than once")
        return values


class Settings(Experiment):
    kind: Literal["functional_dimension"]
    functional_dimension: FunctionalDimensionSettings


def resolve(s: Settings, raw=None) -> FunctionalDimensionSettings:
    return s.functional_dimension


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion k / n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _fraction_clean(dims, bound, dead, always):
    """Fraction at the bound among networks with no neuron dead or always active on the points (None if none)."""
    clean = [d for d, a, b in zip(dims, dead, always) if a == 0 and b == 0]
    return float(np.mean(np.array(clean) == bound)) if clean else None


def run(s: FunctionalDimensionSettings, key, ctx) -> Output:
    import jax
    import xarray as xr
    from tqdm.auto import tqdm

    from ..mlp import activation_patterns, init_mlp
    from ..regions import functional_dimension, functional_dimension_bound

    n_ins, depths, factors = list(s.n_in), list(s.depths), list(s.point_factors)
    shape = (len(n_ins), len(depths), len(factors), s.networks)
    dims, dead, always = (np.zeros(shape, np.int64) for _ in range(3))
    bounds, points = np.zeros(shape[:2], np.int64), np.zeros(shape[:3], np.int64)
    cells = [(i, n, j, dep) for i, n in enumerate(n_ins) for j, dep in enumerate(depths)]
    for i, n, j, dep in tqdm(cells, desc="architectures", disable=not ctx.progress, leave=False):
        widths = (n,) * dep + (1,)
        bounds[i, j] = bound = functional_dimension_bound(widths)
        for k in range(s.networks):
            kp, kz = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, 1000 * n + dep), k))
            params = init_mlp(kp, widths, bias_std=s.bias_std)
            for m, f in enumerate(factors):
                points[i, j, m] = p = math.ceil(f * bound)
                z = jax.random.normal(jax.random.fold_in(kz, int(1000 * f)), (p, n))
                dims[i, j, m, k] = functional_dimension(params, z, s.rtol)
                pats = np.asarray(activation_patterns(params, z))
                dead[i, j, m, k] = int(np.sum(~pats.any(0)))
                always[i, j, m, k] = int(np.sum(pats.all(0)))
    net = ("n_in", "depth", "point_factor", "network")
    ds = xr.Dataset(
        {"functional_dimension": (net, dims), "dead_neurons": (net, dead, {"long_name": "never active on the points"}),
         "always_active_neurons": (net, always, {"long_name": "active at every point"}),
         "bound": (("n_in", "depth"), bounds, {"long_name": "parameters minus hidden neurons"}),
         "points": (("n_in", "depth", "point_factor"), points)},
        coords={"n_in": n_ins, "depth": depths, "point_factor": np.asarray(factors, np.float64),
                "network": np.arange(s.networks)},
        attrs={"bias_std": s.bias_std, **({"rtol": s.rtol} if s.rtol is not None else {})})
    rows = _rows(ds)
    metrics = {"cells": rows, "all_at_or_below_bound": all(r["max_dim_le_bound"] for r in rows)}
    return Output(metrics, ds)


def figures(s: FunctionalDimensionSettings, ds) -> dict:
    """functional_dimension.png (:func:`slt_relu.plots.functional_dimension_figure`) of the cells' rows read off
    the results Dataset."""
    from ..plots import functional_dimension_figure

    return {"functional_dimension": functional_dimension_figure(
        _rows(ds), title="Batch functional dimension of He-initialised ReLU networks (n0, .., n0, 1) at Gaussian "
                         "points (Grigsby et al. 2023)")}


def _rows(ds) -> list[dict]:
    """metrics.json's rows of every cell, in the order of the Dataset's axes (the config's)."""
    return [_row(ds, n, dep, f) for n in ds["n_in"].values.tolist() for dep in ds["depth"].values.tolist()
            for f in ds["point_factor"].values.tolist()]


def _row(ds, n: int, dep: int, f: float) -> dict:
    """metrics.json's row of one cell (n0 = n, depth, point factor f), read off the Dataset."""
    cell = ds.sel(n_in=n, depth=dep, point_factor=f)
    d, dead, always = (cell[v].values for v in ("functional_dimension", "dead_neurons", "always_active_neurons"))
    bound = int(cell["bound"])
    at = int(np.sum(d == bound))
    return {"n_in": n, "depth": dep, "widths": [n] * dep + [1], "bound": bound, "point_factor": f,
            "points": int(cell["points"]), "dims": d.tolist(), "deficits": (bound - d).tolist(),
            "mean_dim": float(d.mean()), "fraction_at_bound": at / len(d),
            "fraction_ci95": wilson_interval(at, len(d)), "max_dim_le_bound": bool(d.max() <= bound),
            "mean_dead_neurons": float(np.mean(dead)), "mean_always_active_neurons": float(np.mean(always)),
            "fraction_at_bound_without_dead_or_always_active": _fraction_clean(d, bound, dead, always)}


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    f = s.functional_dimension
    n0, depth = max(f.n_in), max(f.depths)
    P = depth * (n0 * n0 + n0)                       # parameters of depth layers of width n0
    return [Need("functional_dimension.n_in, functional_dimension.depths, functional_dimension.point_factors",
                 f"one network's Jacobian ({P} parameters at {max(f.point_factors):g} x that many points)",
                 max(f.point_factors) * P * P)]


def headline(metrics: dict) -> list[str]:
    """Per architecture the fraction of networks at the functional-dimension bound."""
    lines = [f"never above the bound: {metrics.get('all_at_or_below_bound')}"]
    for c in metrics.get("cells", []):
        lo, hi = c["fraction_ci95"]
        lines.append(f"widths {c['widths']} ({c['points']} points): at the bound {c['fraction_at_bound']:.2f} "
                     f"[{lo:.2f}, {hi:.2f}], mean dimension {c['mean_dim']:.1f} of {c['bound']}")
    return lines


KIND = register_kind(Kind("functional_dimension", Settings, resolve, run, headline,
                          description=first_line(__doc__), memory=memory, figures=figures))
