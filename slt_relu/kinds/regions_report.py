"""The regions kind's results Dataset and its figures (``slt_relu.kinds.regions_kind``): the run's numbers and
the networks' parameters in one Dataset (:func:`dataset`), every figure drawn from it as read back from results.nc
(:func:`figures`), the pictures on the grid computed again from the parameters as the run computes them
(:func:`grid_data`, ``slt_relu.mlp.dual_points``)."""
from __future__ import annotations

import numpy as np

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

XOR_TITLE = ("Sattelberg's XOR network relu(x+y+1) - 2 relu(x+y) - 1: three regions, the fourth pattern (0, 1) is "
             "empty")
LAYERS_TITLE = ("Sattelberg Fig. 5: zero sets layer by layer (earlier layers in grey); each layer bends only where it "
                "meets an earlier boundary")


def _attrs(prefix: str, section: dict) -> dict:
    """A metrics section's scalar numbers and strings as attributes PREFIX_KEY (bools as 0 / 1)."""
    out = {}
    for k, v in section.items():
        if hasattr(v, "item") and np.ndim(v) == 0:
            v = v.item()
        if isinstance(v, (bool, int, float, str)):
            out[f"{prefix}_{k}"] = int(v) if isinstance(v, bool) else v
    return out


def grid_data(params, half_width: float, resolution: int) -> tuple:
    """A network on the picture grid (``slt_relu.regions.box_grid``, x varying fastest), as the run and the
    figures both compute it: (points (R * R, 2), pre-activations per hidden layer [(R, R, n_l)], activation
    patterns (R, R, H) bool, output (R, R))."""
    import jax.numpy as jnp

    from ..mlp import activation_patterns, mlp_forward, preactivations
    from ..regions import box_grid

    pts = jnp.asarray(box_grid(half_width, resolution))
    shape = (resolution, resolution)
    pre = [np.asarray(z).reshape(shape + (-1,)) for z in preactivations(params, pts)]
    pats = np.asarray(activation_patterns(params, pts)).reshape(shape + (-1,))
    vals = np.asarray(mlp_forward(params, pts))[:, 0].reshape(shape)
    return pts, pre, pats, vals


def _network_data(prefix: str, params) -> dict:
    """A network's parameters as variables PREFIX_Wl (PREFIX_hiddenl, PREFIX_hidden(l-1)) and PREFIX_bl
    (PREFIX_hiddenl,), l = 1..L (layer 1 reads dimension ``input``, layer L writes PREFIX_out)."""
    depth = len(params.layers)
    dims = ["input"] + [f"{prefix}_hidden{l}" for l in range(1, depth)] + [f"{prefix}_out"]
    data = {}
    for l, layer in enumerate(params.layers, 1):
        data[f"{prefix}_W{l}"] = ((dims[l], dims[l - 1]), np.asarray(layer.w),
                                  {"long_name": f"weights W_{l} of layer {l}, z_{l} = W_{l} h_{l - 1} + b_{l}"})
        data[f"{prefix}_b{l}"] = ((dims[l],), np.asarray(layer.b), {"long_name": f"biases b_{l} of layer {l}"})
    return data


def network(ds, prefix: str):
    """The MLP stored as PREFIX_W1, PREFIX_b1, ... in the Dataset (:func:`dataset`); KeyError if it has none."""
    import jax.numpy as jnp

    from ..mlp import MLP, Dense

    layers = []
    while not layers or f"{prefix}_W{len(layers) + 1}" in ds:
        l = len(layers) + 1
        layers.append(Dense(jnp.asarray(ds[f"{prefix}_W{l}"].values), jnp.asarray(ds[f"{prefix}_b{l}"].values)))
    return MLP(tuple(layers))


