"""Experiment kind ``network_landscape``: a network's loss landscape around a point, Hessian spectrum and regions.

The network ([network] source, ``slt_relu.kinds.network_landscape_networks``): a two-layer truth's network at the
truth (L_n on data drawn from it), an MLP trained on the 8 x 8 digits (its training cross-entropy), or the toy
model of superposition at a k-gon (its exact loss or L_n).  Around its point w the run computes:

- the loss on the plane w + s u + t v, |s|, |t| <= range (``slt_relu.landscape.slice_2d``), u and v two
  filter-normalised Gaussian directions (Li et al. 2018: each filter rescaled to its weights' norm, biases zero;
  ``random_direction``) or the Hessian's top two eigenvectors (``hessian_directions``), and the loss along each
  direction alone on a finer line (``slice_1d``);
- the Hessian's k largest eigenvalues (Lanczos, ``slt_relu.hessian.top_eigenvalues``), its trace (Hutchinson's
  estimate with its standard error, ``trace``) and its spectral density by stochastic Lanczos quadrature
  (``spectral_density``, smoothed by a Gaussian of width density_sigma x the nodes' span, ``density_on_grid``), as
  PyHessian (Yao et al. 2020); SLQ's nodes also estimate the trace, D (1/P) sum_pj w_pj theta_pj (``slq_trace``,
  Hutchinson's estimate on its own P probes, with their standard error);
- where the network is an MLP of its input (the truth's two-layer network on two inputs, the digits MLP), its exact
  linear regions on a 2-D affine slice of input space through the data (``slt_relu.regions.exact_regions_2d``): the
  input square for the truth, the plane through three training images for the digits.  None for the toy model
  (``network_landscape_networks`` says why).

Outputs: results.nc (one Dataset: ``loss`` over (x, y) with the offsets as coordinates, ``loss_center`` (the loss
at w itself), ``line_loss`` over (direction, t), ``eigenvalue`` over k, ``trace``, ``trace_se``, ``density`` over
``eigenvalue_grid``, SLQ's ``slq_node`` and ``slq_weight`` over (probe, slq_step), the point and the directions
over ``parameter``; with regions ``region_count``, the polygons' vertices ``vertex_s``, ``vertex_t`` and their
``vertex_region`` over ``vertex``, each region's ``region_pattern`` (region, hidden), the input plane and the
anchors' (s, t)), metrics.json (derived from it), landscape.png, hessian_density.png and regions.png (drawn from
it, ``slt_relu.plots.network_landscape``).
"""
from __future__ import annotations

import numpy as np

from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need, truth_size
from .network_landscape_networks import build
from .network_landscape_settings import DENSITY_STEPS, DIGITS_TRAIN, Settings, chunk_points, resolve

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

DENSITY_POINTS = 1001         # the density's grid of eigenvalues
DENSITY_MARGIN = 5.0          # ... past the extreme nodes by this many Gaussian widths
SOURCE_ATTRS = ("truth", "width", "n", "sigma", "steps", "train_loss", "train_accuracy", "test_accuracy", "features",
                "k", "n_positive", "kgon_loss")


