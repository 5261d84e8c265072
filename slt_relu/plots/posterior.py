"""Posterior experiments (DSLT4): phase masses and local free energies against the swept value, the
DSLT4 rules against classify_phase, phase diagrams, effective-weight histograms, chain traces.  Points
whose SMC runs still disagree are drawn as open markers."""
from __future__ import annotations

import matplotlib
import matplotlib.cm
import matplotlib.colors
import numpy as np

from ._style import (PHASE_COLOURS, figure_axes, figure_legend, finish_panels, label_grid, legend_right, log_ticks,
                     new_figure, own_figure, panel_grid, subplots, suptitle, wrap)

__all__ = ["cross_table_figure", "free_energy_figure", "free_energy_scaling_figure", "phase_diagram_figure",
           "phase_mass_figure", "posterior_traces_figure", "trace_lines", "weights_facets_figure", "weights_subsample"]


def _mark_unconverged(ax, xs, ys, unconverged, j: int, colour):
    """White-filled markers over the points of line j whose SMC runs still disagree on this curve
    (unconverged: (L, X) booleans or None)."""
    if unconverged is None or not np.any(unconverged[j]):
        return
    bad = np.asarray(unconverged[j], bool) & np.isfinite(ys)
    ax.plot(xs[bad], ys[bad], ls="none", marker="o", ms=7, mfc="white", mec=colour, mew=1.5, zorder=5)


def _unconverged_note(ax, unconverged: dict | None):
    """A legend entry for the open markers (call before ax.legend)."""
    if unconverged and any(np.any(u) for u in unconverged.values()):
        ax.plot([], [], ls="none", marker="o", ms=7, mfc="white", mec="0.3", mew=1.5,
                label="open: not converged (runs disagree)")


def phase_mass_figure(xs, xlabel: str, panels, *, title: str, shades=None, crossover=None):
    """The posterior mass of each phase against the swept value, with error bars (standard errors across data
    sets), one panel per labelling of the same draws (e.g. a DSLT4 rule, classify_phase), stacked on one x axis:
    a Bayesian phase transition is where one phase's mass overtakes another's.

    Args:
        xs: (X,) the swept values.
        xlabel: their name.
        panels: a list of (panel title, {phase: (mass (L, X), its standard error (L, X))}, unconverged), one panel
            each; L lines per phase, one per value of a second sweep axis (light to dark: ``shades``);
            unconverged: {phase: (L, X) bool} or None, the points whose SMC runs still disagree on that phase's
            mass, drawn as open markers.
        title: the figure's title.
        shades: (the second axis' name, its first value, its last value), named in the panels' titles.
        crossover: (value, standard error) of the transition, marked on the first panel (dashed, shaded +- 1 se).

    Returns:
        the Figure.
    """
    xs = np.asarray(xs, float)
    P = max(len(panels), 1)
    fig, axs = subplots(P, 1, figsize=(9.0, 3.4 * P + 0.6), squeeze=False, sharex=True)
    for p, (ax, (ptitle, phases, unconverged)) in enumerate(zip(axs.flat, panels)):
        for k, (nm, (m, e)) in enumerate(phases.items()):
            m, e = np.atleast_2d(m), np.atleast_2d(e)
            colour = PHASE_COLOURS.get(nm, f"C{k}")
            for j in range(m.shape[0]):
                alpha = 0.35 + 0.65 * (j + 1) / m.shape[0]
                ax.errorbar(xs, m[j], yerr=np.nan_to_num(e[j]), color=colour, alpha=alpha, marker="o", ms=3,
                            capsize=2, lw=1.2, label=nm if j == m.shape[0] - 1 else None)
                _mark_unconverged(ax, xs, m[j], (unconverged or {}).get(nm), j, colour)
        _unconverged_note(ax, unconverged)
        if p == P - 1:                                    # the shared x axis: named below the last panel
            ax.set_xlabel(xlabel)
        ax.set_ylabel("posterior mass")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        extra = f"\n(shades: {shades[0]} from light = {shades[1]} to dark = {shades[2]})" if shades else ""
        if p == 0 and crossover is not None and crossover[0] is not None and np.isfinite(crossover[0]):
            c, se = crossover
            ax.axvline(c, color="k", ls="--", lw=1)
            ax.axvspan(c - (se or 0), c + (se or 0), color="k", alpha=0.08)
            extra += f"\ncrossover (dashed, shaded: +- 1 se): {c:.3f} +- {se or 0:.3f}"
        ax.set_title(wrap(ptitle, 6.0, 9) + extra, fontsize=9)
        legend_right(ax)
    return suptitle(fig, title)


