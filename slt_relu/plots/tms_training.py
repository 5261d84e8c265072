"""The figure of the toy model of superposition's training trajectories (``slt_relu.kinds.tms_training_kind``):
the loss and the local learning coefficient along training at each n, every checkpoint coloured by its k-gon
phase, and the columns of W of one run at the checkpoints where its phase changes (as in Chen et al. 2023)."""
from __future__ import annotations

import matplotlib
import numpy as np

from ._style import figure_legend, new_figure, suptitle
from .tms import column_plane

__all__ = ["phase_colours", "tms_training_figure"]


def phase_colours(names) -> dict:
    """A colour per phase name, the k-gons by k (6-gon first): tab10 for up to 10 phases, else tab20 without its
    greys (18 colours, then repeating); "none" grey."""
    out = {}
    phases = sorted({str(v) for v in names if str(v) != "none"}, key=lambda v: (-int(v.split("-")[0]), v))
    if len(phases) <= 10:
        colours = [matplotlib.colormaps["tab10"](j) for j in range(10)]
    else:
        tab20 = matplotlib.colormaps["tab20"]
        colours = [tab20(j) for j in (0, 2, 4, 6, 8, 10, 12, 16, 18, 1, 3, 5, 7, 9, 11, 13, 17, 19)]
    for j, name in enumerate(phases):
        out[name] = colours[j % len(colours)]
    out["none"] = (0.7, 0.7, 0.7, 1.0)
    return out


def _snapshot(ax, W, b, lim: float, length_threshold: float = 0.5):
    """The columns of W as arrows from the origin: long ones (> length_threshold, the phase labeller's) blue, short
    ones red with a dot at the tip, filled where the feature's bias is positive, hollow where it is not."""
    W, b = np.asarray(W, float), np.asarray(b, float)
    long = np.linalg.norm(W, axis=0) > length_threshold
    for mask, colour in ((long, "C0"), (~long, "C3")):
        if mask.any():
            ax.quiver(np.zeros(mask.sum()), np.zeros(mask.sum()), W[0, mask], W[1, mask], angles="xy",
                      scale_units="xy", scale=1, width=0.025, color=colour)
    for i in np.flatnonzero(~long):
        ax.plot([W[0, i]], [W[1, i]], "o", ms=3.5, color="C3", mfc="C3" if b[i] > 0 else "none")
    column_plane(ax, lim)


