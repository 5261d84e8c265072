"""Experiment kind ``landscape``: K(w) or L_n(w) over a 2-D slice of parameter space (DSLT3).

Outputs: landscape.png (the slice, W0 where the example knows it, the posterior mass across the
valley and the restricted Fisher rank along W0), arrays.npz (xs, ys, loss), metrics.json.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ..config import ConfigError
from ..fisher import null_accounting
from ..loss import empirical_loss, loss_slice, population_loss, sample_dataset
from ..network import coordinate_index, from_flat, num_params, to_flat
from ..plots import landscape_figure, save_figure
from ..settings import Section
from .common import TruthExperiment, resolve_setup
from .kind import Kind, first_line, register_kind


class LandscapeSettings(Section):
    loss: Literal["population", "empirical"] = Field("population", description="K(w), or L_n(w) on a data set of size n")
    n: int = Field(1000, ge=1, description="data set size for loss = \"empirical\"")
    mode: Literal["coordinates", "directions"] = Field(
        "coordinates", description="two named coordinates (the rest at the model's base), or two random orthonormal "
        "directions in the free coordinates through the base")
    axes: tuple[str, str] | None = Field(None, description="two coordinate names, e.g. [\"w[0,0]\", \"q[0]\"] "
                                         "(default: the example's two free ones)")
    ranges: tuple[tuple[float, float], tuple[float, float]] = Field(
        description="[[x0, x1], [y0, y1]]: coordinate values (or offsets along the directions)")
    resolution: int = Field(201, ge=3, le=4001, description="grid points per axis")
    fisher_points: int = Field(0, ge=0, le=2000, description="points along W0 where the restricted model's Fisher "
                               "rank is computed")
    n_beta: float = Field(100.0, ge=0, description="n beta of the posterior mass across the valley along W0")
    valley_halfwidth: float = Field(0.5, gt=0, description="half-length of the normal segments that mass "
                                    "is integrated over")


class Settings(TruthExperiment):
    kind: Literal["landscape"]
    landscape: LandscapeSettings


def resolve(s: Settings, raw=None) -> dict:
    setup = resolve_setup(s)
    example = setup.example
    t = s.landscape
    out = {**t.model_dump(), "example": example, "inputs": setup.inputs, "sigma": setup.sigma}
    base = example.model.base
    if t.mode == "coordinates":
        axes = t.axes or (tuple(example.model.free_names) if example.model.num_free == 2 else None)
        if axes is None:
            raise ConfigError("landscape.axes: missing; expected two coordinate names like \"w[0,0]\", \"q[0]\"")
        try:
            idx = [coordinate_index(a, base.width, base.n_in) for a in axes]
        except ValueError as err:
            raise ConfigError(f"landscape.axes: {err}") from None
        if idx[0] == idx[1]:
            raise ConfigError(f"landscape.axes: expected two different coordinates, got {list(axes)}")
        out["axes"] = [a.replace(" ", "") for a in axes]
    else:
        out["axes"] = ["direction 1", "direction 2"]
    for i, (lo, hi) in enumerate(t.ranges):
        if not lo < hi:
            raise ConfigError(f"landscape.ranges[{i}]: expected [low, high] with low < high, got {[lo, hi]}")
    out["w0_drawable"] = (t.mode == "coordinates" and example.true_set is not None
                          and out["axes"] == example.model.free_names)
    if t.fisher_points and not out["w0_drawable"]:
        raise ConfigError(f"landscape.fisher_points: expected 0 unless the axes are the example's free coordinates "
                          f"with a known W0, got {t.fisher_points}")
    return out


def _plane(s, key):
    """(center TwoLayer, u, v) spanning the slice."""
    ex = s["example"]
    base = ex.model.base
    D = num_params(base.width, base.n_in)
    if s["mode"] == "coordinates":
        i, j = (coordinate_index(a, base.width, base.n_in) for a in s["axes"])
        center = from_flat(to_flat(base).at[np.array([i, j])].set(0.0), base.width, base.n_in)
        return center, np.eye(D)[i], np.eye(D)[j]
    import jax

    free = np.flatnonzero(ex.model.free)
    g = np.asarray(jax.random.normal(key, (2, free.size)))
    qmat, _ = np.linalg.qr(g.T)
    u, v = np.zeros(D), np.zeros(D)
    u[free], v[free] = qmat[:, 0], qmat[:, 1]
    return base, u, v


def run(s: dict, outdir, key, ctx) -> dict:
    import jax
    from tqdm.auto import tqdm

    ex, inputs, sigma = s["example"], s["inputs"], s["sigma"]
    key_data, key_dirs = jax.random.split(key)
    if s["loss"] == "population":
        fn, args = population_loss, (ex.truth, inputs, sigma)
        zlabel = "K(w)"
    else:
        x, y = sample_dataset(key_data, ex.truth, inputs, s["n"], sigma)
        fn, args = empirical_loss, (x, y, sigma)
        zlabel = f"L_n(w), n = {s['n']}"
    loss = lambda p: fn(p, *args)                     # one point; the slice passes args to one compiled fn
    center, u, v = _plane(s, key_dirs)
    res = s["resolution"]
    xs = np.linspace(*s["ranges"][0], res)
    ys = np.linspace(*s["ranges"][1], res)
    block = max(1, 4096 // res)
    rows = []
    for start in tqdm(range(0, res, block), desc="landscape", disable=not ctx.progress, leave=False):
        chunk = xs[start:start + block]
        padded = np.concatenate([chunk, np.full(block - chunk.size, chunk[-1])])
        rows.append(np.asarray(loss_slice(fn, center, u, v, padded, ys, args=args))[: chunk.size])
    Z = np.concatenate(rows)
    np.savez_compressed(outdir / "arrays.npz", xs=xs, ys=ys, loss=Z)

    imin = np.unravel_index(np.argmin(Z), Z.shape)
    metrics = {
        "truth": ex.name, "loss": s["loss"], "axes": s["axes"],
        "loss_min_on_grid": float(Z[imin]), "argmin_on_grid": [float(xs[imin[0]]), float(ys[imin[1]])],
        "loss_max_on_grid": float(Z.max()),
    }
    curves, markers, along = [], {}, []
    if s["w0_drawable"]:
        box = tuple(s["ranges"])
        curves = ex.true_set(box, 400)
        markers = {k: v for k, v in ex.markers.items()
                   if box[0][0] <= v[0] <= box[0][1] and box[1][0] <= v[1] <= box[1][1]}
        model = ex.model
        if curves:
            pts = np.concatenate(curves)
            losses = np.asarray(jax.vmap(lambda th: loss(model.embed(th)))(pts))
            metrics["loss_on_true_set_max"] = float(losses.max())
            metrics["loss_on_true_set_min"] = float(losses.min())
        metrics["loss_at_markers"] = {k: float(loss(model.embed(np.asarray(p)))) for k, p in markers.items()}
        if curves:
            along += _valley_mass(s, loss, curves[0], metrics)
        if s["fisher_points"] and curves:
            along += _fisher_along(s, curves[0], metrics, ctx.progress)
    title = f"{ex.description}\n{zlabel} over ({s['axes'][0]}, {s['axes'][1]})"
    fig = landscape_figure(xs, ys, Z, xlabel=s["axes"][0], ylabel=s["axes"][1], title=title,
                           zlabel=zlabel, curves=curves, markers=markers, along=along)
    save_figure(fig, outdir / "landscape.png")
    return metrics


def _arc_positions(curve):
    seg = np.linalg.norm(np.diff(curve, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(seg)])
    return arc / max(arc[-1], 1e-300)


def _pick(curve, count):
    pos = _arc_positions(curve)
    targets = np.linspace(0, 1, count)
    idx = np.clip(np.searchsorted(pos, targets), 0, len(curve) - 1)
    return curve[idx], pos[idx]


def _valley_mass(s, loss_fn, curve, metrics):
    """Posterior mass across the valley at points p(s) along W0:

        m(s) = int exp(-n_beta L(p(s) + t n(s))) dt,   |t| <= valley_halfwidth,

    n(s) the unit normal to W0 in the slice.  A wider bowl at p(s) means a larger m(s):
    for Example 3.4, m(end) / m(middle) = 1/2 + 1/sqrt(2) ~= 1.207 as n_beta -> infinity
    (K = 4 t^2 on one side of the degenerate end and 2 t^2 on the other, 4 t^2 in the middle).
    """
    import jax

    pts, pos = _pick(curve, 41)
    tangent = np.gradient(curve, axis=0)[np.searchsorted(_arc_positions(curve), pos).clip(0, len(curve) - 1)]
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], 1)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    h = s["valley_halfwidth"]
    ts = np.linspace(-h, h, 801)
    thetas = pts[:, None, :] + ts[None, :, None] * normal[:, None, :]
    model = s["example"].model
    loss = np.asarray(jax.vmap(jax.vmap(lambda th: loss_fn(model.embed(th))))(thetas))
    floor = float(np.asarray(jax.vmap(lambda th: loss_fn(model.embed(th)))(pts)).min())
    mass = np.exp(-s["n_beta"] * (loss - floor)).sum(axis=1) * (ts[1] - ts[0])
    metrics["valley_mass"] = {"n_beta": s["n_beta"], "halfwidth": h, "position": pos, "point": pts, "mass": mass}
    mid = mass[len(mass) // 2]
    metrics["valley_mass_end_to_middle_ratio"] = [float(mass[0] / mid), float(mass[-1] / mid)]
    return [(f"mass across the valley, n*beta = {s['n_beta']:g}", pos, mass, "int exp(-n beta L) dt")]


def _fisher_along(s, curve, metrics, progress):
    from tqdm.auto import tqdm

    ex, inputs, sigma = s["example"], s["inputs"], s["sigma"]
    pts, pos = _pick(curve, s["fisher_points"])
    ranks, excess, gens = [], [], []
    for th in tqdm(pts, desc="fisher along W0", disable=not progress, leave=False):
        acc = null_accounting(ex.model.embed(th), inputs, sigma, free=ex.model.free)
        ranks.append(acc.rank)
        excess.append(acc.excess)
        gens.append(acc.generator_rank)
    metrics["fisher_along_true_set"] = {
        "num_free": ex.model.num_free, "position": pos, "point": pts, "rank": ranks,
        "generator_rank": gens, "excess": excess,
    }
    return [(f"Fisher rank of the restricted model ({ex.model.num_free} free)", pos, ranks, "rank")]


def headline(metrics: dict) -> list[str]:
    """K or L_n on the grid and on W0, the valley's mass ratio, the Fisher rank along W0."""
    lines = [f"{metrics['loss']} loss of {metrics['truth']} over ({', '.join(metrics['axes'])}): min "
             f"{metrics['loss_min_on_grid']:.3g} at {metrics['argmin_on_grid']}, max {metrics['loss_max_on_grid']:.3g}"]
    if "loss_on_true_set_max" in metrics:
        lines.append(f"on W0: max {metrics['loss_on_true_set_max']:.3g}")
    if "valley_mass_end_to_middle_ratio" in metrics:
        lines.append("mass across the valley, end / middle: "
                     + ", ".join(f"{v:.4f}" for v in metrics["valley_mass_end_to_middle_ratio"]))
    fa = metrics.get("fisher_along_true_set")
    if fa:
        lines.append(f"Fisher rank along W0: {sorted(set(fa['rank']))} of {fa['num_free']} (excess "
                     f"{sorted(set(fa['excess']))})")
    return lines


KIND = register_kind(Kind("landscape", Settings, resolve, run, headline,
                          description=first_line(__doc__)))
