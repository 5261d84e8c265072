"""Matplotlib figures for results folders (Agg backend; every function saves one PNG).

Every function takes plain arrays and labels (never a kind's settings) and writes one figure.
The module is longer than ~450 lines on purpose: it is the one place that imports matplotlib and
holds the shared styles (phase colours, panel grids); its functions do not depend on each other.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def landscape_figure(path: Path, xs, ys, Z, *, xlabel, ylabel, title, zlabel="K(w)", curves=(), markers=None,
                     along=None):
    """Heat map of Z (S, T) over xs (S,) x ys (T,) with log-spaced contours, W0 curves and markers.

    along: optional list of (title, s, values, ylabel) panels drawn to the right (quantities
    along W0, e.g. local posterior mass and Fisher rank).
    """
    along = along or []
    fig, axes = plt.subplots(1, 1 + len(along), figsize=(6.2 + 4.2 * len(along), 5.2), squeeze=False)
    ax = axes[0, 0]
    Z = np.asarray(Z)
    zmin = float(np.min(Z))
    shifted = Z - zmin
    im = ax.pcolormesh(xs, ys, shifted.T, shading="auto", cmap="viridis", vmax=np.quantile(shifted, 0.9))
    fig.colorbar(im, ax=ax, label=f"{zlabel}" + (f" - {zmin:.3g}" if abs(zmin) > 1e-12 else ""))
    top = float(np.max(shifted))
    if top > 0:
        levels = np.geomspace(max(top * 1e-4, 1e-6), top, 9)
        cs = ax.contour(xs, ys, shifted.T, levels=levels, colors="white", linewidths=0.7, alpha=0.8)
        ax.clabel(cs, fmt="%.2g", fontsize=7)
    for i, curve in enumerate(curves):
        curve = np.asarray(curve)
        ax.plot(curve[:, 0], curve[:, 1], color="#ff4f4f", lw=2.2, label="W0 (K = 0)" if i == 0 else None)
    for name, (mx, my) in (markers or {}).items():
        ax.plot(mx, my, "o", ms=8, mfc="none", mew=2, label=name)
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(ys[0], ys[-1])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title("\n".join(textwrap.fill(line, 60) for line in title.split("\n")), fontsize=9)
    if curves or markers:
        ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
    for k, (ptitle, s, values, ylab) in enumerate(along, start=1):
        a = axes[0, k]
        a.plot(s, values, "o-", ms=3)
        a.set_title(ptitle, fontsize=10)
        a.set_xlabel("position along W0 (fraction of arc length)")
        a.set_ylabel(ylab)
        a.grid(alpha=0.3)
        if ylab == "rank":
            top = int(np.max(values))
            a.set_ylim(-0.3, top + 1.3)
            a.set_yticks(range(0, top + 2))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def rank_vs_bound_figure(path: Path, rows):
    """Fisher rank against the generic bound D - d, one marker style per group of points."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.8))
    groups = sorted({r["group"] for r in rows}, key=[r["group"] for r in rows].index)
    markers = "osD^v<>p*h"
    top = max(r["bound"] for r in rows)
    ax.plot([0, top], [0, top], "k--", lw=1, label="rank = D - d")
    for g, m in zip(groups, markers * 4):
        pts = [r for r in rows if r["group"] == g]
        ax.scatter([r["bound"] for r in pts], [r["rank"] for r in pts], marker=m, s=30, alpha=0.7, label=g)
    ax.set_xlabel("D - d (parameters minus hidden nodes)")
    ax.set_ylabel("numerical rank of I(w)")
    ax.set_title("Fisher rank vs the scaling bound D - d")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    sel = [r for r in rows if r["excess"] > 0 or (r["expected_excess"] or 0) > 0]
    labels = [r["label"] for r in sel]
    if labels:
        x = np.arange(len(sel))
        ax2.bar(x - 0.2, [r["excess"] for r in sel], 0.4, label="measured excess")
        exp = [r["expected_excess"] if r["expected_excess"] is not None else np.nan for r in sel]
        ax2.bar(x + 0.2, exp, 0.4, label="hand count")
        ax2.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
        ax2.set_ylabel("excess null directions")
        ax2.legend(fontsize=8)
    else:
        ax2.text(0.5, 0.5, "no excess null directions", ha="center", va="center", transform=ax2.transAxes)
    ax2.set_title("null directions beyond the scaling generators")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def spectrum_figure(path: Path, rows, max_lines: int = 60):
    """Eigenvalues of I(w) / lambda_max (log scale) with the rank threshold, per point."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    groups = sorted({r["group"] for r in rows}, key=[r["group"] for r in rows].index)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    floor = 1e-32
    for g, col in zip(groups, colors * 4):
        pts = [r for r in rows if r["group"] == g][:max_lines]
        for i, r in enumerate(pts):
            spec = np.asarray(r["spectrum"], float)
            spec = np.maximum(spec / max(spec.max(), 1e-300), floor)
            ax.semilogy(np.arange(1, len(spec) + 1), spec, "-", color=col, alpha=0.5, lw=1,
                        label=g if i == 0 else None)
            ax.plot(r["rank"] + 0.5, r["rtol"], "|", color="k", ms=8)
    ax.set_xlabel("eigenvalue index j")
    ax.set_ylabel("lambda_j / lambda_max (floored at 1e-32)")
    ax.set_title("Fisher spectra; | marks the rank cut at rtol")
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _group_style(group: int, orient: float, m: int):
    """Colour by truth boundary (tab10), black for hidden groups, grey for degenerate nodes;
    solid for the truth's orientation, dashed for reversed nodes."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if group < 0:
        return "0.6", ":"
    color = colors[group % len(colors)] if group < m else "k"
    return color, "-" if orient >= 0 else "--"


