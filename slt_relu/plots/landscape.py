"""Loss landscapes and Fisher ranks: K(w) over a plane of parameters with W0, rank against the
scaling bound D - d, Fisher spectra."""
from __future__ import annotations

import matplotlib
import numpy as np

from ._style import figure_axes, figure_legend, legend_right, subplots, wrap

__all__ = ["landscape_figure", "rank_vs_bound_figure", "spectrum_figure"]


def landscape_figure(xs, ys, Z, *, xlabel: str, ylabel: str, title: str, zlabel: str = "K(w)", curves=(),
                     markers=None, along=None, ax=None):
    """A loss over a plane of parameters: a heat map of Z less its minimum with log-spaced contours (white; the
    valleys are where they crowd), the true set W0 as red curves and named points as circles; optionally, panels
    to its right of quantities along W0.

    Args:
        xs: (S,) the grid's values along the first coordinate.
        ys: (T,) along the second.
        Z: (S, T) the loss at (xs[s], ys[t]), e.g. ``slt_relu.population_loss`` K(w) (nats).
        xlabel: the first coordinate's name.
        ylabel: the second coordinate's name.
        title: the heat map's title.
        zlabel: the loss' name (the colour bar reads "zlabel - min" where the minimum is not 0).
        curves: arrays (N, 2) of points (x, y) on W0, each drawn as a line.
        markers: {name: (x, y)} points drawn as circles and named in the legend.
        along: (title, s (M,), values (M,), ylabel) panels drawn to the right, e.g. the local posterior mass and
            the Fisher rank along W0 against the position s along it (a fraction of its arc length); a ylabel of
            "rank" draws integer ticks.
        ax: draw the heat map into this axes (its figure is returned) instead of a new figure; only without
            ``along``.

    Returns:
        the Figure, with one panel, or 1 + len(along) side by side.
    """
    along = along or []
    if ax is not None and along:
        raise ValueError("landscape_figure: ax draws the heat map alone; along needs a figure of its own")
    if ax is None:
        fig, axes = subplots(1, 1 + len(along), figsize=(6.2 + 4.2 * len(along), 5.2), squeeze=False)
        ax = axes[0, 0]
    else:
        fig, axes = ax.figure, None
    Z = np.asarray(Z)
    zmin = float(np.min(Z))
    shifted = Z - zmin
    im = ax.pcolormesh(xs, ys, shifted.T, shading="auto", cmap="viridis", vmax=np.quantile(shifted, 0.9))
    fig.colorbar(im, ax=ax, label=f"{zlabel}" + (f" - {zmin:.3g}" if abs(zmin) > 1e-12 else ""))
    top = float(np.max(shifted))
    if top > 0:
        levels = np.geomspace(max(top * 1e-4, 1e-6), top, 9)
        cs = ax.contour(xs, ys, shifted.T, levels=levels, colors="white", linewidths=0.7, alpha=0.8)
        ax.clabel(cs, cs.levels[3::2], fmt="%.2g", fontsize=7)   # the outer levels: the inner crowd the valley
    for i, curve in enumerate(curves):
        curve = np.asarray(curve)
        ax.plot(curve[:, 0], curve[:, 1], color="#ff4f4f", lw=2.2, label="W0 (K = 0)" if i == 0 else None)
    for name, (mx, my) in (markers or {}).items():
        ax.plot(mx, my, "o", ms=8, mfc="none", mew=2, label=name)
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(ys[0], ys[-1])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(wrap(title, 5.0, 9), fontsize=9)
    if (curves or markers) and axes is not None:          # below the panels: the heat map fills its axes
        figure_legend(fig, axes=[ax], fontsize=8)
    elif curves or markers:                               # a host's axes: beside it
        legend_right(ax, fontsize=8)
    for k, (ptitle, s, values, ylab) in enumerate(along, start=1):
        a = axes[0, k]
        a.plot(s, values, "o-", ms=3)
        a.set_title(wrap(ptitle, 3.8, 10), fontsize=10)
        a.set_xlabel("position along W0 (fraction of arc length)")
        a.set_ylabel(ylab)
        a.grid(alpha=0.3)
        if ylab == "rank":
            top = int(np.max(values))
            a.set_ylim(-0.3, top + 1.3)
            a.set_yticks(range(0, top + 2))
    return fig


