"""The local posterior's observables over the input box: susceptibilities of an observable to upweighting
the data of each cell of a grid (``slt_relu.posterior.observables.susceptibility``)."""
from __future__ import annotations

import numpy as np

from ._style import figure_legend, subplots, suptitle, wrap

__all__ = ["susceptibility_figure"]


def susceptibility_figure(x_edges, y_edges, chi, se, *, title: str, panel_titles=None, xlabel: str = "x1",
                          ylabel: str = "x2", lines=(), significance: float = 2.0):
    """Per observable (a row): its susceptibility to each cell of a grid over the input box, and the
    same in standard errors.

        chi_A = d/d eps E_eps[O] under n beta (L_n + eps L_A),   z_A = chi_A / se_A

    Left panel: chi_A (diverging colours, symmetric about 0: red cells pull E[O] up when their data
    count more, blue push it down).  Right panel: z_A, the cells with |z_A| >= ``significance`` marked
    with a dot.

    Args:
        x_edges: (nx + 1,) the cells' edges along the first input.
        y_edges: (ny + 1,) the cells' edges along the second input.
        chi: (ny, nx) or (P, ny, nx) susceptibilities (rows along y).
        se: the same shape, their standard errors.
        title: the figure's title.
        panel_titles: P names of the observables (default "observable p").
        xlabel: the first input's name.
        ylabel: the second input's name.
        lines: (label, xs, ys) curves drawn on every panel (e.g. the truth's kinks), one legend below.
        significance: |z| at and above which a cell is marked.

    Returns:
        matplotlib Figure.
    """
    chi, se = np.asarray(chi, float), np.asarray(se, float)
    if chi.ndim == 2:
        chi, se = chi[None], se[None]
    x_edges, y_edges = np.asarray(x_edges, float), np.asarray(y_edges, float)
    P = chi.shape[0]
    names = list(panel_titles) if panel_titles is not None else [f"observable {p}" for p in range(P)]
    fig, axes = subplots(P, 2, figsize=(9.0, 3.9 * P + 0.9), squeeze=False)
    xc, yc = 0.5 * (x_edges[1:] + x_edges[:-1]), 0.5 * (y_edges[1:] + y_edges[:-1])
    X, Y = np.meshgrid(xc, yc)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = chi / se
    for p in range(P):
        vmax = float(np.nanmax(np.abs(chi[p]))) if np.isfinite(chi[p]).any() else 1.0
        zmax = max(3.0, float(np.nanmax(np.abs(z[p]))) if np.isfinite(z[p]).any() else 3.0)
        for ax, values, lim, what in ((axes[p, 0], chi[p], vmax or 1.0, "chi_A"),
                                      (axes[p, 1], z[p], zmax, "chi_A / se")):
            im = ax.pcolormesh(x_edges, y_edges, values, cmap="RdBu_r", vmin=-lim, vmax=lim, shading="flat")
            fig.colorbar(im, ax=ax, fraction=0.046, label=what)
            for label, xs, ys in lines:
                ax.plot(xs, ys, "k--", lw=1.2, label=label)
            ax.set_xlim(x_edges[0], x_edges[-1])
            ax.set_ylim(y_edges[0], y_edges[-1])
            ax.set_aspect("equal")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(wrap(f"{names[p]}: {what}", 3.6, 9), fontsize=9)
        strong = np.abs(z[p]) >= significance
        if strong.any():
            axes[p, 1].plot(X[strong], Y[strong], "o", color="k", ms=3.5, ls="none",
                            label=f"|chi_A / se| >= {significance:g}")
    figure_legend(fig, axes=[axes[p, 1] for p in range(P)])
    return suptitle(fig, title)