def _panel_grid(n: int, width: float, height: float):
    """A figure with n panels, at most 6 per row; unused panels switched off.  Returns (fig, axes, nrows)."""
    cols = min(6, max(n, 1))
    nrows = -(-n // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(width * cols, height * nrows), squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes, nrows


def _save_panels(fig, path: Path, title: str, nrows: int):
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / (2.7 * nrows)))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def phase_gallery_figure(path: Path, truth, rows, *, title: str, half_width: float = 1.0):
    """One panel per phase representative, in DSLT3's style: each node's activation boundary
    {<w_i, x> + b_i = 0} in the input plane (n_in = 2; a point on the line for n_in = 1) with an
    arrow along w_i into its active side; colour = the truth boundary the node sits on, dashed
    = reversed orientation, black = hidden group, and the degenerate nodes counted in the title.

    rows: dicts with "label" (str), "params" (TwoLayer), "group", "orientation" (d,), "note" (str).
    """
    fig, axes, nrows = _panel_grid(len(rows), 2.6, 3.0)
    m = np.shape(truth.w)[0]
    L = 1.5 * half_width
    for ax, row in zip(axes.flat, rows):
        p = row["params"]
        w, b = np.asarray(p.w, float), np.asarray(p.b, float)
        n_in = w.shape[1]
        ax.add_patch(plt.Rectangle((-half_width, -half_width), 2 * half_width, 2 * half_width, fill=False,
                                   ec="0.8", lw=0.8))
        seen = {}
        for i, (wi, bi) in enumerate(zip(w, b)):
            g, o = int(row["group"][i]), float(row["orientation"][i])
            if g < 0 or not np.any(wi):
                continue
            color, ls = _group_style(g, o, m)
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
    _save_panels(fig, path, title, nrows)


def effective_weights_figure(path: Path, truth, rows, *, title: str):
    """One panel per representative: the effective weights |q_i| w_i (DSLT4) as arrows from the
    origin, coloured as in phase_gallery_figure, over the truth's (grey).  n_in = 2."""
    fig, axes, nrows = _panel_grid(len(rows), 2.4, 2.6)
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
            color, ls = _group_style(int(row["group"][i]), float(row["orientation"][i]), m)
            ax.annotate("", xy=v, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=color, lw=1.5, ls=ls))
        ax.set_xlim(-R, R)
        ax.set_ylim(-R, R)
        ax.set_aspect("equal")
        ax.axhline(0, color="0.9", lw=0.6)
        ax.axvline(0, color="0.9", lw=0.6)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(row["label"], fontsize=7.5)
    _save_panels(fig, path, title, nrows)