def _by_group(ds) -> dict:
    """{group: indices of its points} in the order the groups first appear."""
    groups = [str(g) for g in ds["group"].values]
    return {g: [i for i, h in enumerate(groups) if h == g] for g in dict.fromkeys(groups)}


def rank_vs_bound_figure(ds):
    """Two panels: the numerical rank of the Fisher information I(w) against the generic bound D - d (D parameters,
    d hidden nodes), one marker style per group of points (on the diagonal: only the scaling symmetries are null;
    below it: more null directions); beside it, at every point with any, the measured excess null directions
    against the hand count (equal bars: the excess is understood).

    Args:
        ds: the ``fisher`` kind's results Dataset: along ``point`` the variables ``bound``, ``rank``, ``excess`` and
            ``expected_excess`` (NaN: no hand count), the coordinates ``group`` and ``label``.

    Returns:
        the Figure.
    """
    fig, (ax, ax2) = subplots(1, 2, figsize=(13, 5.0))
    bound, rank, excess = (ds[v].values for v in ("bound", "rank", "excess"))
    expected = ds["expected_excess"].values.astype(float)
    markers = "osD^v<>p*h"
    top = bound.max()
    ax.plot([0, top], [0, top], "k--", lw=1, label="rank = D - d")
    for (g, idx), m in zip(_by_group(ds).items(), markers * 4):
        ax.scatter(bound[idx], rank[idx], marker=m, s=30, alpha=0.7, label=g)
    ax.set_xlabel("D - d (parameters minus hidden nodes)")
    ax.set_ylabel("numerical rank of I(w)")
    ax.set_title("Fisher rank vs the scaling bound D - d")
    legend_right(ax, wrap_at=26)
    ax.grid(alpha=0.3)
    sel = np.flatnonzero((excess > 0) | (expected > 0))        # NaN (no hand count): not > 0
    if sel.size:
        x = np.arange(sel.size)
        ax2.bar(x - 0.2, excess[sel], 0.4, label="measured excess")
        ax2.bar(x + 0.2, expected[sel], 0.4, label="hand count")
        ax2.set_xticks(x, [str(v) for v in ds["label"].values[sel]], rotation=90, fontsize=7)   # vertical: never overlapping
        ax2.set_xlabel("point")
        ax2.set_ylabel("excess null directions")
        legend_right(ax2)
    else:
        ax2.text(0.5, 0.5, "no excess null directions", ha="center", va="center", transform=ax2.transAxes)
        ax2.set_xticks([])
        ax2.set_yticks([])
    ax2.set_title("null directions beyond the scaling generators")
    return fig


def spectrum_figure(ds, *, max_lines: int = 60, ax=None):
    """The eigenvalues of the Fisher information I(w) of each point, divided by the largest (log scale), one colour
    per group, with a tick where the numerical rank cuts them (rtol): a clean gap at the tick is a well-defined
    rank.

    Args:
        ds: the ``fisher`` kind's results Dataset: along ``point`` the ``spectrum`` (point, eigenvalue), NaN past a
            point's number of eigenvalues, ``rank`` and ``rtol``, and the coordinate ``group``.
        max_lines: the most points drawn of one group (its first).
        ax: draw into this axes (its figure is returned) instead of a new figure.

    Returns:
        the Figure.
    """
    fig, ax = figure_axes(ax, (9.5, 4.8))
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    spectra, rank, rtol = ds["spectrum"].values, ds["rank"].values, ds["rtol"].values
    floor = 1e-32
    for (g, idx), col in zip(_by_group(ds).items(), colors * 4):
        for k, i in enumerate(idx[:max_lines]):
            spec = np.asarray(spectra[i], float)
            spec = spec[~np.isnan(spec)]                                  # the padding past its eigenvalues
            spec = np.maximum(spec / max(spec.max(), 1e-300), floor)
            ax.semilogy(np.arange(1, len(spec) + 1), spec, "-", color=col, alpha=0.5, lw=1,
                        label=g if k == 0 else None)
            ax.plot(rank[i] + 0.5, rtol[i], "|", color="k", ms=8)
    ax.set_xlabel("eigenvalue index j")
    ax.set_ylabel("lambda_j / lambda_max (floored at 1e-32)")
    ax.set_title("Fisher spectra; | marks the rank cut at rtol")
    legend_right(ax, wrap_at=26)
    ax.grid(alpha=0.3)
    return fig
