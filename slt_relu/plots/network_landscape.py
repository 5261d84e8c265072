"""A network's loss landscape around a point (Li et al. 2018), its Hessian's spectral density (PyHessian, Yao et al.
2020) and its linear regions on a slice of input space, each drawn from the ``network_landscape`` kind's results
Dataset."""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.colors import LogNorm
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from ._style import legend_right, new_figure, suptitle, wrap

__all__ = ["hessian_density_figure", "input_regions_figure", "loss_surface_figure"]

LEVELS = 16                    # the contour plot's levels
MAX_NAMED, MAX_NAMED_NEURONS = 30, 12    # regions whose patterns are written in them: at most these many, of these


def _levels(Z):
    """Contour levels of Z: log-spaced above its minimum where it spans more than two decades (a loss that grows fast
    away from the point), else evenly spaced; and whether they are log-spaced."""
    lo, hi = float(np.min(Z)), float(np.max(Z))
    if hi <= lo:
        return np.array([lo - 1.0, lo, lo + 1.0]), False
    if lo > 0 and hi / lo > 100:
        return np.geomspace(lo, hi, LEVELS), True
    return np.linspace(lo, hi, LEVELS), False


def loss_surface_figure(ds):
    """Li et al.'s pictures of a loss around a point w: a contour plot of L(w + s u + t v) over the plane (the point
    a star at the centre), the same loss as a 3-D surface beside it, and below them the loss along each direction
    alone, L(w + t u) and L(w + t v), on a finer line.

    Args:
        ds: the ``network_landscape`` kind's results Dataset: ``loss`` over (x, y) (its ``long_name`` the loss's),
            ``line_loss`` over (direction, t), the coordinates x, y, t, direction, and the attributes ``network``
            (a line naming it), ``directions`` ("random" or "hessian") and ``range``.

    Returns:
        the Figure, with two panels above (contour plot, surface) and one below (the lines).
    """
    xs, ys, Z = ds["x"].values, ds["y"].values, ds["loss"].values
    zlabel = str(ds["loss"].attrs.get("long_name", "loss"))
    kind = ("filter-normalised random directions u, v (Li et al. 2018)" if ds.attrs["directions"] == "random" else
            "the Hessian's top two eigenvectors u, v")
    fig = new_figure((12.5, 9.4))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.25, 1.0])
    ax = fig.add_subplot(grid[0, 0])
    levels, log = _levels(Z)
    norm = LogNorm(levels[0], levels[-1]) if log else None
    filled = ax.contourf(xs, ys, Z.T, levels=levels, cmap="viridis", norm=norm, extend="neither")
    lines = ax.contour(xs, ys, Z.T, levels=levels[::3], colors="white", linewidths=0.6, norm=norm)
    ax.clabel(lines, fmt="%.3g", fontsize=7)
    bar = fig.colorbar(filled, ax=ax, shrink=0.9)
    bar.ax.yaxis.set_major_locator(FixedLocator(levels[::3]))       # the levels' own values, log-spaced or not
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.3g}"))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.set_label(wrap(zlabel, 3.5, 9), fontsize=9)
    ax.plot(0.0, 0.0, "*", color="tab:red", ms=12, mec="k")
    ax.set_xlabel("s (along u)")
    ax.set_ylabel("t (along v)")
    ax.set_aspect("equal")
    ax.set_title(wrap("contours of L(w + s u + t v); star: the point w", 5.0, 9), fontsize=9)
    ax3 = fig.add_subplot(grid[0, 1], projection="3d")
    S, T = np.meshgrid(xs, ys, indexing="ij")
    ax3.plot_surface(S, T, Z, cmap="viridis", linewidth=0, antialiased=True, rcount=min(len(xs), 81),
                     ccount=min(len(ys), 81))
    ax3.set_xlabel("s (along u)")
    ax3.set_ylabel("t (along v)")
    ax3.set_zlabel("loss")
    for axis in (ax3.xaxis, ax3.yaxis, ax3.zaxis):
        axis.set_major_locator(MaxNLocator(5))
    ax3.zaxis.labelpad = 6
    ax3.set_title("the same loss as a surface", fontsize=9)
    ax1 = fig.add_subplot(grid[1, :])
    ts = ds["t"].values
    for d, colour in zip(ds["direction"].values, ("tab:blue", "tab:orange")):
        ax1.plot(ts, ds["line_loss"].sel(direction=d).values, color=colour, label=f"L(w + t {d})")
    ax1.axvline(0.0, color="0.5", lw=0.8, ls=":")
    values = ds["line_loss"].values
    if values.min() > 0 and values.max() / values.min() > 1e3:
        ax1.set_yscale("log")
    ax1.set_xlabel("t (offset along the direction)")
    ax1.set_ylabel(wrap(zlabel, 3.0, 9), fontsize=9)
    ax1.set_title("the loss along each direction alone (dotted: the point)", fontsize=9)
    ax1.grid(alpha=0.3)
    legend_right(ax1, fontsize=8)
    return suptitle(fig, f"{ds.attrs['network']}: the loss around the point along {kind}, |s|, |t| <= "
                         f"{float(ds.attrs['range']):g}")


