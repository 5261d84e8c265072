"""Linear regions and functional dimension (Sattelberg et al. 2020; Grigsby et al. 2023): regions by
activation pattern, zero sets layer by layer, dual points and the affine map between two networks,
regions along lines, functional dimension against depth."""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.ticker import FixedLocator, MaxNLocator

from ._style import figure_axes, figure_legend, fill, legend_right, new_figure, subplots, suptitle, wrap

__all__ = ["affine_map_figure", "functional_dimension_figure", "layer_boundaries_figure", "lines_figure",
           "regions_figure"]


def _pattern_colours(patterns: np.ndarray) -> np.ndarray:
    """A colour index per point from its activation pattern (N, H) bool (distinct patterns, distinct ids)."""
    from ..regions import distinct_patterns

    return distinct_patterns(patterns)[1]


def regions_figure(grid, patterns, values, layer_pre, dual, *, title: str, points=None, extra=None):
    """Sattelberg et al.'s pictures of a ReLU network on a 2-D input grid, three or four panels: the activation
    regions (one colour per activation pattern; their count is in the title) with every hidden neuron's zero set
    (one line colour per layer), the network's output f with its zero set (red > 0 > blue), and its dual points
    (W_i, b_i) in 3-D (colour: b), one per region: as many distinct dual points as regions means no two regions
    share an affine map.

    Args:
        grid: (R, R, 2) the input points (x varying fastest, ``slt_relu.regions.box_grid`` reshaped).
        patterns: (R, R, H) bool, the activation pattern of every point (``slt_relu.mlp.activation_patterns``).
        values: (R, R) the output f at every point.
        layer_pre: one (R, R, n_l) array per hidden layer, its pre-activations (``slt_relu.mlp.preactivations``).
        dual: (P, 3) dual points (``slt_relu.mlp.dual_points``).
        title: the figure's title.
        points: optional (xy (N, 2), labels (N,)) data points drawn on the regions (colour: label).
        extra: optional (title, xs, ys, xlabel, ylabel) of a fourth panel, a line.

    Returns:
        the Figure.
    """
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
    if points is not None:                                # a few points (XOR's corners) drawn large enough to see
        ax.scatter(points[0][:, 0], points[0][:, 1], c=points[1], cmap="bwr", s=10 if len(points[0]) > 50 else 45,
                   edgecolors="k", linewidths=0.3 if len(points[0]) > 50 else 0.8)
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
    fig.colorbar(im, ax=ax, shrink=0.8, label="f(x)")
    ax.set_title("f(x) (red > 0 > blue) and its zero set", fontsize=9)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_aspect("equal")
    ax = fig.add_subplot(1, panels, 3, projection="3d")
    ax.scatter(dual[:, 0], dual[:, 1], dual[:, 2], c=dual[:, 2], cmap="viridis", s=6 if len(dual) > 50 else 30)
    ax.set_xlabel("w_x")
    ax.set_ylabel("w_y")
    ax.set_zlabel("b")
    ax.set_title(f"dual points (W_i, b_i): {len(np.unique(np.round(dual, 9), axis=0))} distinct", fontsize=9)
    ax.zaxis.labelpad = 5                                 # clear of the tick labels, inside the figure
    if extra is not None:
        etitle, ex, ey, exl, eyl = extra
        ax = fig.add_subplot(1, panels, 4)
        ax.plot(ex, ey, "o-")
        if len(ex) and np.allclose(ex, np.round(ex)):   # counts (clusters k): integer ticks
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(exl)
        ax.set_ylabel(eyl)
        ax.set_title(wrap(etitle, 4.0, 9), fontsize=9)
        ax.grid(alpha=0.3)
    return suptitle(fig, title)


def layer_boundaries_figure(grid, layer_pre, output, *, title: str):
    """Sattelberg et al.'s Figure 5, a panel per layer: the zero sets of its neurons in the input plane (one colour
    per neuron) over the earlier layers' (grey), and last the output's zero set; a neuron's zero set bends only
    where it meets an earlier layer's.

    Args:
        grid: (R, R, 2) the input points (x varying fastest).
        layer_pre: one (R, R, n_l) array per hidden layer, its pre-activations.
        output: (R, R) the network's output.
        title: the figure's title.

    Returns:
        the Figure.
    """
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
    """The number of activation regions a random segment crosses against the network's number of hidden neurons N,
    with the linear fit 1 + s N (Hanin and Rolnick: about linear in N, not exponential).

    Args:
        neurons: (K,) the networks' numbers of hidden neurons.
        means: (K,) the mean number of regions along a segment.
        ses: (K,) its standard error over segments.
        slope: s of the fit.
        title: the axes' title.
        ax: draw into this axes (its figure is returned) instead of a new figure.

    Returns:
        the Figure.
    """
    fig, ax = figure_axes(ax, (7.5, 4.2))
    ax.errorbar(neurons, means, yerr=ses, fmt="o", capsize=3, label="mean over lines (+- 1 se)")
    grid = np.linspace(0, max(neurons) * 1.05, 50)
    ax.plot(grid, 1 + slope * grid, "--", label=f"1 + {slope:.3f} N")
    ax.set_xlabel("hidden neurons N")
    ax.set_ylabel("activation regions along the segment")
    ax.set_title(fill(title, 60), fontsize=9)
    legend_right(ax, fontsize=8, wrap_at=30)
    ax.grid(alpha=0.3)
    return fig