def tms_training_figure(steps, ns, loss, phases, llc, llc_se, snapshots: list, *, levels: dict | None = None,
                        loss_label: str = "population loss L", title: str = "Training trajectories of the TMS"):
    """Three rows: the loss along training (log steps) at each n, every run a thin line and every checkpoint a
    dot coloured by its phase (dashed: the refined k-gons' losses, labelled in the first panel); the LLC along training with its standard
    errors, coloured the same way (its axis spans the estimates at the final checkpoints; lower ones, at
    checkpoints far from a minimum, are triangles on its lower edge); and the columns of W at selected checkpoints (arrows; red: columns shorter
    than 0.5, the unused features, with a dot filled where the feature's bias is positive, hollow where not).

    Args:
        steps: (K,) the checkpoints' steps (step 0 drawn at 0.5 on the log axis).
        ns: (N,) the sample sizes, one column of panels each.
        loss: (N, R, K) the loss at every checkpoint of every run.
        phases: (N, R, K) the phase names.
        llc: (N, R, K) the LLC estimates.
        llc_se: (N, R, K) their standard errors.
        snapshots: dicts with ``W`` (2, c), ``b`` (c,), ``title`` (the checkpoint's step and phase), at most 2 N.
        levels: {label: loss} horizontal reference lines of the loss panels (e.g. the k-gons' exact losses);
            those <= 0 are left out (the loss axis is logarithmic).
        loss_label: the loss axis' label.
        title: the figure's title.

    Returns:
        the Figure.
    """
    steps = np.asarray(steps, float)
    x = np.where(steps > 0, steps, 0.5)
    loss, llc, llc_se = (np.asarray(a, float) for a in (loss, llc, llc_se))
    phases = np.asarray(phases).astype(str)
    N, R, K = loss.shape
    colours = phase_colours(phases.reshape(-1))
    # the LLC axis spans the estimates at the final checkpoints; estimates below it (early checkpoints far from any
    # minimum, where L_n falls steeply and lambda_hat is large and negative) sit on its lower edge
    labelled = llc[..., -1][np.isfinite(llc[..., -1])]
    upper = 1.08 * max(float(np.nanmax(llc)) if np.isfinite(llc).any() else 1.0, 1.0)
    lower = min(float(labelled.min()) if labelled.size else 0.0, 0.0) - 0.04 * upper
    shown = np.maximum(llc, lower)
    cols = 2 * N
    snaps = list(snapshots)[:cols]
    width = max(3.3 * N, 9.0)
    fig = new_figure((width, 8.6 if snaps else 6.6))
    gs = fig.add_gridspec(3 if snaps else 2, cols, height_ratios=[3, 3, 1.9] if snaps else [3, 3])
    top, mid = [], []
    for i in range(N):
        top.append(fig.add_subplot(gs[0, 2 * i:2 * i + 2], sharey=top[0] if i else None))
        mid.append(fig.add_subplot(gs[1, 2 * i:2 * i + 2], sharex=top[i], sharey=mid[0] if i else None))
    for i in range(N):
        for axis, values in ((top[i], loss[i]), (mid[i], shown[i])):
            for r in range(R):
                axis.plot(x, values[r], color="0.75", lw=0.5, zorder=1)
        for name, colour in colours.items():
            mask = phases[i] == name
            if not mask.any():
                continue
            xs = np.broadcast_to(x, (R, K))[mask]
            top[i].plot(xs, loss[i][mask], "o", ms=2.5, color=colour, zorder=2)
            inside = llc[i][mask] >= lower
            mid[i].errorbar(xs[inside], llc[i][mask][inside], yerr=llc_se[i][mask][inside], fmt="o", ms=2.5,
                            color=colour, elinewidth=0.6, capsize=0, zorder=2)
            if (~inside).any():
                mid[i].plot(xs[~inside], np.full((~inside).sum(), lower), "v", ms=3, color=colour, zorder=2)
        positive = {k: v for k, v in (levels or {}).items() if v > 0}    # the log axis has no 0 (c <= 4's k = c)
        for j, (label, value) in enumerate(sorted(positive.items(), key=lambda kv: kv[1])):
            top[i].axhline(value, color="k", lw=0.6, ls="--", zorder=0)
            if i == 0:                              # neighbours side by side: their lines may be close
                top[i].annotate(label, (0.02 + 0.16 * (j % 2), value), xycoords=("axes fraction", "data"),
                                xytext=(0, 1), textcoords="offset points", fontsize=5.5, va="bottom")
        top[i].set_xscale("log")
        top[i].set_yscale("log")
        top[i].set_title(f"n = {ns[i]}", fontsize=9)
        mid[i].set_xlabel("training step (step 0 at 0.5)", fontsize=8)
        top[i].tick_params(which="both", labelbottom=False, labelleft=not i, labelsize=7)   # log axes: minor labels too
        mid[i].tick_params(which="both", labelleft=not i, labelsize=7)
    top[0].set_ylabel(loss_label, fontsize=8)
    mid[0].set_ylim(lower, upper)
    mid[0].set_ylabel("LLC at the checkpoint (bars: se;\ntriangles: below the axis)", fontsize=8)
    if snaps:
        lim = 1.15 * max(max(float(np.max(np.linalg.norm(np.asarray(s["W"]), axis=0))) for s in snaps), 1.0)
        first = None
        for j, s in enumerate(snaps):
            ax = fig.add_subplot(gs[2, j], sharex=first, sharey=first)
            first = first or ax
            _snapshot(ax, s["W"], s["b"], lim)
            ax.set_title(s["title"], fontsize=6.5)
            if j:
                ax.tick_params(labelleft=False)
        first.set_xlabel("W[0, i]", fontsize=7)
        first.set_ylabel("W[1, i]", fontsize=7)
    handles = [matplotlib.lines.Line2D([], [], marker="o", ls="none", color=colours[n], label=n)
               for n in colours if (phases == n).any()]
    figure_legend(fig, handles, [h.get_label() for h in handles], ncol=min(len(handles), 9, int(width / 1.4)))   # ~1.4 in a column
    suptitle(fig, title)
    return fig
