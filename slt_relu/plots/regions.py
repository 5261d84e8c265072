"""Linear regions and functional dimension (Sattelberg et al. 2020; Grigsby et al. 2023): regions by
activation pattern, zero sets layer by layer, dual points and the affine map between two networks,
regions along lines, functional dimension against depth."""
from __future__ import annotations

import textwrap

import matplotlib
import numpy as np
from matplotlib.ticker import FixedLocator, MaxNLocator

from ._style import figure_axes, figure_legend, legend_right, new_figure, subplots, suptitle, wrap

__all__ = ["affine_map_figure", "functional_dimension_figure", "layer_boundaries_figure", "lines_figure",
           "regions_figure"]


def _pattern_colours(patterns: np.ndarray) -> np.ndarray:
    """A colour index per point from its activation pattern (N, H) bool (distinct patterns, distinct ids)."""
    from ..regions import distinct_patterns

    return distinct_patterns(patterns)[1]


def regions_figure(grid, patterns, values, layer_pre, dual, *, title: str, points=None, extra=None):
    """Sattelberg-style pictures on a 2-D grid: regions coloured by activation pattern with every
    hidden neuron's zero set (one colour per layer), the network's output with its zero set, and the
    dual points (w_x, w_y; colour b).  extra: optional (title, xs, ys, xlabel, ylabel) line panel.

    grid: (R, R, 2); patterns: (R, R, H) bool; values: (R, R); layer_pre: list of (R, R, n_l)
    pre-activations; dual: (P, 3)."""
    panels = 3 + (extra is not None)
    fig = new_figure((4.6 * panels, 4.5))
    xs, ys = grid[0, :, 0], grid[:, 0, 1]
    ax = fig.add_subplot(1, panels, 1)
    ids = _pattern_colours(patterns.reshape(-1, patterns.shape[-1])).reshape(values.shape)
    ax.pcolormesh(xs, ys, ids % 20, cmap="tab20", shading="auto", vmin=0, vmax=19)
    layer_colors = ["k", "crimson", "darkgreen", "purple", "darkorange"]
    for l, pre in enumerate(layer_pre):
        for k in range(pre.shape[-1]):
            z = pre[..., k]
            if z.min() < 0 < z.max():
                ax.contour(xs, ys, z, levels=[0.0], colors=[layer_colors[l % len(layer_colors)]], linewidths=1.0)
    if points is not None:
        ax.scatter(points[0][:, 0], points[0][:, 1], c=points[1], cmap="bwr", s=10, edgecolors="k", linewidths=0.3)
    ax.set_title(f"{len(np.unique(ids))} activation regions on the grid\n(colour = pattern; lines = neuron zero sets,"
                 "\none colour per layer)", fontsize=8)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_aspect("equal")
    ax = fig.add_subplot(1, panels, 2)
    top = max(float(np.abs(values).max()), 1e-12)
    im = ax.pcolormesh(xs, ys, values, cmap="RdBu_r", shading="auto", vmin=-top, vmax=top)
    if values.min() < 0 < values.max():
        ax.contour(xs, ys, values, levels=[0.0], colors="k", linewidths=1.5)
    fig.colorbar(im, ax=ax, shrink=0.8)
    ax.set_title("f(x) (red > 0 > blue) and its zero set", fontsize=9)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_aspect("equal")
    ax = fig.add_subplot(1, panels, 3, projection="3d")
    ax.scatter(dual[:, 0], dual[:, 1], dual[:, 2], c=dual[:, 2], cmap="viridis", s=6)
    ax.set_xlabel("w_x")
    ax.set_ylabel("w_y")
    ax.set_zlabel("b")
    ax.set_title(f"dual points (W_i, b_i): {len(np.unique(np.round(dual, 9), axis=0))} distinct", fontsize=9)
    ax.zaxis.labelpad = 2
    if extra is not None:
        etitle, ex, ey, exl, eyl = extra
        ax = fig.add_subplot(1, panels, 4)
        ax.plot(ex, ey, "o-")
        ax.set_xlabel(exl)
        ax.set_ylabel(eyl)
        ax.set_title(wrap(etitle, 4.0, 9), fontsize=9)
        ax.grid(alpha=0.3)
    return suptitle(fig, title)


def layer_boundaries_figure(grid, layer_pre, output, *, title: str):
    """Sattelberg's Figure 5: for each layer the zero sets of its neurons in the input plane (one
    colour per neuron), earlier layers' zero sets in grey; the last panel is the output's zero set."""
    xs, ys = grid[0, :, 0], grid[:, 0, 1]
    stages = list(layer_pre) + [output[..., None]]
    fig, axes = subplots(1, len(stages), figsize=(3.6 * len(stages), 4.0), squeeze=False, sharex=True, sharey=True)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for s, (ax, pre) in enumerate(zip(axes[0], stages)):
        for earlier in stages[:s]:
            for k in range(earlier.shape[-1]):
                z = earlier[..., k]
                if z.min() < 0 < z.max():
                    ax.contour(xs, ys, z, levels=[0.0], colors="0.8", linewidths=0.7)
        for k in range(pre.shape[-1]):
            z = pre[..., k]
            if z.min() < 0 < z.max():
                ax.contour(xs, ys, z, levels=[0.0], colors=[colors[k % len(colors)]], linewidths=1.4)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("output zero set" if s == len(stages) - 1 else f"layer {s + 1} zero sets", fontsize=9)
        ax.set_xlabel("x")
    axes[0, 0].set_ylabel("y")
    return suptitle(fig, title)