def cross_table_figure(xs, xlabel: str, tables: dict, *, title: str, shades=None):
    """A DSLT4 rule against classify_phase on the same draws, one panel per phase of the rule: its posterior mass
    against the swept value, stacked by the classify_phase label of those draws (which phases of W0 the rule's
    phase holds; hatched: draws not in W0 at the data's resolution).

    Args:
        xs: (X,) the swept values.
        xlabel: their name.
        tables: {rule phase: {classify_phase label: masses (L, X) or (X,)}}; of L lines (one per value of a
            second sweep axis) the last, the darkest shade of the other figures, is drawn.
        title: the figure's title.
        shades: (the second axis' name, its first value, its last value): the last is named in the title.

    Returns:
        the Figure.
    """
    xs = np.asarray(xs, float)
    names = list(tables)
    labels = list(dict.fromkeys(lab for row in tables.values() for lab in row))
    colours = {lab: ("tab:gray" if lab == "not in W0" else f"C{k}") for k, lab in enumerate(labels)}
    fig, axs = subplots(1, len(names), figsize=(4.4 * len(names), 4.4), squeeze=False)
    for ax, nm in zip(axs.flat, names):
        bottom = np.zeros(len(xs))
        for lab in labels:
            if lab not in tables[nm]:
                continue
            m = np.atleast_2d(np.asarray(tables[nm][lab], float))[-1]
            ax.fill_between(xs, bottom, bottom + m, color=colours[lab], alpha=0.75, lw=0, label=lab,
                            hatch="//" if lab == "not in W0" else None)
            bottom = bottom + m
        ax.plot(xs, bottom, "k-", lw=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("posterior mass")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.set_title(f"rule phase: {nm}", fontsize=9)
    figure_legend(fig, axes=axs.flat, ncol=min(3, len(labels)))
    extra = f" (shade: {shades[0]} = {shades[2]})" if shades else ""
    return suptitle(fig, title + extra)


def free_energy_figure(xs, xlabel: str, curves: dict, *, title: str, shades=None, unconverged=None,
                       ax=None):
    """Each phase's local free energy against the swept value, F_alpha - F = -log mass_alpha (nats), with error bars
    (standard errors across data sets): a Bayesian phase transition is where two phases' curves cross (the lower
    one holds more mass).

    Args:
        xs: (X,) the swept values.
        xlabel: their name.
        curves: {phase: (F_alpha - F (L, X), its standard error (L, X))}, L lines per phase, one per value of a
            second sweep axis (light to dark: ``shades``); NaN: not drawn.
        title: the figure's title (not drawn into a host's axes).
        shades: (the second axis' name, its first value, its last value), named in the axes' title.
        unconverged: {phase: (L, X) bool} or None, the points whose SMC runs still disagree, drawn as open markers.
        ax: draw into this axes (its figure is returned) instead of a new figure.

    Returns:
        the Figure.
    """
    xs = np.asarray(xs, float)
    fig, ax = figure_axes(ax, (8.4, 4.8))
    for k, (nm, (f, e)) in enumerate(curves.items()):
        f, e = np.atleast_2d(np.asarray(f, float)), np.atleast_2d(np.asarray(e, float))
        for j in range(f.shape[0]):
            ok = np.isfinite(f[j])
            alpha = 0.35 + 0.65 * (j + 1) / f.shape[0]
            ax.errorbar(xs[ok], f[j][ok], yerr=np.nan_to_num(e[j][ok]), color=PHASE_COLOURS.get(nm, f"C{k}"),
                        alpha=alpha, marker="o", ms=3, capsize=2, lw=1.2, label=nm if j == f.shape[0] - 1 else None)
            _mark_unconverged(ax, xs, f[j], (unconverged or {}).get(nm), j, PHASE_COLOURS.get(nm, f"C{k}"))
    _unconverged_note(ax, unconverged)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("F_alpha - F = -log mass_alpha  (nats)")
    ax.grid(alpha=0.3)
    legend_right(ax, fontsize=8)
    extra = f"\n(shades: {shades[0]} from light = {shades[1]} to dark = {shades[2]})" if shades else ""
    ax.set_title(f"local free energies (lower = more mass; crossings are transitions){extra}", fontsize=9)
    if own_figure(fig, ax):                               # its own figure (or one with only this axes)
        suptitle(fig, title)
    return fig


def free_energy_scaling_figure(xs, xlabel: str, n_beta, curves: dict, *, title: str, point_labels=None):
    """Each phase's local free energy against log(n beta) at fixed data, and the learning coefficient read off it
    (Watanabe's expansion restricted to the phase alpha, L_min the data set's smallest loss):

        G_alpha = F_alpha - n beta L_min = lambda_alpha log(n beta) + const + ...

    Several panels: on top one per phase, G_alpha against log(n beta) with one line per sweep point, coloured by the
    point's value (the colour bar): the means over data sets with their standard errors and the least-squares line
    whose slope is lambda_alpha (markers alone where there is no fit); below, those slopes lambda_alpha with their
    standard errors against the sweep value, one colour per phase.  Parallel lines: one lambda along the sweep; a
    fan: lambda changes with it.

    Args:
        xs: (P,) the sweep points' values along the swept axis other than beta (e.g. t).
        xlabel: the axis' name.
        n_beta: (P, B) the n beta of each point's B inverse temperatures, or (B,) shared by all points.
        curves: {phase: (G (P, B) the mean over data sets of G_alpha (nats; NaN: not measured), its standard error
            across data sets (P, B), lambda (P,) the slope (NaN: no fit), its standard error (P,))}.
        title: the figure's title (what is drawn is appended).
        point_labels: P names of the points, for points that do not lie along one numeric axis: xs then only
            orders them (e.g. ``range(P)``), and the colour bar and the lower panel's axis show the names.

    Returns:
        the Figure.
    """
    xs = np.asarray(xs, float)
    P = len(xs)
    n_beta = np.asarray(n_beta, float)
    n_beta = np.broadcast_to(n_beta, (P, n_beta.shape[-1]))
    names = list(curves)
    cols = max(len(names), 1)
    fig = new_figure((max(8.0, 3.3 * cols + 1.4), 7.6))
    grid = fig.add_gridspec(2, cols, height_ratios=[3.0, 2.2])
    top = []
    for j in range(cols):
        top.append(fig.add_subplot(grid[0, j], sharex=top[0] if j else None, sharey=top[0] if j else None))
    low = fig.add_subplot(grid[1, :])
    cmap = matplotlib.colormaps["viridis"]
    if point_labels is not None:                          # a colour per named point, its name on the colour bar
        norm = matplotlib.colors.BoundaryNorm(np.arange(P + 1) - 0.5, cmap.N)
        colour_of = np.arange(P)
    else:
        lo, hi = (float(xs.min()), float(xs.max())) if P else (0.0, 1.0)
        norm = matplotlib.colors.Normalize(lo, hi if hi > lo else lo + 1.0)
        colour_of = xs
    for ax, nm in zip(top, names):
        G, G_se, lam, lam_se = (np.asarray(a, float) for a in curves[nm])
        G, G_se = G.reshape(P, -1), G_se.reshape(P, -1)
        for p in range(P):
            t, ok = np.log(n_beta[p]), np.isfinite(G[p])
            if not ok.any():
                continue
            colour = cmap(norm(colour_of[p]))
            ax.errorbar(t[ok], G[p][ok], yerr=np.nan_to_num(G_se[p][ok]), fmt="o", ms=3.5, color=colour,
                        elinewidth=0.8, capsize=0)
            if np.isfinite(lam[p]) and ok.sum() > 1:      # the least-squares line through the points' centroid
                ax.plot(t[ok], np.mean(G[p][ok]) + lam[p] * (t[ok] - np.mean(t[ok])), color=colour, lw=1.1)
        ax.set_title(f"phase: {nm}", fontsize=10)
        ax.set_xlabel("log(n beta)")
        ax.grid(alpha=0.3)
    top[0].set_ylabel("G_alpha = F_alpha - n beta L_min (nats)")
    for ax in top[1:]:
        ax.tick_params(labelleft=False)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm, cmap), ax=top, label=xlabel, aspect=25)
    if point_labels is not None:                          # at most about 12 names on the bar: apart at 10 points
        shown = np.arange(0, P, -(-P // 12))
        bar.set_ticks(shown, labels=[str(point_labels[i]) for i in shown])
    for k, nm in enumerate(names):
        _, _, lam, lam_se = (np.asarray(a, float) for a in curves[nm])
        ok = np.isfinite(lam)
        low.errorbar(xs[ok], lam[ok], yerr=np.nan_to_num(lam_se[ok]), fmt="o-", ms=4, capsize=2, lw=1.2,
                     color=PHASE_COLOURS.get(nm, f"C{k}"), label=nm)
    if point_labels is not None:
        low.set_xticks(np.arange(P), [str(s) for s in point_labels], rotation=90 if P > 4 else 0)
    low.set_xlabel(xlabel)
    low.set_ylabel("lambda_alpha (bars: se)")
    low.set_title("the slopes of the lines above: each phase's learning coefficient", fontsize=10)
    low.grid(alpha=0.3)
    figure_legend(fig, axes=[low], fontsize=9)            # below: beside the panel it would narrow the panels above
    return suptitle(fig, f"{title}: local free energies against log(n beta) and their slopes", fontsize=11)


def phase_diagram_figure(xs, ys, masses: dict, crossover, crossover_se, *, xlabel: str, ylabel: str,
                         crossover_label: str, title: str):
    """A sweep over two axes as a phase diagram, a panel per phase and one more: each phase's posterior mass over
    the grid of the two axes (one colour scale, 0 to 1; the grid's cells evenly spaced whatever the values), and
    the crossover along x (where the two phases' masses cross) against y with its bootstrap standard error: how
    the transition moves with the second axis.

    Args:
        xs: (X,) the values along x (the crossover's axis).
        ys: (Y,) the values along y (log-scaled in the last panel where they span more than a factor 5).
        masses: {phase: (Y, X) mass}, rows along y.
        crossover: (Y,) the crossover along x at each y (NaN: none).
        crossover_se: (Y,) its standard error.
        xlabel: x's name.
        ylabel: y's name.
        crossover_label: the last panel's y label.
        title: the figure's title.

    Returns:
        the Figure.
    """
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    names = list(masses)
    fig, axs = subplots(1, len(names) + 1, figsize=(4.3 * (len(names) + 1), 4.2), squeeze=False)
    for ax, nm in zip(axs.flat, names):
        im = ax.pcolormesh(np.arange(len(xs) + 1) - 0.5, np.arange(len(ys) + 1) - 0.5, np.asarray(masses[nm], float),
                           vmin=0, vmax=1, cmap="magma", shading="flat")
        ax.set_xticks(range(len(xs)), [f"{v:.3g}" for v in xs], rotation=90, fontsize=7)
        ax.set_yticks(range(len(ys)), [f"{v:.4g}" for v in ys], fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"mass: {nm}", fontsize=9)
    if names:                                             # one scale, 0 to 1, for every map
        fig.colorbar(im, ax=list(axs.flat[:len(names)]), fraction=0.046 / len(names), label="posterior mass")
    ax = axs.flat[len(names)]
    ax.errorbar(ys, crossover, yerr=np.nan_to_num(crossover_se), marker="o", capsize=3)
    if ys.min() > 0 and ys.max() / ys.min() > 5:
        ax.set_xscale("log")
        log_ticks(ax, ys, fmt="{:.4g}")
    ax.set_xlabel(ylabel)
    ax.set_ylabel(wrap(crossover_label, 3.0, 10))
    ax.grid(alpha=0.3)
    ax.set_title("crossover", fontsize=9)
    return suptitle(fig, title)


WEIGHTS_MAX_POINTS = 40000      # effective weights drawn per panel at most (a random subsample beyond)
TRACE_MAX_LEN = 1500            # draws per trace about at most (every k-th beyond)


def weights_subsample(effs, max_points: int = WEIGHTS_MAX_POINTS) -> list:
    """The effective weights that :func:`weights_facets_figure` draws: each panel's points, those of a panel with more
    than ``max_points`` a random subsample of ``max_points`` (one generator seeded 0, drawn from panel by panel).

    Args:
        effs: each panel's effective weights, (N, 2) each.
        max_points: the most points a panel draws.

    Returns:
        each panel's (N', 2) points, N' = min(N, max_points); a panel whose N is at most max_points as it was.
    """
    rng = np.random.default_rng(0)
    out = []
    for eff in effs:
        eff = np.asarray(eff)
        out.append(eff[rng.choice(len(eff), max_points, replace=False)] if len(eff) > max_points else eff)
    return out


def weights_facets_figure(panels, *, title: str, max_points: int = WEIGHTS_MAX_POINTS):
    """One panel per sweep point: a 2-D histogram (log colour) of the effective weights |q_i| w_i
    of all nodes over all draws (DSLT4's posterior pictures), the truth's as red crosses.

    Args:
        panels: list of (label, eff (N, 2), truth_eff (m, 2)).
        title: the figure's title.
        max_points: the most points a panel draws: beyond, a random subsample (:func:`weights_subsample`).

    Returns:
        the Figure.
    """
    fig, axes, nrows = panel_grid(len(panels), 2.8, 3.0, share=True)
    R = 1.2 * max(max(float(np.max(np.linalg.norm(t, axis=1))) for _, _, t in panels), 1.0)
    effs = weights_subsample([eff for _, eff, _ in panels], max_points)
    for ax, (label, _, truth_eff), eff in zip(axes.flat, panels, effs):
        ax.hist2d(eff[:, 0], eff[:, 1], bins=90, range=[[-R, R], [-R, R]], cmap="Greys",
                  norm=matplotlib.colors.LogNorm())
        ax.plot(truth_eff[:, 0], truth_eff[:, 1], "x", color="red", ms=7, mew=2)
        ax.plot([0], [0], "+", color="tab:blue", ms=6)
        ax.set_aspect("equal")
        ax.locator_params(nbins=5)
        ax.tick_params(labelsize=7)                       # shared axes: the tick labels on the outer panels
        ax.set_title(wrap(label, 2.6, 7.5), fontsize=7.5)
    label_grid(axes, len(panels), "|q_i| w_i1", "|q_i| w_i2")
    return finish_panels(fig, title, nrows)


def trace_lines(loss, radii, max_len: int = TRACE_MAX_LEN):
    """What :func:`posterior_traces_figure` draws of one sweep point's chains: every k-th draw, k = max(1, S //
    max_len), of each chain's L_n and of its smallest and largest effective-weight radius.

    Args:
        loss: (C, S) L_n of each chain's draws.
        radii: (C, S, d) the radius |q_i| |w_i| of each node of each draw.
        max_len: about the most draws a trace keeps.

    Returns:
        (draw, loss, smallest, largest): draw (S',) the kept draws' positions, loss (C, S'), the smallest and the
        largest radius (C, S').
    """
    loss, radii = np.asarray(loss), np.asarray(radii)
    step = max(1, loss.shape[1] // max_len)
    return np.arange(0, loss.shape[1], step), loss[:, ::step], radii[:, ::step].min(-1), radii[:, ::step].max(-1)


def posterior_traces_figure(traces, *, title: str):
    """Per chosen sweep point: L_n of every chain against the draw (left) and the smallest and
    largest effective-weight radius |q_i| |w_i| of every chain (right).

    Args:
        traces: list of (values: {sweep key: value} of the point, draw (S,), loss (C, S), smallest radius (C, S),
            largest radius (C, S)), the draws as :func:`trace_lines` keeps them.
        title: the figure's title.

    Returns:
        the Figure.
    """
    fig, axes = subplots(len(traces), 2, figsize=(11, 2.6 * len(traces) + 0.5), squeeze=False)
    for row, (values, idx, loss, rmin, rmax) in zip(axes, traces):
        label = ", ".join(f"{k.split('.')[-1]} = {v:.4g}" if isinstance(v, float) else f"{k.split('.')[-1]} = {v}"
                          for k, v in values.items())           # the same short key whatever the value's type
        for c in range(loss.shape[0]):
            row[0].plot(idx, loss[c], lw=0.5, color=f"C{c % 10}")
            row[1].plot(idx, rmin[c], lw=0.5, color=f"C{c % 10}")
            row[1].plot(idx, rmax[c], lw=0.5, color=f"C{c % 10}", ls=":")
        row[0].set_ylabel("L_n(w)")
        row[0].set_title(wrap(f"{label}: L_n per chain", 5.0, 8), fontsize=8)
        row[1].set_ylabel("radius |q_i||w_i|")
        row[1].set_title(wrap(f"{label}: smallest (solid) and largest (dotted) radius per chain", 5.0, 8), fontsize=8)
        for ax in row:
            ax.set_xlabel("draw", fontsize=8)
            ax.grid(alpha=0.3)
    return suptitle(fig, title)