def affine_map_figure(grid, target_dual, mapped_dual, target_f, mapped_f, *, resid: float,
                      title: str = "Sattelberg Fig. 11: least-squares affine map M between two XOR networks' "
                                   "dual points"):
    """Sattelberg et al.'s Fig. 11, three panels: the dual points (W_i, b_i) of a wide network and those of a second
    network mapped by the least-squares affine map M between them (``slt_relu.regions.affine_map_between``; a small
    relative residual: the same function up to an affine change of the dual coordinates), and the two functions on
    the grid on one colour scale, symmetric about 0.

    Args:
        grid: (R, R, 2) the input grid (x varying fastest).
        target_dual: (P, 3) the wide network's dual points (w_x, w_y, b).
        mapped_dual: (Q, 3) the second network's dual points mapped by M.
        target_f: (R, R) the wide network's output on the grid.
        mapped_f: (R, R) the function the mapped local maps give on the grid.
        resid: M's relative residual.
        title: the figure's title.

    Returns:
        the Figure.
    """
    fig = new_figure((13, 4.8))
    ax = fig.add_subplot(1, 3, 1, projection="3d")
    ax.scatter(*target_dual.T, s=4, c="tab:blue", label="wide network")
    ax.scatter(*mapped_dual.T, s=4, c="tab:red", alpha=0.5, label="XOR network mapped by M")
    ax.set_xlabel("w_x")
    ax.set_ylabel("w_y")
    ax.set_zlabel("b")
    ax.zaxis.labelpad = 5                                 # clear of the tick labels, inside the figure
    ax.set_title(f"dual points, relative residual {resid:.2f}", fontsize=9)
    figure_legend(fig, axes=[ax], fontsize=8)
    xs, ys = grid[0, :, 0], grid[:, 0, 1]
    top = max(float(np.abs(target_f).max()), float(np.abs(mapped_f).max()), 1e-12)   # one scale: comparable
    for k, (vals, name) in enumerate(((target_f, "wide network f"), (mapped_f, "mapped local maps (C M) . (x, 1)"))):
        ax = fig.add_subplot(1, 3, 2 + k)
        im = ax.pcolormesh(xs, ys, vals, cmap="RdBu_r", shading="auto", vmin=-top, vmax=top)
        if vals.min() < 0 < vals.max():
            ax.contour(xs, ys, vals, levels=[0.0], colors="k")
        fig.colorbar(im, ax=ax, shrink=0.8, label="f(x)")
        ax.set_aspect("equal")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_title(name, fontsize=9)
    return suptitle(fig, title)


def functional_dimension_figure(rows, *, title: str):
    """Batch functional dimension against depth (Grigsby et al. 2023). Left: the fraction of networks whose
    functional dimension reaches the bound, against depth, one colour per input dimension n0 and one line style
    per number of points (bars: 95% Wilson intervals).  Right, a small panel per n0 and depth: the histogram of
    bound - functional dimension at the most points.

    Args:
        rows: one dict per (n0, depth, points) cell: ``n_in``, ``depth``, ``point_factor`` (points per bound),
            ``fraction_at_bound``, ``fraction_ci95`` (lo, hi), ``deficits`` (the networks' bound - dimension).
        title: the figure's title.

    Returns:
        the Figure.
    """
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
    ax.set_xticks(depths)                                 # depths are counts
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
            a.set_title(f"n0 = {n}, depth {dep}", fontsize=8)
            a.tick_params(labelsize=7)
            a.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True) if len(vals) > 1 else FixedLocator(vals))
            a.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            a.set_xlabel("bound - dim", fontsize=8)
            a.set_ylabel("networks", fontsize=8)
    figure_legend(fig, axes=[ax], ncol=len(n_ins))           # a column per n0, a row per number of points
    return suptitle(fig, title)