def hessian_density_figure(ds):
    """PyHessian's picture of the Hessian's spectrum at the point: the spectral density by stochastic Lanczos
    quadrature, smoothed by a Gaussian, on a log scale against the eigenvalue, the top eigenvalues (Lanczos) marked,
    the trace (Hutchinson's estimate +- its standard error, and SLQ's) in the title.

    Args:
        ds: the ``network_landscape`` kind's results Dataset: ``density`` over ``eigenvalue_grid`` (its ``sigma``
            attribute the smoothing width), ``slq_node`` (probe, slq_step), ``eigenvalue`` over k, ``trace``,
            ``trace_se`` and the attribute ``network``.

    Returns:
        the Figure.
    """
    fig = new_figure((10.5, 5.0))
    ax = fig.add_subplot(1, 1, 1)
    grid, density = ds["eigenvalue_grid"].values, ds["density"].values
    floor = max(float(density.max()), 1e-300) * 1e-8
    ax.semilogy(grid, np.maximum(density, floor), color="tab:blue", lw=1.2, label="spectral density (SLQ)")
    for i, e in enumerate(ds["eigenvalue"].values):
        ax.axvline(e, color="tab:red", ls="--", lw=0.9, label="top eigenvalues (Lanczos)" if i == 0 else None)
    ax.set_ylim(floor, float(density.max()) * 3)
    ax.set_xlabel("eigenvalue lambda of the Hessian")
    ax.set_ylabel("density (log scale)")
    ax.grid(alpha=0.3)
    legend_right(ax, fontsize=8)
    P, m = ds["slq_node"].shape
    D = ds.sizes["parameter"]
    per_probe = D * np.sum(ds["slq_weight"].values * ds["slq_node"].values, axis=1)
    slq = f"{per_probe.mean():.4g}" + (f" +- {per_probe.std(ddof=1) / np.sqrt(P):.2g}" if P > 1 else "")
    ax.set_title(wrap(f"{P} probes x {m} Lanczos steps, Gaussian width {float(ds['density'].attrs['sigma']):.3g}; "
                      f"trace {float(ds['trace']):.4g} +- {float(ds['trace_se']):.2g} (Hutchinson), {slq} "
                      f"(SLQ's probes); "
                      f"D = {D}", 7.0, 9), fontsize=9)
    return suptitle(fig, f"{ds.attrs['network']}: the Hessian's spectral density at the point")


def input_regions_figure(ds):
    """The network's exact linear regions on a 2-D slice of input space x(s, t) = origin + s u + t v, each region
    (a convex polygon, one activation pattern) in its own colour, with the data points that span the slice.

    Args:
        ds: the ``network_landscape`` kind's results Dataset with regions: ``vertex_s``, ``vertex_t`` and
            ``vertex_region`` over ``vertex`` (each polygon's vertices in order), ``region_count`` (its attributes
            ``half_width``, ``s_label``, ``t_label``), optionally ``anchor_s``, ``anchor_t`` over ``anchor`` (their
            labels), and the attribute ``network``.

    Returns:
        the Figure.
    """
    anchors = "anchor" in ds.coords
    fig = new_figure((8.6 if anchors else 7.0, 6.6))
    ax = fig.add_subplot(1, 1, 1)
    region = ds["vertex_region"].values
    points = np.stack([ds["vertex_s"].values, ds["vertex_t"].values], 1)
    cuts = np.flatnonzero(np.diff(region)) + 1
    polygons = np.split(points, cuts)
    count = int(ds["region_count"])
    palette = 10 if count <= 10 else 20
    colours = matplotlib.colormaps[f"tab{palette}"](np.random.default_rng(0).permutation(count) % palette)
    ax.add_collection(PolyCollection(polygons, facecolors=colours, edgecolors="k", linewidths=0.25))
    patterns = ds["region_pattern"].values
    if count <= MAX_NAMED and patterns.shape[1] <= MAX_NAMED_NEURONS:   # few regions of few neurons: their patterns
        for polygon, pattern in zip(polygons, patterns):
            s, t = polygon.mean(0)
            ax.text(s, t, "".join(map(str, pattern)), ha="center", va="center", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "w", "alpha": 0.7, "lw": 0})
    if anchors:
        for (s, t, label), marker in zip(zip(ds["anchor_s"].values, ds["anchor_t"].values, ds["anchor"].values),
                                         "o^sDv"):
            ax.plot(s, t, marker, color="w", mec="k", ms=8, label=str(label))
        legend_right(ax, fontsize=8)
    a = float(ds["region_count"].attrs["half_width"])
    ax.set_xlim(-a, a)
    ax.set_ylim(-a, a)
    ax.set_aspect("equal")
    ax.set_xlabel(str(ds["region_count"].attrs["s_label"]))
    ax.set_ylabel(str(ds["region_count"].attrs["t_label"]))
    named = count <= MAX_NAMED and patterns.shape[1] <= MAX_NAMED_NEURONS
    written = " (written in its region, 1 = neuron active)" if named else ""
    ax.set_title(wrap(f"one colour per activation pattern{written}; black lines where a neuron switches", 5.5, 9),
                 fontsize=9)
    return suptitle(fig, f"{ds.attrs['network']}: {count} exact linear regions on a 2-D slice of input space")