def run(r, key, ctx) -> Output:
    import jax
    import jax.numpy as jnp

    from ..hessian import density_on_grid, spectral_density, top_eigenvalues, trace
    from ..landscape import hessian_directions, random_direction, slice_1d, slice_2d
    from ..pytree import unravel_fn

    t = r.settings.landscape
    k_net, k_dirs, k_eig, k_trace, k_slq = jax.random.split(key, 5)
    net = build(r, k_net)
    loss, params, data, k = net.loss_fn, net.params, net.data, t.top_eigenvalues
    if t.directions == "hessian":
        values, vectors = hessian_directions(loss, params, data, max(k, 2), k_dirs)
        eigenvalues, (u, v) = np.asarray(values[:k]), vectors[:2]
    else:
        k_u, k_v = jax.random.split(k_dirs)
        u, v = random_direction(k_u, params), random_direction(k_v, params)
        eigenvalues = np.asarray(top_eigenvalues(loss, params, data, k, k_eig))
    xs = np.linspace(-t.range, t.range, t.resolution)
    ts = np.linspace(-t.range, t.range, t.line_resolution)
    grid = np.asarray(slice_2d(loss, params, data, u, v, xs, xs))
    lines = np.stack([np.asarray(slice_1d(loss, params, data, d, ts)) for d in (u, v)])
    center = float(jax.jit(lambda p, d: loss(p, d))(params, data))
    tr, tr_se = trace(loss, params, data, k_trace, t.trace_samples)
    nodes, weights = spectral_density(loss, params, data, k_slq, t.density_probes, r.density_steps)
    span = max(float(nodes.max() - nodes.min()), 1e-12 * max(1.0, float(np.abs(nodes).max())))
    sigma = t.density_sigma * span
    eig_grid = np.linspace(nodes.min() - DENSITY_MARGIN * sigma, nodes.max() + DENSITY_MARGIN * sigma, DENSITY_POINTS)
    flat = lambda tree: np.asarray(unravel_fn(tree)[0])
    import xarray as xr

    ds = xr.Dataset(
        {"loss": (("x", "y"), grid, {"long_name": net.loss_name}),
         "loss_center": ((), center, {"long_name": "the loss at the point w itself"}),
         "line_loss": (("direction", "t"), lines, {"long_name": f"{net.loss_name} along each direction alone"}),
         "eigenvalue": ("k", eigenvalues, {"long_name": "the Hessian's largest eigenvalues (Lanczos)"}),
         "trace": ((), tr, {"long_name": f"tr H, Hutchinson's estimate ({t.trace_samples} Rademacher probes)"}),
         "trace_se": ((), tr_se, {"long_name": "its standard error"}),
         "density": ("eigenvalue_grid", density_on_grid(nodes, weights, eig_grid, sigma),
                     {"long_name": "spectral density (SLQ, Gaussian-smoothed)", "sigma": sigma}),
         "slq_node": (("probe", "slq_step"), nodes, {"long_name": "SLQ's quadrature nodes theta_pj"}),
         "slq_weight": (("probe", "slq_step"), weights, {"long_name": "SLQ's quadrature weights w_pj"}),
         "point": ("parameter", flat(params), {"long_name": "the point w, flat"}),
         "direction_vector": (("direction", "parameter"), np.stack([flat(u), flat(v)]),
                              {"long_name": "the directions u and v, flat"})},
        coords={"x": ("x", xs, {"long_name": "s (offset along direction u)"}),
                "y": ("y", xs, {"long_name": "t (offset along direction v)"}),
                "t": ("t", ts, {"long_name": "offset along the direction"}), "direction": ["u", "v"],
                "k": np.arange(1, k + 1), "eigenvalue_grid": eig_grid, "probe": np.arange(nodes.shape[0]),
                "slq_step": np.arange(nodes.shape[1]), "parameter": net.model.coordinate_names()},
        attrs={"network": net.description, "source": r.settings.network.source, "directions": t.directions,
               "range": float(t.range), "loss_name": net.loss_name, "dtype": str(jnp.zeros(()).dtype),
               **{name: val for name, val in net.attrs.items() if name in SOURCE_ATTRS}})
    if net.plane is not None:
        ds = with_regions(ds, net)
    return Output(metrics(ds), ds)


def with_regions(ds, net):
    """ds with the exact linear regions of net.mlp on its input plane (module docstring)."""
    from ..regions import exact_regions_2d

    origin, u, v, a, anchors, labels, axes = net.plane
    got = exact_regions_2d(net.mlp, origin, u, v, a)
    vertices = np.concatenate(got.polygons)
    ds = ds.assign_coords(input=np.arange(len(origin)), plane_axis=["s", "t"], region=np.arange(got.count),
                          hidden=np.arange(got.patterns.shape[1]), vertex=np.arange(len(vertices)))
    ds["region_count"] = ((), got.count, {"long_name": "exact linear regions on the input slice", "half_width": a,
                                          "s_label": axes[0], "t_label": axes[1]})
    ds["vertex_s"] = ("vertex", vertices[:, 0], {"long_name": "a region polygon's vertex: s"})
    ds["vertex_t"] = ("vertex", vertices[:, 1], {"long_name": "its t"})
    ds["vertex_region"] = ("vertex", np.repeat(np.arange(got.count), [len(p) for p in got.polygons]),
                           {"long_name": "the region it bounds (its polygon's vertices in order)"})
    ds["region_pattern"] = (("region", "hidden"), got.patterns.astype(np.int8),
                            {"long_name": "each region's activation pattern (1: active)"})
    ds["input_origin"] = ("input", np.asarray(origin, np.float64), {"long_name": "the slice's centre in input space"})
    ds["input_basis"] = (("plane_axis", "input"), np.stack([u, v]).astype(np.float64),
                         {"long_name": "x(s, t) = input_origin + s u + t v"})
    if len(anchors):
        ds = ds.assign_coords(anchor=list(labels))
        ds["anchor_s"] = ("anchor", np.asarray(anchors)[:, 0], {"long_name": "a data point on the slice: s"})
        ds["anchor_t"] = ("anchor", np.asarray(anchors)[:, 1], {"long_name": "its t"})
    return ds


