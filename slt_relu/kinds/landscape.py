"""Experiment kind ``landscape``: K(w) or L_n(w) over a 2-D slice of parameter space (DSLT3).

Outputs: landscape.png (the slice, W0 where the example knows it, the posterior mass across the
valley and the restricted Fisher rank along W0), results.nc (one Dataset: ``loss`` over (x, y), the
axes' values as coordinates; the slice's plane; where W0 is drawn, the loss along it, at the markers,
the valley mass along ``position`` and the Fisher rank along ``fisher_position``), metrics.json
(derived from it).
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from ..fisher import null_accounting
from ..loss import empirical_loss, loss_slice, population_loss, sample_dataset
from ..network import coordinate_index, coordinate_names, from_flat, num_params, to_flat
from ..workflow.settings import SCALE_BOUND, ConfigError, Section
from ..truths import Example
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need, quadrature_points, truth_size, width_keys
from ..workflow.schemas import TruthExperiment, resolve_setup

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)


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
    n_beta: float = Field(100.0, ge=0, le=1e12, description="n beta of the posterior mass across the valley along W0")
    valley_halfwidth: float = Field(0.5, gt=0, le=SCALE_BOUND, description="half-length of the normal segments that mass "
                                    "is integrated over")


class Settings(TruthExperiment):
    kind: Literal["landscape"]
    landscape: LandscapeSettings


class Resolved(NamedTuple):
    """The [landscape] settings with the example, inputs and sigma they run on; axes: the two axis names
    (coordinate names, or "direction 1", "direction 2"); w0_drawable: the axes are the free coordinates
    of an example with a known W0."""

    settings: LandscapeSettings
    example: Example
    inputs: object
    sigma: float
    axes: tuple[str, str]
    w0_drawable: bool


def resolve(s: Settings, raw=None) -> Resolved:
    setup = resolve_setup(s)
    example = setup.example
    t = s.landscape
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
        axes = tuple(a.replace(" ", "") for a in axes)
    else:
        axes = ("direction 1", "direction 2")
    for i, (lo, hi) in enumerate(t.ranges):
        if not lo < hi:
            raise ConfigError(f"landscape.ranges[{i}]: expected [low, high] with low < high, got {[lo, hi]}")
    w0_drawable = (t.mode == "coordinates" and example.true_set is not None
                   and list(axes) == list(example.model.free_names))
    if t.fisher_points and not w0_drawable:
        raise ConfigError(f"landscape.fisher_points: expected 0 unless the axes are the example's free coordinates "
                          f"with a known W0, got {t.fisher_points}")
    return Resolved(t, example, setup.inputs, setup.sigma, axes, w0_drawable)


def _plane(r: Resolved, key):
    """(center TwoLayer, u, v) spanning the slice."""
    ex = r.example
    base = ex.model.base
    D = num_params(base.width, base.n_in)
    if r.settings.mode == "coordinates":
        i, j = (coordinate_index(a, base.width, base.n_in) for a in r.axes)
        center = from_flat(to_flat(base).at[np.array([i, j])].set(0.0), base.width, base.n_in)
        return center, np.eye(D)[i], np.eye(D)[j]
    import jax

    free = np.flatnonzero(ex.model.free)
    g = np.asarray(jax.random.normal(key, (2, free.size)))
    qmat, _ = np.linalg.qr(g.T)
    u, v = np.zeros(D), np.zeros(D)
    u[free], v[free] = qmat[:, 0], qmat[:, 1]
    return base, u, v


def run(r: Resolved, key, ctx) -> Output:
    import jax
    import xarray as xr
    from tqdm.auto import tqdm

    t, ex, inputs, sigma = r.settings, r.example, r.inputs, r.sigma
    key_data, key_dirs = jax.random.split(key)
    if t.loss == "population":
        fn, args = population_loss, (ex.truth, inputs, sigma)
        zlabel = "K(w)"
    else:
        x, y = sample_dataset(key_data, ex.truth, inputs, t.n, sigma)
        fn, args = empirical_loss, (x, y, sigma)
        zlabel = f"L_n(w), n = {t.n}"
    loss = lambda p: fn(p, *args)                     # one point; the slice passes args to one compiled fn
    center, u, v = _plane(r, key_dirs)
    res = t.resolution
    xs = np.linspace(*t.ranges[0], res)
    ys = np.linspace(*t.ranges[1], res)
    block = max(1, 4096 // res)
    rows = []
    for start in tqdm(range(0, res, block), desc="landscape", disable=not ctx.progress, leave=False):
        chunk = xs[start:start + block]
        padded = np.concatenate([chunk, np.full(block - chunk.size, chunk[-1])])
        rows.append(np.asarray(loss_slice(fn, center, u, v, padded, ys, args=args))[: chunk.size])
    Z = np.concatenate(rows)
    base = ex.model.base
    ds = xr.Dataset(
        {"loss": (("x", "y"), Z, {"long_name": zlabel}),
         "plane_origin": ("parameter", np.asarray(to_flat(center))),
         "plane_basis": (("plane_axis", "parameter"), np.stack([u, v]))},
        coords={"x": ("x", xs, {"long_name": r.axes[0]}), "y": ("y", ys, {"long_name": r.axes[1]}),
                "parameter": coordinate_names(base.width, base.n_in), "plane_axis": ["x", "y"]},
        attrs={"truth": ex.name, "loss": t.loss, "mode": t.mode, "axes": list(r.axes), "sigma": float(sigma),
               **({"n": t.n} if t.loss == "empirical" else {})})
    if r.w0_drawable:
        box = tuple(t.ranges)
        curves = ex.true_set(box, 400)
        markers = {k: v for k, v in ex.markers.items()
                   if box[0][0] <= v[0] <= box[0][1] and box[1][0] <= v[1] <= box[1][1]}
        model = ex.model
        ds = ds.assign_coords(free=list(r.axes))
        if curves:
            pts = np.concatenate(curves)
            ds["true_set_loss"] = ("true_set_point", np.asarray(jax.vmap(lambda th: loss(model.embed(th)))(pts)))
            ds["true_set_theta"] = (("true_set_point", "free"), pts)
            ds["true_set_curve"] = ("true_set_point", np.repeat(np.arange(len(curves)), [len(c) for c in curves]))
        if markers:
            ds = ds.assign_coords(marker=list(markers))
            ds["marker_loss"] = ("marker", [float(loss(model.embed(np.asarray(p)))) for p in markers.values()])
            ds["marker_theta"] = (("marker", "free"), np.asarray(list(markers.values()), np.float64))
        if curves:
            ds = _valley_mass(r, loss, curves[0], ds)
        if t.fisher_points and curves:
            ds = _fisher_along(r, curves[0], ds, ctx.progress)
    return Output(_metrics(ds, r.w0_drawable), ds)


def figures(r: Resolved, ds) -> dict:
    """landscape.png (:func:`slt_relu.plots.landscape_figure`) from the results Dataset: the loss over (x, y), W0
    (``true_set_theta`` split by ``true_set_curve``), the markers, the valley mass and the Fisher rank along W0."""
    from ..plots import landscape_figure

    zlabel, along = ds["loss"].attrs["long_name"], []
    curves = ([] if "true_set_theta" not in ds else
              [ds["true_set_theta"].values[ds["true_set_curve"].values == k] for k in np.unique(ds["true_set_curve"])])
    markers = ({} if "marker_theta" not in ds else
               {str(k): tuple(v) for k, v in zip(ds["marker"].values, ds["marker_theta"].values)})
    if "valley_mass" in ds:
        along.append((f"mass across the valley, n*beta = {ds.valley_mass.attrs['n_beta']:g}", ds.position.values,
                      ds.valley_mass.values, "int exp(-n beta L) dt"))
    if "fisher_rank" in ds:
        along.append((f"Fisher rank of the restricted model ({ds.fisher_rank.attrs['num_free']} free)",
                      ds.fisher_position.values, ds.fisher_rank.values.tolist(), "rank"))
    title = f"{r.example.description}\n{zlabel} over ({r.axes[0]}, {r.axes[1]})"
    return {"landscape": landscape_figure(ds.x.values, ds.y.values, ds.loss.values, xlabel=r.axes[0],
                                          ylabel=r.axes[1], title=title, zlabel=zlabel, curves=curves,
                                          markers=markers, along=along)}


def _metrics(ds, w0_drawable: bool) -> dict:
    """metrics.json's numbers, read off the Dataset."""
    Z = ds.loss.values
    imin = np.unravel_index(np.argmin(Z), Z.shape)
    metrics = {
        "truth": ds.attrs["truth"], "loss": ds.attrs["loss"], "axes": list(ds.attrs["axes"]),
        "loss_min_on_grid": float(Z[imin]), "argmin_on_grid": [float(ds.x[imin[0]]), float(ds.y[imin[1]])],
        "loss_max_on_grid": float(Z.max()),
    }
    if not w0_drawable:
        return metrics
    if "true_set_loss" in ds:
        metrics["loss_on_true_set_max"] = float(ds.true_set_loss.values.max())
        metrics["loss_on_true_set_min"] = float(ds.true_set_loss.values.min())
    metrics["loss_at_markers"] = ({str(k): float(v) for k, v in zip(ds.marker.values, ds.marker_loss.values)}
                                  if "marker_loss" in ds else {})
    if "valley_mass" in ds:
        mass = ds.valley_mass
        metrics["valley_mass"] = {"n_beta": mass.attrs["n_beta"], "halfwidth": mass.attrs["halfwidth"],
                                  "position": ds.position.values, "point": ds.valley_theta.values, "mass": mass.values}
        mid = mass.values[mass.size // 2]
        metrics["valley_mass_end_to_middle_ratio"] = [float(mass.values[0] / mid), float(mass.values[-1] / mid)]
    if "fisher_rank" in ds:
        metrics["fisher_along_true_set"] = {
            "num_free": ds.fisher_rank.attrs["num_free"], "position": ds.fisher_position.values,
            "point": ds.fisher_theta.values, "rank": ds.fisher_rank.values.tolist(),
            "generator_rank": ds.fisher_generator_rank.values.tolist(), "excess": ds.fisher_excess.values.tolist(),
        }
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


def _valley_mass(r: Resolved, loss_fn, curve, ds):
    """``ds`` with the posterior mass across the valley at points p(s) along W0 (``valley_mass`` along
    ``position``, the points ``valley_theta``):

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
    h, n_beta = r.settings.valley_halfwidth, r.settings.n_beta
    ts = np.linspace(-h, h, 801)
    thetas = pts[:, None, :] + ts[None, :, None] * normal[:, None, :]
    model = r.example.model
    loss = np.asarray(jax.vmap(jax.vmap(lambda th: loss_fn(model.embed(th))))(thetas))
    floor = float(np.asarray(jax.vmap(lambda th: loss_fn(model.embed(th)))(pts)).min())
    mass = np.exp(-n_beta * (loss - floor)).sum(axis=1) * (ts[1] - ts[0])
    ds = ds.assign_coords(position=("position", pos, {"long_name": "arc length along W0, 0 to 1"}))
    ds["valley_mass"] = ("position", mass, {"long_name": "int exp(-n beta L) dt", "n_beta": n_beta, "halfwidth": h})
    ds["valley_theta"] = (("position", "free"), pts)
    return ds


def _fisher_along(r: Resolved, curve, ds, progress):
    """``ds`` with the restricted model's Fisher rank, generator rank and excess at ``fisher_points`` points
    along W0 (along ``fisher_position``, the points ``fisher_theta``)."""
    from tqdm.auto import tqdm

    ex = r.example
    pts, pos = _pick(curve, r.settings.fisher_points)
    ranks, excess, gens = [], [], []
    for th in tqdm(pts, desc="fisher along W0", disable=not progress, leave=False):
        acc = null_accounting(ex.model.embed(th), r.inputs, r.sigma, free=ex.model.free)
        ranks.append(acc.rank)
        excess.append(acc.excess)
        gens.append(acc.generator_rank)
    ds = ds.assign_coords(fisher_position=("fisher_position", pos, {"long_name": "arc length along W0, 0 to 1"}))
    ds["fisher_rank"] = ("fisher_position", np.asarray(ranks, np.int64), {"num_free": ex.model.num_free})
    ds["fisher_generator_rank"] = ("fisher_position", np.asarray(gens, np.int64))
    ds["fisher_excess"] = ("fisher_position", np.asarray(excess, np.int64))
    ds["fisher_theta"] = (("fisher_position", "free"), pts)
    return ds


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    t = s.landscape
    width, n_in = truth_size(s)
    out = [Need("landscape.resolution" + width_keys(s), "the grid of parameters", t.resolution ** 2 * num_params(width, n_in))]
    if t.loss == "empirical":
        out += [Need("landscape.n", f"the data set of {t.n:.3g} points", t.n * (n_in + 1)),
                Need("landscape.n", "one batch of forward passes over the data", min(256, t.resolution ** 2) * t.n
                     * width)]
    if quadrature_points(s):
        out.append(Need("inputs.cells, inputs.order", "one batch of forward passes over the quadrature points",
                        min(256, t.resolution ** 2) * quadrature_points(s) * width))
    return out


def headline(metrics: dict) -> list[str]:
    """K or L_n on the grid and on W0, the valley's mass ratio, the Fisher rank along W0."""
    lines = [f"{metrics['loss']} loss of {metrics['truth']} over ({', '.join(metrics['axes'])}): min "
             f"{metrics['loss_min_on_grid']:.3g} at {metrics['argmin_on_grid']}, max {metrics['loss_max_on_grid']:.3g}"]
    if "loss_on_true_set_max" in metrics:
        lines.append(f"on W0: max {metrics['loss_on_true_set_max']:.3g}")
    if "valley_mass_end_to_middle_ratio" in metrics:
        first, last = metrics["valley_mass_end_to_middle_ratio"]
        lines.append(f"mass across the valley, end / middle: first end {first:.4f}, last end {last:.4f}")
    fa = metrics.get("fisher_along_true_set")
    if fa:
        lines.append(f"Fisher rank along W0: {sorted(set(fa['rank']))} of {fa['num_free']} (excess "
                     f"{sorted(set(fa['excess']))})")
    return lines


KIND = register_kind(Kind("landscape", Settings, resolve, run, headline,
                          description=first_line(__doc__), memory=memory, figures=figures))