def _pattern_colours(patterns: np.ndarray) -> np.ndarray:
    """A colour index per point from its activation pattern (N, H) bool (distinct patterns, distinct ids)."""
    from .regions import distinct_patterns

    return distinct_patterns(patterns)[1]


def regions_figure(path: Path, grid, patterns, values, layer_pre, dual, *, title: str, points=None, extra=None):
    """Sattelberg-style pictures on a 2-D grid: regions coloured by activation pattern with every
    hidden neuron's zero set (one colour per layer), the network's output with its zero set, and the
    dual points (w_x, w_y; colour b).  extra: optional (title, xs, ys, xlabel, ylabel) line panel.

    grid: (R, R, 2); patterns: (R, R, H) bool; values: (R, R); layer_pre: list of (R, R, n_l)
    pre-activations; dual: (P, 3)."""
    panels = 3 + (extra is not None)
    fig = plt.figure(figsize=(4.6 * panels, 4.3))
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
                 " one colour per layer)", fontsize=8)
    ax.set_aspect("equal")
    ax = fig.add_subplot(1, panels, 2)
    top = max(float(np.abs(values).max()), 1e-12)
    im = ax.pcolormesh(xs, ys, values, cmap="RdBu_r", shading="auto", vmin=-top, vmax=top)
    if values.min() < 0 < values.max():
        ax.contour(xs, ys, values, levels=[0.0], colors="k", linewidths=1.5)
    fig.colorbar(im, ax=ax, shrink=0.8)
    ax.set_title("f(x) (red > 0 > blue) and its zero set", fontsize=9)
    ax.set_aspect("equal")
    ax = fig.add_subplot(1, panels, 3, projection="3d")
    ax.scatter(dual[:, 0], dual[:, 1], dual[:, 2], c=dual[:, 2], cmap="viridis", s=6)
    ax.set_xlabel("w_x")
    ax.set_ylabel("w_y")
    ax.set_zlabel("b")
    ax.set_title(f"dual points (W_i, b_i): {len(np.unique(np.round(dual, 9), axis=0))} distinct", fontsize=9)
    if extra is not None:
        etitle, ex, ey, exl, eyl = extra
        ax = fig.add_subplot(1, panels, 4)
        ax.plot(ex, ey, "o-")
        ax.set_xlabel(exl)
        ax.set_ylabel(eyl)
        ax.set_title(etitle, fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def layer_boundaries_figure(path: Path, grid, layer_pre, output, *, title: str):
    """Sattelberg's Figure 5: for each layer the zero sets of its neurons in the input plane (one
    colour per neuron), earlier layers' zero sets in grey; the last panel is the output's zero set."""
    xs, ys = grid[0, :, 0], grid[:, 0, 1]
    stages = list(layer_pre) + [output[..., None]]
    fig, axes = plt.subplots(1, len(stages), figsize=(3.6 * len(stages), 3.7), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
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
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lines_figure(path: Path, neurons, means, ses, slope, *, title: str):
    """Regions along random lines against the number of neurons, with the linear fit 1 + s N."""
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    ax.errorbar(neurons, means, yerr=ses, fmt="o", capsize=3, label="mean over lines (+- 1 se)")
    grid = np.linspace(0, max(neurons) * 1.05, 50)
    ax.plot(grid, 1 + slope * grid, "--", label=f"1 + {slope:.3f} N")
    ax.set_xlabel("hidden neurons N")
    ax.set_ylabel("activation regions along the segment")
    ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def functional_dimension_figure(path: Path, rows, *, title: str):
    """Left: fraction of networks at the bound vs depth, one line per input dimension and number of
    points (95% Wilson intervals).  Right: histograms of bound - functional dimension (most points)."""
    n_ins = sorted({r["n_in"] for r in rows})
    depths = sorted({r["depth"] for r in rows})
    factors = sorted({r["point_factor"] for r in rows})
    fig = plt.figure(figsize=(5.2 + 2.0 * len(depths), 4.2 + 0.6 * len(n_ins)))
    gs = fig.add_gridspec(len(n_ins), 1 + len(depths), width_ratios=[2.6] + [1] * len(depths))
    ax = fig.add_subplot(gs[:, 0])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
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
    ax.legend(fontsize=7)
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
            if i == len(n_ins) - 1:
                a.set_xlabel("bound - dim", fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------
# posterior experiments (DSLT4)

_PHASE_COLOURS = {"degenerate": "tab:red", "non_degenerate": "tab:blue", "true_orientation": "tab:blue",
                  "reversed": "tab:red", "other": "tab:gray"}


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


def phase_mass_figure(path: Path, xs, xlabel: str, panels, *, title: str, shades=None, crossover=None):
    """Phase masses against the swept value with error bars, one panel per labelling.

    xs: (X,) the swept values; panels: list of (panel title, {phase: (mass (L, X), se (L, X))},
    unconverged: {phase: (L, X) booleans} or None, the points whose SMC runs still disagree on that
    phase's mass, drawn open),
    L lines per phase (one per value of a second sweep axis, light to dark: shades = (its label,
    first value, last value)); crossover: (value, se) marked on the first panel."""
    xs = np.asarray(xs, float)
    fig, axs = plt.subplots(1, max(len(panels), 1), figsize=(6.4 * max(len(panels), 1), 4.6), squeeze=False)
    for p, (ax, (ptitle, phases, unconverged)) in enumerate(zip(axs.flat, panels)):
        for k, (nm, (m, e)) in enumerate(phases.items()):
            m, e = np.atleast_2d(m), np.atleast_2d(e)
            colour = _PHASE_COLOURS.get(nm, f"C{k}")
            for j in range(m.shape[0]):
                alpha = 0.35 + 0.65 * (j + 1) / m.shape[0]
                ax.errorbar(xs, m[j], yerr=np.nan_to_num(e[j]), color=colour, alpha=alpha, marker="o", ms=3,
                            capsize=2, lw=1.2, label=nm if j == m.shape[0] - 1 else None)
                _mark_unconverged(ax, xs, m[j], (unconverged or {}).get(nm), j, colour)
        _unconverged_note(ax, unconverged)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("posterior mass")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        extra = f"\n(shades: {shades[0]} from light = {shades[1]} to dark = {shades[2]})" if shades else ""
        ax.set_title(ptitle + extra, fontsize=9)
        if p == 0 and crossover is not None and crossover[0] is not None and np.isfinite(crossover[0]):
            c, se = crossover
            ax.axvline(c, color="k", ls="--", lw=1)
            ax.axvspan(c - (se or 0), c + (se or 0), color="k", alpha=0.08)
            ax.text(c, 1.0, f" crossover {c:.3f} +- {se:.3f}", fontsize=8, va="top")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cross_table_figure(path: Path, xs, xlabel: str, tables: dict, *, title: str, shades=None):
    """One panel per phase of a DSLT4 rule: its mass against the swept value, split by the
    classify_phase label of the same draws (stacked; tables[rule phase][label] = (L, X) masses, the
    last of the L lines, i.e. the darkest shade, when there are several)."""
    xs = np.asarray(xs, float)
    names = list(tables)
    labels = list(dict.fromkeys(lab for row in tables.values() for lab in row))
    colours = {lab: ("tab:gray" if lab == "not in W0" else f"C{k}") for k, lab in enumerate(labels)}
    fig, axs = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
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
    handles, labs = [], []
    for ax in axs.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labs:
                handles.append(h)
                labs.append(lab)
    fig.legend(handles, labs, loc="lower center", ncol=min(3, len(labs)), fontsize=7)
    extra = f" (shade: {shades[0]} = {shades[2]})" if shades else ""
    fig.suptitle(title + extra, fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * ((len(labs) - 1) // 3), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def free_energy_figure(path: Path, xs, xlabel: str, curves: dict, *, title: str, shades=None, unconverged=None):
    """Local free energies against the swept value: curves[phase] = (F_alpha - F (L, X), its standard
    error across data sets (L, X)), F_alpha - F = -log mass_alpha; a Bayesian phase transition is where two
    phases' curves cross (the lower one holds more mass).  L lines per phase, and unconverged, as in
    phase_mass_figure."""
    xs = np.asarray(xs, float)
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    for k, (nm, (f, e)) in enumerate(curves.items()):
        f, e = np.atleast_2d(np.asarray(f, float)), np.atleast_2d(np.asarray(e, float))
        for j in range(f.shape[0]):
            ok = np.isfinite(f[j])
            alpha = 0.35 + 0.65 * (j + 1) / f.shape[0]
            ax.errorbar(xs[ok], f[j][ok], yerr=np.nan_to_num(e[j][ok]), color=_PHASE_COLOURS.get(nm, f"C{k}"),
                        alpha=alpha, marker="o", ms=3, capsize=2, lw=1.2, label=nm if j == f.shape[0] - 1 else None)
            _mark_unconverged(ax, xs, f[j], (unconverged or {}).get(nm), j, _PHASE_COLOURS.get(nm, f"C{k}"))
    _unconverged_note(ax, unconverged)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("F_alpha - F = -log mass_alpha  (nats)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    extra = f"\n(shades: {shades[0]} from light = {shades[1]} to dark = {shades[2]})" if shades else ""
    ax.set_title(f"local free energies (lower = more mass; crossings are transitions){extra}", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def free_energy_scaling_figure(path: Path, panels, *, title: str):
    """Each phase's local free energy against log(n beta) at fixed data, one panel per value of the
    other sweep axes: panels = [(label, n_beta (B,), {phase: (G (B,), its standard error across data
    sets (B,), lambda, lambda_se)})] with G = F_alpha - n beta L_min (Watanabe's expansion restricted to
    the phase: G = lambda_alpha log(n beta) + const + ...), drawn with its least-squares line."""
    fig, axes, nrows = _panel_grid(len(panels), 4.6, 3.8)
    for ax, (label, nb, curves) in zip(axes.flat, panels):
        t = np.log(np.asarray(nb, float))
        for k, (nm, (g, e, lam, lam_se)) in enumerate(curves.items()):
            g, e = np.asarray(g, float), np.asarray(e, float)
            ok = np.isfinite(g)
            if not ok.any():
                continue
            colour = _PHASE_COLOURS.get(nm, f"C{k}")
            ax.errorbar(t[ok], g[ok], yerr=np.nan_to_num(e[ok]), color=colour, marker="o", ms=3, capsize=2, lw=0,
                        elinewidth=1)
            if np.isfinite(lam):
                mid = np.mean(t[ok])
                ax.plot(t[ok], np.mean(g[ok]) + lam * (t[ok] - mid), color=colour, lw=1.2,
                        label=f"{nm}: lambda = {lam:.2f} +- {lam_se:.2f}")
        ax.set_xlabel("log(n beta)")
        ax.set_ylabel("F_alpha - n beta L_min  (nats)")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    _save_panels(fig, path, f"{title}: local free energies against log(n beta) (slopes = learning coefficients)",
                 nrows)


def phase_diagram_figure(path: Path, xs, ys, masses: dict, crossover, crossover_se, *, xlabel: str, ylabel: str,
                         crossover_label: str, title: str):
    """Two sweep axes: heat maps of each phase's mass, masses[phase]: (Y, X) (rows: ys), and the
    crossover along x against y with its bootstrap error, crossover, crossover_se: (Y,)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    names = list(masses)
    fig, axs = plt.subplots(1, len(names) + 1, figsize=(4.3 * (len(names) + 1), 4.2), squeeze=False)
    for ax, nm in zip(axs.flat, names):
        im = ax.pcolormesh(np.arange(len(xs) + 1) - 0.5, np.arange(len(ys) + 1) - 0.5, np.asarray(masses[nm], float),
                           vmin=0, vmax=1, cmap="magma", shading="flat")
        ax.set_xticks(range(len(xs)), [f"{v:.3g}" for v in xs], rotation=90, fontsize=7)
        ax.set_yticks(range(len(ys)), [f"{v:.4g}" for v in ys], fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"mass: {nm}", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    ax = axs.flat[len(names)]
    ax.errorbar(ys, crossover, yerr=np.nan_to_num(crossover_se), marker="o", capsize=3)
    ax.set_xscale("log" if ys.min() > 0 and ys.max() / ys.min() > 5 else "linear")
    ax.set_xlabel(ylabel)
    ax.set_ylabel(crossover_label)
    ax.grid(alpha=0.3)
    ax.set_title("crossover", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def weights_facets_figure(path: Path, panels, *, title: str, max_points: int = 40000):
    """One panel per sweep point: a 2-D histogram (log colour) of the effective weights |q_i| w_i
    of all nodes over all draws (DSLT4's posterior pictures), the truth's as red crosses.

    panels: list of (label, eff (N, 2), truth_eff (m, 2))."""
    fig, axes, nrows = _panel_grid(len(panels), 2.8, 3.0)
    R = 1.2 * max(max(float(np.max(np.linalg.norm(t, axis=1))) for _, _, t in panels), 1.0)
    rng = np.random.default_rng(0)
    for ax, (label, eff, truth_eff) in zip(axes.flat, panels):
        eff = np.asarray(eff)
        if len(eff) > max_points:
            eff = eff[rng.choice(len(eff), max_points, replace=False)]
        ax.hist2d(eff[:, 0], eff[:, 1], bins=90, range=[[-R, R], [-R, R]], cmap="Greys",
                  norm=matplotlib.colors.LogNorm())
        ax.plot(truth_eff[:, 0], truth_eff[:, 1], "x", color="red", ms=7, mew=2)
        ax.plot([0], [0], "+", color="tab:blue", ms=6)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(label, fontsize=7.5)
    cols = axes.shape[1]
    _save_panels(fig, path, textwrap.fill(title, max(40, 22 * cols)), nrows + (cols < 4))


def posterior_traces_figure(path: Path, traces, *, title: str, max_len: int = 1500):
    """Per chosen sweep point: L_n of every chain against the draw (left) and the smallest and
    largest effective-weight radius |q_i| |w_i| of every chain (right).

    traces: list of (values dict, loss (C, S), radii (C, S, d))."""
    fig, axes = plt.subplots(len(traces), 2, figsize=(11, 2.4 * len(traces)), squeeze=False)
    for row, (values, loss, radii) in zip(axes, traces):
        S = loss.shape[1]
        step = max(1, S // max_len)
        idx = np.arange(0, S, step)
        label = ", ".join(f"{k.split('.')[-1]} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                          for k, v in values.items())
        for c in range(loss.shape[0]):
            row[0].plot(idx, loss[c, ::step], lw=0.5, color=f"C{c % 10}")
            row[1].plot(idx, radii[c, ::step].min(-1), lw=0.5, color=f"C{c % 10}")
            row[1].plot(idx, radii[c, ::step].max(-1), lw=0.5, color=f"C{c % 10}", ls=":")
        row[0].set_ylabel("L_n(w)")
        row[0].set_title(f"{label}: L_n per chain", fontsize=8)
        row[1].set_ylabel("radius |q_i||w_i|")
        row[1].set_title(f"{label}: smallest (solid) and largest (dotted) radius per chain", fontsize=8)
        for ax in row:
            ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("draw")
    axes[-1, 1].set_xlabel("draw")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------
# learning coefficient


def llc_cases_figure(path: Path, rows, *, title: str):
    """Each case's estimate (+- 2 standard errors) by method: divided by the known value, with the
    +-10% band, when every case has one (and the exact finite-n value as a grey bar where known);
    otherwise the estimates themselves."""
    def method(r):
        return r["method"] + (" (localized)" if r["method"] == "beta_sweep" and r.get("localization") else "")

    names = list(dict.fromkeys(r["name"] for r in rows))
    methods = list(dict.fromkeys(method(r) for r in rows))
    known = all(isinstance(r["true_lambda"], (int, float)) for r in rows)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(names) + 2), 4.8))
    for k, m in enumerate(methods):
        first = True
        for r in rows:
            if method(r) != m:
                continue
            i = names.index(r["name"]) + (k - (len(methods) - 1) / 2) * 0.2
            scale = r["true_lambda"] if known else 1.0
            ax.errorbar(i, r["estimate"] / scale, yerr=2 * (r["se"] or 0) / scale, fmt="o", color=f"C{k}", capsize=3,
                        label=m if first else None)
            if known and r.get("exact_finite_n"):
                ax.hlines(r["exact_finite_n"] / scale, i - 0.12, i + 0.12, color="gray", lw=3,
                          label="exact finite-n value" if first else None)
            first = False
    if known:
        ax.axhline(1.0, color="k", lw=1.5, label="known lambda")
        ax.axhspan(0.9, 1.1, color="k", alpha=0.08, label="+-10%")
        ax.set_ylabel("estimate / known lambda")
    else:
        ax.set_ylabel("lambda_hat")
    ax.set_xticks(range(len(names)), ["\n".join(textwrap.wrap(nm, 20)) for nm in names], fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title + " (error bars: 2 standard errors)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def beta_sweep_figure(path: Path, sweeps, *, n: int):
    """E_beta[n L_n] against 1/beta per case with the weighted least-squares line (slope = lambda)."""
    fig, axes, nrows = _panel_grid(len(sweeps), 3.6, 3.2)
    for ax, (label, bs, lam) in zip(axes.flat, sweeps):
        t = 1 / np.asarray(bs.betas)
        v = np.asarray(bs.expected_nl) - bs.intercept
        ax.errorbar(t, v, yerr=2 * np.asarray(bs.se), fmt="o", capsize=3)
        tt = np.linspace(0, t.max() * 1.05, 50)
        ax.plot(tt, bs.slope * tt, "-", label=f"slope {bs.slope:.3f} +- {bs.slope_se:.3f}")
        if isinstance(lam, (int, float)):
            ax.plot(tt, lam * tt, "k--", lw=1, label=f"lambda = {lam:.4g}")
        ax.axvline(math.log(n), color="gray", ls=":", lw=1)
        ax.set_xlabel("1 / beta (dotted: log n)")
        ax.set_ylabel("E_beta[n L_n] - intercept")
        ax.set_title("\n".join(textwrap.wrap(label, 40)), fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    _save_panels(fig, path, f"beta sweep: E_beta[n L_n] = n L_n(w0) + lambda / beta (n = {n})", nrows)


def llc_calibration_figure(path: Path, grid, *, true_lambda, title: str):
    """lambda_hat over step size x localization (with the known value), the MALA acceptance, and the
    mean trace n beta (L_n(w_t) - L_n(w*)) against the step for every setting."""
    S, G = grid.estimate.shape
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    for j, gamma in enumerate(grid.localizations):
        axes[0].errorbar(grid.step_sizes, grid.estimate[:, j], yerr=2 * grid.se[:, j], marker="o", capsize=3,
                         label=f"gamma = {gamma:g}")
        axes[1].plot(grid.step_sizes, grid.accept[:, j], "o-", label=f"gamma = {gamma:g}")
    if isinstance(true_lambda, (int, float)):
        axes[0].axhline(true_lambda, color="k", ls="--", lw=1, label=f"known lambda = {true_lambda:g}")
    for ax, ylab in ((axes[0], "lambda_hat (+- 2 se)"), (axes[1], "MALA acceptance of the SGLD step")):
        ax.set_xscale("log")
        ax.set_xlabel("step size")
        ax.set_ylabel(ylab)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    T = grid.mean_trace.shape[-1]
    for i in range(S):
        for j in range(G):
            axes[2].plot(np.arange(T), grid.mean_trace[i, j], lw=0.7, color=f"C{j}",
                         alpha=0.35 + 0.65 * (i + 1) / S)
    if isinstance(true_lambda, (int, float)):
        axes[2].axhline(true_lambda, color="k", ls="--", lw=1)
    axes[2].set_xlabel("kept step (after burn-in)")
    axes[2].set_ylabel("n beta (L_n(w_t) - L_n(w*)), mean over chains")
    axes[2].set_title("traces (colour: gamma; shade: step size, light = small)", fontsize=8)
    axes[2].grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
