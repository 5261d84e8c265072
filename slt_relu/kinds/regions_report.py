"""The regions kind's results Dataset and its figures (``slt_relu.kinds.regions_kind``): the run's numbers and
the pictures' grids in one Dataset (:func:`dataset`), every figure drawn from it as read back from results.nc
(:func:`figures`)."""
from __future__ import annotations

import numpy as np

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


def _network_grid(prefix: str, pre: list, patterns, values) -> tuple[dict, dict]:
    """A network's pictures on the grid: its hidden neurons' pre-activations and activation patterns along
    PREFIX_neuron (coordinate PREFIX_neuron_layer: the neuron's hidden layer, from 1), its output; (data, coords)."""
    neuron, yx = f"{prefix}_neuron", ("y", "x")
    layer = np.concatenate([np.full(p.shape[-1], l + 1) for l, p in enumerate(pre)])
    data = {f"{prefix}_preactivation": (yx + (neuron,), np.concatenate(pre, -1),
                                        {"long_name": "pre-activation z_l of each hidden neuron on the picture grid"}),
            f"{prefix}_pattern": (yx + (neuron,), np.asarray(patterns, bool),
                                  {"long_name": "activation pattern z_l > 0 of each hidden neuron"}),
            f"{prefix}_output": (yx, np.asarray(values), {"long_name": "the network's output f on the picture grid"})}
    return data, {f"{neuron}_layer": (neuron, layer)}


def dataset(metrics: dict, s, corners, duals: dict, grids: dict, pictures: dict):
    """The run's numbers as one Dataset (the kind's module docstring).

    Args:
        metrics: the run's metrics (sections xor, xor_affine_map, annulus, lines).
        s: the kind's settings (``RegionsSettings``).
        corners: (4, 2) the XOR corners.
        duals: {name: (R * R, 3) dual points on the grid}.
        grids: {prefix: (pre-activations per hidden layer (R, R, n_l), patterns (R, R, H), output (R, R))}.
        pictures: the other arrays the figures draw: ``xor_label`` (4,), ``wide_output`` and ``xor_mapped_output``
            (R, R), ``annulus_sample_point`` (S, 2) and ``annulus_sample_label`` (S,).
    """
    import xarray as xr

    R, a = s.resolution, s.half_width
    grid = np.linspace(-a, a, R)              # slt_relu.regions.box_grid: x varies fastest
    terms = ["x", "y", "1"]
    x, wide, ann, ln = metrics["xor"], metrics["xor_affine_map"], metrics["annulus"], metrics["lines"]
    data = {name: (("y", "x", "term"), np.asarray(C).reshape(R, R, -1),
                   {"long_name": "dual point [w, b] of the local affine map f = w . (x, y) + b"})
            for name, C in duals.items()}
    coords = {"x": grid, "y": grid, "term": terms, "wide_term": terms, "corner_x": ("corner", corners[:, 0]),
              "corner_y": ("corner", corners[:, 1]), "lines_width": list(s.lines.widths),
              "layer": np.arange(1, len(ann["neurons_with_a_zero_set_in_box"]) + 1), "input": ["x", "y"]}
    for prefix, (pre, patterns, values) in grids.items():
        more, more_coords = _network_grid(prefix, pre, patterns, values)
        data |= more
        coords |= more_coords
    data |= {
        "xor_dual_points": (("xor_dual_point", "term"), np.asarray(x["dual_points"])),
        "xor_at_corner": ("corner", np.asarray(x["values_at_corners"])),
        "xor_label": ("corner", np.asarray(pictures["xor_label"]), {"long_name": "the XOR label of the corner"}),
        "affine_map": (("term", "wide_term"), np.asarray(wide["M"]),
                       {"long_name": "M with C_xor M ~= C_wide (rows: the XOR network's dual coordinates)"}),
        "wide_output": (("y", "x"), pictures["wide_output"],
                        {"long_name": "the wide network's output f on the picture grid"}),
        "xor_mapped_output": (("y", "x"), pictures["xor_mapped_output"],
                              {"long_name": "the XOR network's local affine maps mapped by M, (C M) . (x, y, 1)"}),
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
    """(patterns (R, R, H) bool, output (R, R), pre-activations per hidden layer [(R, R, n_l)]) of a network."""
    pre, layer = ds[f"{prefix}_preactivation"].values, ds[f"{prefix}_neuron_layer"].values
    layers = [pre[..., layer == l] for l in np.unique(layer)]
    return ds[f"{prefix}_pattern"].values.astype(bool), ds[f"{prefix}_output"].values, layers


def figures(s, ds) -> dict:
    """xor_regions, xor_affine_map, annulus_regions, annulus_layers and lines (``slt_relu.plots.regions``), drawn
    from the results Dataset (:func:`dataset`) and the settings ``s`` (``RegionsSettings``: the titles)."""
    from ..plots import affine_map_figure, layer_boundaries_figure, lines_figure, regions_figure

    grid = np.stack(np.meshgrid(ds["x"].values, ds["y"].values), -1)          # (R, R, 2), x varying fastest
    dual = lambda name: ds[name].values.reshape(-1, 3)
    corners = np.stack([ds["corner_x"].values, ds["corner_y"].values], 1)
    has_k = "clusters" in ds.coords
    ks = [int(k) for k in ds["clusters"].values] if has_k else []
    rms = [float(v) for v in ds["xor_cluster_rms_error"].values] if has_k else []
    out = {"xor_regions": regions_figure(
        grid, *_pictures(ds, "xor"), dual("xor_dual"), title=XOR_TITLE, points=(corners, ds["xor_label"].values),
        extra=("k-means on the dual points: rebuilt f", ks, rms, "clusters k", "rms error of the rebuilt f"))}
    out["xor_affine_map"] = affine_map_figure(dual("xor_dual") @ ds["affine_map"].values, dual("wide_dual"),
                                              ds["xor_mapped_output"].values, ds["wide_output"].values, grid,
                                              float(ds.attrs["xor_affine_map_relative_residual"]))
    patterns, output, layers = _pictures(ds, "annulus")
    out["annulus_regions"] = regions_figure(
        grid, patterns, output, layers, dual("annulus_dual"),
        title=f"circle vs annulus, widths {s.annulus.widths} trained with Adam: regions, f, dual points",
        points=(ds["annulus_sample_point"].values, ds["annulus_sample_label"].values))
    out["annulus_layers"] = layer_boundaries_figure(grid, layers, output, title=LAYERS_TITLE)
    ln = s.lines
    out["lines"] = lines_figure(ds["lines_neurons"].values, ds["lines_mean_regions"].values, ds["lines_se"].values,
                                float(ds.attrs["lines_slope_per_neuron"]),
                                title=f"regions along random segments of length {ln.length} (n_in = {ln.n_in}, "
                                      f"{ln.hidden_layers} hidden layers, He weights): about linear in N")
    return out
