"""Experiment kind ``functional_dimension``: batch functional dimension at initialisation (Grigsby et al. 2023).

Architectures (n0, .., n0, 1), He-initialised, at i.i.d. N(0, I) points in R^n0 (as in the
paper).  For every cell: the bound (parameters minus hidden neurons), the functional dimensions,
bound - dimension per network, the fraction at the bound with a 95% Wilson interval, and the mean
numbers of hidden neurons that are dead (never active) or always active on the points (two
mechanisms of hidden symmetries, Grigsby et al. section 6; Petzka et al. Example 2).  Outputs:
functional_dimension.png, metrics.json, arrays.npz.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from ..settings import Section
from .common import Experiment
from .kind import Kind, first_line, register_kind


class FunctionalDimensionSettings(Section):
    n_in: tuple[Annotated[int, Field(ge=1)], ...] = Field((5, 10, 15), min_length=1, description="input "
                                                          "dimensions n0; the hidden widths equal n0")
    depths: tuple[Annotated[int, Field(ge=2)], ...] = Field((2, 3, 4, 5, 6), min_length=1, description="numbers of "
                                                            "weight layers (2 = one hidden layer)")
    networks: int = Field(20, ge=1, le=10000, description="He-initialised networks per (n0, depth)")
    point_factors: tuple[Annotated[float, Field(gt=0)], ...] = Field((1.0, 2.0), min_length=1, description="numbers "
                                                                     "of points as multiples of the bound")
    bias_std: float = Field(0.1, ge=0, description="biases N(0, bias_std^2)")
    rtol: float | None = Field(None, ge=0, description="rank threshold (default max(shape) * eps)")


class Settings(Experiment):
    kind: Literal["functional_dimension"]
    functional_dimension: FunctionalDimensionSettings


def resolve(s: Settings, raw=None) -> dict:
    return s.functional_dimension.model_dump()


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


def run(s: dict, outdir, key, ctx) -> dict:
    import jax
    from tqdm.auto import tqdm

    from ..mlp import activation_patterns, init_mlp
    from ..plots import functional_dimension_figure, save_figure
    from ..regions import functional_dimension, functional_dimension_bound

    cells = [(n, dep) for n in s["n_in"] for dep in s["depths"]]
    rows, arrays = [], {}
    for n, dep in tqdm(cells, desc="architectures", disable=not ctx.progress, leave=False):
        widths = (n,) * dep + (1,)
        bound = functional_dimension_bound(widths)
        dims = {f: [] for f in s["point_factors"]}
        dead = {f: [] for f in s["point_factors"]}
        always = {f: [] for f in s["point_factors"]}
        for k in range(s["networks"]):
            kp, kz = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, 1000 * n + dep), k))
            params = init_mlp(kp, widths, bias_std=s["bias_std"])
            for f in s["point_factors"]:
                p = math.ceil(f * bound)
                z = jax.random.normal(jax.random.fold_in(kz, int(1000 * f)), (p, n))
                dims[f].append(functional_dimension(params, z, s["rtol"]))
                pats = np.asarray(activation_patterns(params, z))
                dead[f].append(int(np.sum(~pats.any(0))))
                always[f].append(int(np.sum(pats.all(0))))
        for f, d in dims.items():
            d = np.array(d)
            at = int(np.sum(d == bound))
            rows.append({"n_in": n, "depth": dep, "widths": list(widths), "bound": bound, "point_factor": f,
                         "points": math.ceil(f * bound), "dims": d.tolist(), "deficits": (bound - d).tolist(),
                         "mean_dim": float(d.mean()), "fraction_at_bound": at / len(d),
                         "fraction_ci95": wilson_interval(at, len(d)), "max_dim_le_bound": bool(d.max() <= bound),
                         "mean_dead_neurons": float(np.mean(dead[f])), "mean_always_active_neurons": float(np.mean(always[f])),
                         "fraction_at_bound_without_dead_or_always_active": _fraction_clean(d, bound, dead[f], always[f])})
            arrays[f"dims_n{n}_depth{dep}_f{f:g}"] = d
    fig = functional_dimension_figure(
        rows, title="Batch functional dimension of He-initialised ReLU networks (n0, .., n0, 1) at Gaussian points "
                    "(Grigsby et al. 2023)")
    save_figure(fig, outdir / "functional_dimension.png")
    np.savez_compressed(outdir / "arrays.npz", **arrays)
    return {"cells": rows, "all_at_or_below_bound": all(r["max_dim_le_bound"] for r in rows)}


def headline(metrics: dict) -> list[str]:
    """Per architecture the fraction of networks at the functional-dimension bound."""
    lines = [f"never above the bound: {metrics.get('all_at_or_below_bound')}"]
    for c in metrics.get("cells", []):
        lo, hi = c["fraction_ci95"]
        lines.append(f"widths {c['widths']} ({c['points']} points): at the bound {c['fraction_at_bound']:.2f} "
                     f"[{lo:.2f}, {hi:.2f}], mean dimension {c['mean_dim']:.1f} of {c['bound']}")
    return lines


KIND = register_kind(Kind("functional_dimension", Settings, resolve, run, headline,
                          description=first_line(__doc__)))