def lines_figure(neurons, means, ses, slope, *, title: str, ax=None):
    """Regions along random lines against the number of neurons, with the linear fit 1 + s N.
    ax: draw into this axes (its figure is returned) instead of a new figure."""
    fig, ax = figure_axes(ax, (7.5, 4.2))
    ax.errorbar(neurons, means, yerr=ses, fmt="o", capsize=3, label="mean over lines (+- 1 se)")
    grid = np.linspace(0, max(neurons) * 1.05, 50)
    ax.plot(grid, 1 + slope * grid, "--", label=f"1 + {slope:.3f} N")
    ax.set_xlabel("hidden neurons N")
    ax.set_ylabel("activation regions along the segment")
    ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=9)
    legend_right(ax, fontsize=8, wrap_at=24)
    ax.grid(alpha=0.3)
    return fig


def affine_map_figure(mapped_dual, target_dual, mapped_f, target_f, grid, resid):
    """Sattelberg's Fig. 11: the dual points of a wide network and of the XOR network mapped by the
    least-squares affine map M (relative residual resid), and the two functions on the grid (R, R, 2)."""
    fig = new_figure((13, 4.8))
    ax = fig.add_subplot(1, 3, 1, projection="3d")
    ax.scatter(*target_dual.T, s=4, c="tab:blue", label="wide network")
    ax.scatter(*mapped_dual.T, s=4, c="tab:red", alpha=0.5, label="XOR network mapped by M")
    ax.set_xlabel("w_x")
    ax.set_ylabel("w_y")
    ax.set_zlabel("b")
    ax.zaxis.labelpad = 2
    ax.set_title(f"dual points, relative residual {resid:.2f}", fontsize=9)
    figure_legend(fig, axes=[ax], fontsize=8)
    xs, ys = grid[0, :, 0], grid[:, 0, 1]
    for k, (vals, name) in enumerate(((target_f, "wide network f"), (mapped_f, "mapped local maps (C M) . (x, 1)"))):
        ax = fig.add_subplot(1, 3, 2 + k)
        im = ax.pcolormesh(xs, ys, vals, cmap="RdBu_r", shading="auto")
        if vals.min() < 0 < vals.max():
            ax.contour(xs, ys, vals, levels=[0.0], colors="k")
        fig.colorbar(im, ax=ax, shrink=0.8)
        ax.set_aspect("equal")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_title(name, fontsize=9)
    return suptitle(fig, "Sattelberg Fig. 11: least-squares affine map M between two XOR networks' dual points")


def functional_dimension_figure(rows, *, title: str):
    """Left: fraction of networks at the bound vs depth, one line per input dimension and number of
    points (95% Wilson intervals).  Right: histograms of bound - functional dimension (most points)."""
    n_ins = sorted({r["n_in"] for r in rows})
    depths = sorted({r["depth"] for r in rows})
    factors = sorted({r["point_factor"] for r in rows})
    fig = new_figure((5.2 + 2.2 * len(depths), 3.2 + 1.5 * len(n_ins)))
    gs = fig.add_gridspec(len(n_ins), 1 + len(depths), width_ratios=[2.6] + [1] * len(depths))
    ax = fig.add_subplot(gs[:, 0])
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    for i, n in enumerate(n_ins):
        for j, f in enumerate(factors):
            sel = sorted((r for r in rows if r["n_in"] == n and r["point_factor"] == f), key=lambda r: r["depth"])
            frac = np.array([r["fraction_at_bound"] for r in sel])
            lo = np.array([r["fraction_ci95"][0] for r in sel])
            hi = np.array([r["fraction_ci95"][1] for r in sel])
            ax.errorbar([r["depth"] + 0.05 * (j - 1) for r in sel], frac, yerr=[frac - lo, hi - frac],
                        color=colors[i % len(colors)], ls=styles[j % len(styles)], marker="o", ms=3, capsize=2,
                        label=f"n0 = {n}, {f:g} x bound points")
    ax.set_xlabel("depth (weight layers)")
    ax.set_ylabel("fraction with functional dimension = bound")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    top = factors[-1]
    for i, n in enumerate(n_ins):
        for k, dep in enumerate(depths):
            a = fig.add_subplot(gs[i, 1 + k])
            r = next(r for r in rows if r["n_in"] == n and r["depth"] == dep and r["point_factor"] == top)
            deficits = np.array(r["deficits"])
            vals, counts = np.unique(deficits, return_counts=True)
            a.bar(vals, counts, color=colors[i % len(colors)], width=0.8)
            a.set_title(f"n0={n}, depth {dep}", fontsize=7)
            a.tick_params(labelsize=6)
            a.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True) if len(vals) > 1 else FixedLocator(vals))
            a.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            a.set_xlabel("bound - dim", fontsize=7)
            a.set_ylabel("networks", fontsize=7)
    figure_legend(fig, axes=[ax], ncol=len(n_ins))           # a column per n0, a row per number of points
    return suptitle(fig, title)