def dataset(metrics: dict, s, corners, networks: dict, pictures: dict):
    """The run's numbers as one Dataset (the kind's module docstring).

    Args:
        metrics: the run's metrics (sections xor, xor_affine_map, annulus, lines).
        s: the kind's settings (``RegionsSettings``).
        corners: (4, 2) the XOR corners.
        networks: {prefix: MLP}: the XOR, wide and annulus networks, stored by their parameters (the figures
            compute their pictures on the grid again, :func:`grid_data`).
        pictures: the other arrays the figures draw: ``xor_label`` (4,), ``annulus_sample_point`` (S, 2) and
            ``annulus_sample_label`` (S,).
    """
    import xarray as xr

    R, a = s.resolution, s.half_width
    grid = np.linspace(-a, a, R)              # slt_relu.regions.box_grid: x varies fastest
    terms = ["x", "y", "1"]
    x, wide, ann, ln = metrics["xor"], metrics["xor_affine_map"], metrics["annulus"], metrics["lines"]
    data = {}
    for prefix, params in networks.items():
        data |= _network_data(prefix, params)
    coords = {"x": grid, "y": grid, "term": terms, "wide_term": terms, "corner_x": ("corner", corners[:, 0]),
              "corner_y": ("corner", corners[:, 1]), "lines_width": list(s.lines.widths),
              "layer": np.arange(1, len(ann["neurons_with_a_zero_set_in_box"]) + 1), "input": ["x", "y"]}
    data |= {
        "xor_dual_points": (("xor_dual_point", "term"), np.asarray(x["dual_points"])),
        "xor_at_corner": ("corner", np.asarray(x["values_at_corners"])),
        "xor_label": ("corner", np.asarray(pictures["xor_label"]), {"long_name": "the XOR label of the corner"}),
        "affine_map": (("term", "wide_term"), np.asarray(wide["M"]),
                       {"long_name": "M with C_xor M ~= C_wide (rows: the XOR network's dual coordinates)"}),
        "annulus_sample_point": (("annulus_sample", "input"), pictures["annulus_sample_point"],
                                 {"long_name": "the first training points of the annulus network"}),
        "annulus_sample_label": ("annulus_sample", pictures["annulus_sample_label"],
                                 {"long_name": "their labels (1: inner disc, -1: annulus)"}),
        "annulus_neurons_with_a_zero_set_in_box": ("layer", np.asarray(ann["neurons_with_a_zero_set_in_box"])),
        "lines_neurons": ("lines_width", np.asarray(ln["neurons"])),
        "lines_mean_regions": ("lines_width", np.asarray(ln["mean_regions"])),
        "lines_se": ("lines_width", np.asarray(ln["se"])),
        "lines_regions_per_neuron": ("lines_width", np.asarray(ln["regions_per_neuron"])),
    }
    if x["clusters"]:
        coords["clusters"] = [int(k) for k in x["clusters"]]
        data["xor_cluster_rms_error"] = ("clusters", [float(v["rms_error"]) for v in x["clusters"].values()])
        data["xor_cluster_sign_agreement"] = ("clusters", [float(v["sign_agreement"]) for v in x["clusters"].values()])
    attrs = {**_attrs("xor", x), "xor_patterns_seen": list(x["patterns_seen"]), **_attrs("xor_affine_map", wide),
             **_attrs("annulus", ann), "annulus_widths": list(ann["widths"]), **_attrs("lines", ln)}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _pictures(ds, prefix: str) -> tuple:
    """A stored network on the grid of coordinates x, y (:func:`grid_data`): (patterns (R, R, H) bool,
    output (R, R), pre-activations per hidden layer [(R, R, n_l)], dual points (R * R, 3))."""
    from ..mlp import dual_points

    params = network(ds, prefix)
    pts, pre, patterns, output = grid_data(params, float(ds["x"].values[-1]), ds.sizes["x"])
    return patterns, output, pre, np.asarray(dual_points(params, pts))


def figures(s, ds) -> dict:
    """xor_regions, xor_affine_map, annulus_regions, annulus_layers and lines (``slt_relu.plots.regions``), drawn
    from the results Dataset (:func:`dataset`) and the settings ``s`` (``RegionsSettings``: the titles)."""
    from ..plots import affine_map_figure, layer_boundaries_figure, lines_figure, regions_figure

    grid = np.stack(np.meshgrid(ds["x"].values, ds["y"].values), -1)          # (R, R, 2), x varying fastest
    xor, wide = _pictures(ds, "xor"), _pictures(ds, "wide")
    C, M = xor[3], ds["affine_map"].values
    mapped = np.sum((C @ M) * np.concatenate([grid.reshape(-1, 2), np.ones((len(C), 1))], 1), 1)
    corners = np.stack([ds["corner_x"].values, ds["corner_y"].values], 1)
    has_k = "clusters" in ds.coords
    ks = [int(k) for k in ds["clusters"].values] if has_k else []
    rms = [float(v) for v in ds["xor_cluster_rms_error"].values] if has_k else []
    out = {"xor_regions": regions_figure(
        grid, *xor, title=XOR_TITLE, points=(corners, ds["xor_label"].values),
        extra=("k-means on the dual points: rebuilt f", ks, rms, "clusters k", "rms error of the rebuilt f"))}
    out["xor_affine_map"] = affine_map_figure(grid, wide[3], C @ M, wide[1], mapped.reshape(grid.shape[:2]),
                                              resid=float(ds.attrs["xor_affine_map_relative_residual"]))
    patterns, output, layers, dual = _pictures(ds, "annulus")
    out["annulus_regions"] = regions_figure(
        grid, patterns, output, layers, dual,
        title=f"circle vs annulus, widths {s.annulus.widths} trained with Adam: regions, f, dual points",
        points=(ds["annulus_sample_point"].values, ds["annulus_sample_label"].values))
    out["annulus_layers"] = layer_boundaries_figure(grid, layers, output, title=LAYERS_TITLE)
    ln = s.lines
    out["lines"] = lines_figure(ds["lines_neurons"].values, ds["lines_mean_regions"].values, ds["lines_se"].values,
                                float(ds.attrs["lines_slope_per_neuron"]),
                                title=f"regions along random segments of length {ln.length} (n_in = {ln.n_in}, "
                                      f"{ln.hidden_layers} hidden layers, He weights): about linear in N")
    return out