def metrics(ds) -> dict:
    """metrics.json's numbers, read off the results Dataset."""
    Z = ds["loss"].values
    i, j = np.unravel_index(np.argmin(Z), Z.shape)
    per_probe = ds.sizes["parameter"] * np.sum(ds["slq_weight"].values * ds["slq_node"].values, axis=1)
    out = {"network": str(ds.attrs["network"]), "source": str(ds.attrs["source"]), "num_params": ds.sizes["parameter"],
           "directions": str(ds.attrs["directions"]), "range": float(ds.attrs["range"]),
           "loss_at_center": float(ds["loss_center"]), "loss_min_on_grid": float(Z[i, j]),
           "argmin_on_grid": [float(ds["x"][i]), float(ds["y"][j])], "loss_max_on_grid": float(Z.max()),
           "top_eigenvalues": [float(e) for e in ds["eigenvalue"].values], "trace": float(ds["trace"]),
           "trace_se": float(ds["trace_se"]),
           "slq_trace": float(per_probe.mean()),
           "slq_trace_se": float(per_probe.std(ddof=1) / np.sqrt(len(per_probe))) if len(per_probe) > 1 else None}
    for key in SOURCE_ATTRS:
        if key in ds.attrs:
            value = ds.attrs[key]
            out[key] = value.item() if hasattr(value, "item") else value
    if "region_count" in ds:
        out["region_count"] = int(ds["region_count"])
    return out


def figures(r, ds) -> dict:
    """landscape.png, hessian_density.png and (with regions) regions.png, drawn from the results Dataset
    (``slt_relu.plots.network_landscape``)."""
    from ..plots import hessian_density_figure, input_regions_figure, loss_surface_figure

    out = {"landscape": loss_surface_figure(ds), "hessian_density": hessian_density_figure(ds)}
    if "region_count" in ds:
        out["regions"] = input_regions_figure(ds)
    return out


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    net, t = s.network, s.landscape
    if net.source == "truth":
        width, n_in = truth_size(s)
        width = net.width or width
        D, n, per, hidden, keys = width * (n_in + 2) + 1, net.n, n_in + 1, width, "network.n"
    elif net.source == "digits":
        D = sum(b * (a + 1) for a, b in zip(net.widths[:-1], net.widths[1:]))
        n, per, hidden, keys = DIGITS_TRAIN, 65, max(net.widths), "network.widths"
    else:
        empirical = net.loss == "empirical"
        D, hidden, keys = 3 * net.features, net.features, "network.n, network.features"
        n, per = (net.n, net.features) if empirical else (1, 1)
    steps = max(t.density_steps or min(D, DENSITY_STEPS), 2 * t.top_eigenvalues + 20)
    return [Need("landscape.resolution", "the loss on the grid", t.resolution ** 2 + 2 * t.line_resolution),
            Need(keys, "the data set", n * per),
            Need(keys, "one chunk of the slices' forward passes", chunk_points(n, D) * n * hidden),
            Need("landscape.density_steps, landscape.top_eigenvalues", f"a Lanczos basis ({steps} steps of D = {D})",
                 steps * D)]


def headline(metrics: dict) -> list[str]:
    """The loss at the point and on the grid, the Hessian's top eigenvalues and trace, the regions, the training."""
    eig = ", ".join(f"{e:.4g}" for e in metrics["top_eigenvalues"])
    lines = [f"{metrics['network']}: loss {metrics['loss_at_center']:.6g} at the point; on the "
             f"{metrics['directions']} plane (+-{metrics['range']:g}) min {metrics['loss_min_on_grid']:.6g} at "
             f"{[round(v, 4) for v in metrics['argmin_on_grid']]}, max {metrics['loss_max_on_grid']:.4g}",
             f"Hessian: top eigenvalues {eig}; trace {metrics['trace']:.4g} +- {metrics['trace_se']:.2g} (Hutchinson), "
             f"{metrics['slq_trace']:.4g}"
             + (f" +- {metrics['slq_trace_se']:.2g}" if metrics.get("slq_trace_se") else "") + " (SLQ)"]
    if "region_count" in metrics:
        lines.append(f"{metrics['region_count']} exact linear regions on the input slice")
    if "train_accuracy" in metrics:
        lines.append(f"trained: cross-entropy {metrics['train_loss']:.4g}, accuracy {metrics['train_accuracy']:.4f} "
                     f"(training digits), {metrics['test_accuracy']:.4f} (test digits)")
    if "kgon_loss" in metrics:
        lines.append(f"the k-gon's exact population loss {metrics['kgon_loss']:.6g}")
    return lines


KIND = register_kind(Kind("network_landscape", Settings, resolve, run, headline, description=first_line(__doc__),
                          memory=memory, figures=figures))
