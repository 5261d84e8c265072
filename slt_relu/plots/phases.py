"""The phases of W0 drawn (DSLT3's style): activation boundaries in the input plane, effective weights."""
from __future__ import annotations

import matplotlib
import matplotlib.patches
import numpy as np

from ._style import finish_panels, group_style, label_grid, panel_grid

__all__ = ["effective_weights_figure", "phase_gallery_figure"]


def phase_gallery_figure(truth, rows, *, title: str, half_width: float = 1.0):
    """A gallery of the phases of W0, one panel per phase representative, in DSLT3's style: each node's activation
    boundary {<w_i, x> + b_i = 0} in the input plane (n_in = 2; a vertical line at the kink for n_in = 1) with an
    arrow along w_i into its active side; colour: the truth boundary the node sits on (black: a hidden group),
    dashed: reversed orientation; degenerate nodes are not drawn (a row's label counts them); the grey square is
    the input box.

    Args:
        truth: the true TwoLayer (its m nodes give the colours).
        rows: one dict per panel: "label" (str, the title), "params" (a TwoLayer with w (d, n_in), b (d,), q (d,)),
            "group" (d,) the truth node each node carries (-1: degenerate; >= m: hidden), "orientation" (d,) +1 or
            -1, "note" (str, a second title line, e.g. K and the Fisher rank).
        title: the figure's title.
        half_width: the input box's half width.

    Returns:
        the Figure.
    """
    fig, axes, nrows = panel_grid(len(rows), 2.6, 3.0, share=True)
    m = np.shape(truth.w)[0]
    L = 1.5 * half_width
    n_in = np.shape(truth.w)[1]
    for ax, row in zip(axes.flat, rows):
        p = row["params"]
        w, b = np.asarray(p.w, float), np.asarray(p.b, float)
        n_in = w.shape[1]
        ax.add_patch(matplotlib.patches.Rectangle((-half_width, -half_width), 2 * half_width, 2 * half_width, fill=False,
                                   ec="0.8", lw=0.8))
        seen = {}
        for i, (wi, bi) in enumerate(zip(w, b)):
            g, o = int(row["group"][i]), float(row["orientation"][i])
            if g < 0 or not np.any(wi):
                continue
            color, ls = group_style(g, o, m)
            k = seen.get(g, 0)
            seen[g] = k + 1
            if n_in == 1:
                x0 = -bi / wi[0]
                foot, unit, tangent = np.array([x0, 0.0]), np.array([np.sign(wi[0]), 0.0]), np.array([0.0, 1.0])
                ax.axvline(x0, color=color, ls=ls, lw=1.3)
            else:
                unit = wi / np.linalg.norm(wi)
                foot = -bi * unit / np.linalg.norm(wi)
                tangent = np.array([-unit[1], unit[0]])
                ends = np.array([foot - 3 * L * tangent, foot + 3 * L * tangent])
                ax.plot(ends[:, 0], ends[:, 1], color=color, ls=ls, lw=1.3)
            base = foot + tangent * L * (0.4 + 0.25 * k)
            ax.annotate("", xy=base + 0.32 * L * unit, xytext=base,
                        arrowprops=dict(arrowstyle="->", color=color, lw=1.4, ls=ls))
        ax.set_xlim(-L, L)
        ax.set_ylim(-L, L)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"{row['label']}\n{row.get('note', '')}", fontsize=7.5)
    label_grid(axes, len(rows), "x1", "x2" if n_in > 1 else "(one input)")
    return finish_panels(fig, title, nrows)


def effective_weights_figure(truth, rows, *, title: str):
    """A gallery of the phases' effective weights, one panel per representative: each node's |q_i| w_i (DSLT4) as
    an arrow from the origin, coloured and dashed as in :func:`phase_gallery_figure` (a degenerate node grey,
    dotted), over the truth's (thick grey):
    the phases of one truth differ in how their arrows split and flip the truth's.  n_in = 2.

    Args:
        truth: the true TwoLayer.
        rows: as in :func:`phase_gallery_figure` ("label", "params", "group", "orientation").
        title: the figure's title.

    Returns:
        the Figure.
    """
    fig, axes, nrows = panel_grid(len(rows), 2.4, 2.6, share=True)
    m = np.shape(truth.w)[0]
    t_eff = np.abs(np.asarray(truth.q, float))[:, None] * np.asarray(truth.w, float)
    R = 1.15 * max(float(np.max(np.linalg.norm(t_eff, axis=1))), max(
        float(np.max(np.linalg.norm(np.abs(np.asarray(r["params"].q, float))[:, None] * np.asarray(r["params"].w, float),
                                    axis=1), initial=0.0)) for r in rows))
    for ax, row in zip(axes.flat, rows):
        for v in t_eff:
            ax.annotate("", xy=v, xytext=(0, 0), arrowprops=dict(arrowstyle="-", color="0.85", lw=5))
        p = row["params"]
        eff = np.abs(np.asarray(p.q, float))[:, None] * np.asarray(p.w, float)
        for i, v in enumerate(eff):
            if not np.any(v):
                continue
            color, ls = group_style(int(row["group"][i]), float(row["orientation"][i]), m)
            ax.annotate("", xy=v, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=color, lw=1.5, ls=ls))
        ax.set_xlim(-R, R)
        ax.set_ylim(-R, R)
        ax.set_aspect("equal")
        ax.axhline(0, color="0.9", lw=0.6)
        ax.axvline(0, color="0.9", lw=0.6)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(row["label"], fontsize=7.5)
    label_grid(axes, len(rows), "|q_i| w_i1", "|q_i| w_i2")
    return finish_panels(fig, title, nrows)
