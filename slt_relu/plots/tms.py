"""Figures of the toy model of superposition's k-gons (``slt_relu.kinds.tms_kind``): the columns of W of each
k-gon, the learning coefficient per k-gon against its first-principles value, and the k-gons' losses; and of its
Bayesian transition (``slt_relu.kinds.tms_transition_kind``)."""
from __future__ import annotations

import numpy as np

from ._style import figure_axes, label_grid, legend_right, panel_grid, round_log_ticks, subplots, suptitle, wrap

__all__ = ["column_plane", "kgon_gallery_figure", "kgon_loss_figure", "tms_lambda_figure", "tms_transition_figure"]



def column_plane(ax, lim: float):
    """The square [-lim, lim]^2 of the plane of W's columns, equal aspect, with the axes through 0."""
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.85", lw=0.5, zorder=0)
    ax.axvline(0, color="0.85", lw=0.5, zorder=0)
    ax.tick_params(labelsize=6)

def _variant_label(k: int, variant: str) -> str:
    return f"{k}-gon" + (f" {variant}" if variant else "")


def _rows(ds) -> list[dict]:
    """The ``tms`` kind's table rows (``c``, ``k``, ``variant``, ``loss``, ``kind``, ``lambda_exact``, ``lambda``,
    ``lambda_se``; NaN: none; those the Dataset has) of its results Dataset, along ``row``."""
    cols = {"c": "c", "k": "k", "variant": "variant", "loss": "loss", "kind": "critical_kind",
            "lambda_exact": "lambda_exact", "lambda": "lambda", "lambda_se": "lambda_se"}
    cols = {key: name for key, name in cols.items() if name in ds.variables}
    values = {key: ds[name].values.tolist() for key, name in cols.items()}
    return [{key: values[key][i] for key in cols} for i in range(ds.sizes["row"])]


def kgon_gallery_figure(ds, *, title: str = "The k-gon minima of the TMS: the columns of W"):
    """One small panel per k-gon: the columns W[:, i] of W as arrows from the origin (as in Chen et al.
    2023's figures), the zero columns of unused features as dots (filled: positive bias, hollow: negative).

    Args:
        ds: the ``tms`` kind's results Dataset, or the rows of it to draw (``ds.isel(row=...)``), a panel each:
            along ``row`` ``W`` (row, hidden, feature) and ``b`` (row, feature) (NaN beyond the row's c), the
            coordinates ``c``, ``k`` and ``loss``; optionally ``variant``, ``lambda_exact``, ``lambda``, ``lambda_se``
            (NaN: none).
        title: the figure's title.

    Returns:
        the Figure.
    """
    rows = _rows(ds)
    n = len(rows)
    Ws = [ds["W"].values[i][:, :r["c"]] for i, r in enumerate(rows)]
    bs = [ds["b"].values[i][:r["c"]] for i, r in enumerate(rows)]
    fig, axes, _ = panel_grid(max(n, 1), 1.75, 2.0, share=True)
    lim = 1.15 * max([float(np.max(np.linalg.norm(W, axis=0))) for W in Ws] + [1.0])
    for ax, p, W, b in zip(axes.flat, rows, Ws, bs):
        long = np.linalg.norm(W, axis=0) > 1e-12
        ax.quiver(np.zeros(long.sum()), np.zeros(long.sum()), W[0, long], W[1, long], angles="xy",
                  scale_units="xy", scale=1, width=0.02, color="C0")
        short = ~long
        if short.any():
            pos = short & (b > 0)
            ax.plot(np.zeros(pos.sum()), np.zeros(pos.sum()), "o", color="C3", ms=5)
            if (short & ~pos).any():
                ax.plot([0], [0], "o", mfc="none", color="C3", ms=8)
        lam = []
        if np.isfinite(p.get("lambda_exact", np.nan)):
            lam.append(f"λ {p['lambda_exact']:.3g}")
        if np.isfinite(p.get("lambda", np.nan)):
            lam.append(f"est {p['lambda']:.3g}±{p['lambda_se']:.1g}")
        head = f"c={p['c']} {_variant_label(p['k'], p.get('variant', ''))}"
        ax.set_title(f"{head}\nL={p['loss']:.4g}" + ("\n" + ", ".join(lam) if lam else ""), fontsize=7)
        column_plane(ax, lim)
    label_grid(axes, n, "W[0, i]", "W[1, i]", fontsize=7)
    suptitle(fig, title + " (red dots at the origin: unused features, filled with a positive bias, "
                          "hollow with negative ones)")
    return fig


def tms_lambda_figure(ds, *, title: str = "lambda per k-gon: tempered SMC's free-energy curve of the local "
                                         "potential against first principles"):
    """Two panels: each estimated k-gon's lambda minus its first-principles value (bars: 2 standard errors; 0:
    agreement) against the first-principles value (rows without one are left out there); and t E_t[L - L*]
    against log10 t for every run (the fitted window shaded), which levels off at lambda.

    Args:
        ds: the ``tms`` kind's results Dataset: the table along ``row`` (``c``, ``k``, ``variant``, ``lambda``,
            ``lambda_se``, ``lambda_exact``, NaN where there is none), the estimated k-gons along ``estimated``
            (their rows ``estimated_row``; optionally the fitted ``window`` (estimated, bound), shaded) with their
            curves ``t`` and ``mean_loss`` (estimated, run, stage; NaN: padding).
        title: the figure's title.

    Returns:
        the Figure.
    """
    rows = _rows(ds.isel(row=ds["estimated_row"].values))
    fig, (ax, ax2) = subplots(1, 2, figsize=(11, 4.2))
    markers = "osD^v<>ph*"
    n = len(rows)
    ax.axhline(0, color="0.6", lw=0.8, zorder=0, label="estimate = first principles")
    for i, r in enumerate(rows):
        if not np.isfinite(r["lambda_exact"]):
            continue
        x = r["lambda_exact"] + 0.06 * (i - (n - 1) / 2)          # side by side where the values coincide
        ax.errorbar([x], [r["lambda"] - r["lambda_exact"]], yerr=[2 * r["lambda_se"]], fmt=markers[i % len(markers)],
                    color=f"C{i % 10}", ms=5, capsize=2, label=f"c = {r['c']}, {_variant_label(r['k'], r['variant'])}")
    ax.set_xlabel("lambda from first principles")
    ax.set_ylabel("estimate - first principles (bars: 2 se)")
    legend_right(ax)
    for i, r in enumerate(rows):
        for t, loss in zip(ds["t"].values[i], ds["mean_loss"].values[i]):
            ok = np.isfinite(t) & (t > 1)                     # NaN: padding
            if ok.any():
                ax2.plot(np.log10(t[ok]), t[ok] * loss[ok], lw=0.6, color=f"C{i % 10}", alpha=0.45)
        if np.isfinite(r["lambda_exact"]):
            ax2.axhline(r["lambda_exact"], color=f"C{i % 10}", lw=0.8, ls="--")
    shaded = bool(rows) and "window" in ds
    if shaded:
        t_lo, t_hi = ds["window"].values[0]
        ax2.axvspan(np.log10(t_lo), np.log10(t_hi), color="0.93", zorder=0)
    ax2.set_xlabel("log10 t" + (" (shaded: the fitted window)" if shaded else ""))
    ax2.set_ylabel("t E_t[L - L*] (dashed: first principles)")
    suptitle(fig, title)
    return fig


def kgon_loss_figure(ds, *, title: str = "The exact population loss of every k-gon", ax=None):
    """The exact population loss of every k-gon and variant against k, one colour per number of features c: minima
    filled, saddles and numerical minima hollow, points that are not critical as crosses, the lowest minimum of each
    k joined by a line (where it flattens, more active features stop paying).

    Args:
        ds: the ``tms`` kind's results Dataset: along ``row`` the coordinates ``c``, ``k``, ``critical_kind`` and
            ``loss``.
        title: the axes' title.
        ax: draw into this axes (its figure is returned) instead of a new figure.

    Returns:
        the Figure.
    """
    from matplotlib.lines import Line2D

    rows = _rows(ds)
    fig, ax = figure_axes(ax, (7.5, 4.2))
    cs = sorted({r["c"] for r in rows})
    groups = (("minimum", "o", {}, "minima"), ("saddle", "o", {"mfc": "none"}, "saddles, numerical minima"),
              ("not critical", "x", {}, "not critical"))
    for j, c in enumerate(cs):
        mine = [r for r in rows if r["c"] == c]
        minima = [r for r in mine if r["kind"] == "minimum"]
        ks = sorted({r["k"] for r in minima})
        best = [min(r["loss"] for r in minima if r["k"] == k) for k in ks]
        ax.plot(ks, best, "-", color=f"C{j}", lw=1)
        for kind, marker, style, _ in groups:
            sel = [r for r in mine if (r["kind"] if r["kind"] in ("minimum", "not critical") else "saddle") == kind]
            if sel:
                ax.plot([r["k"] for r in sel], [r["loss"] for r in sel], marker, color=f"C{j}", ms=5, ls="none",
                        **style)
    # the legend: a colour per c, a marker per kind of point (grey), not every pairing of the two
    handles = [Line2D([], [], color=f"C{j}", marker="o", lw=1, label=f"c = {c}") for j, c in enumerate(cs)]
    handles += [Line2D([], [], color="0.4", marker=marker, ls="none", label=words, **style)
                for _, marker, style, words in groups]
    handles.append(Line2D([], [], color="0.4", lw=1, label="the lowest minimum of each k"))
    ax.set_xlabel("k (active features)")
    ax.set_ylabel("exact population loss L")
    ax.set_xticks(sorted({r["k"] for r in rows}))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    ax.set_title(wrap(title, 5.0, 9), fontsize=9)
    return fig


def tms_transition_figure(ns, phases, mass, mass_se, log_ratio, crossover: float, crossover_se: float,
                          formula: float, *, pair: tuple = ("6-gon", "5-gon"), free_energy: dict | None = None,
                          beta: float = 1.0, title: str = "The toy model of superposition's Bayesian phase transition"):
    """The toy model of superposition's Bayesian phase transition (Chen et al. 2023), two or three panels against n
    (log scale): the posterior mass of each k-gon phase (phases that never reach 1% left out); the log mass ratio of
    two phases (the 6-gon / 5-gon at c = 6), which crosses 0 where the first takes the lead, with that crossover
    measured by SMC (shaded: +- 1 se) beside the asymptotic formula's (``slt_relu.tms.transition``); and, where
    given, each phase's local free energy less its loss term against its asymptotic form lambda log(n beta) + C.

    Args:
        ns: the sample sizes (N,).
        phases: the phase names (P,).
        mass: the posterior mass of each phase, the mean over data sets (N, P).
        mass_se: its standard error over data sets (N, P).
        log_ratio: log(mass of pair[0] / mass of pair[1]) per n (N,), NaN where undefined.
        crossover: the n where the ratio crosses 0 (NaN: none), ``crossover_se`` its standard error.
        crossover_se: the crossover's standard error.
        formula: the asymptotic formula's n, n (L_b - L_a) = (lambda_a - lambda_b) log n.
        pair: the names of the two phases (a, b) of the ratio.
        free_energy: a third panel, each phase's local free energy less its loss term against n:
            {phase: {"n": (B,), "G": (B,) G_alpha = F_alpha - n beta L_n(w_alpha) (mean over data sets), "G_se": (B,),
            "lambda", "C": the asymptotic form lambda log(n beta) + C drawn beside it (None: not drawn)}}
            (``slt_relu.tms.transition_checks``).
        beta: the inverse temperature (the asymptotic form's n beta).
        title: the figure's title.

    Returns:
        the Figure.
    """
    ns, mass, mass_se = np.asarray(ns, float), np.asarray(mass, float), np.asarray(mass_se, float)
    fig, axes = subplots(1, 3 if free_energy else 2, figsize=(16.5, 4.4) if free_energy else (11.0, 4.2))
    for ax in axes[:2]:
        if np.isfinite(crossover):
            ax.axvspan(crossover - crossover_se, crossover + crossover_se, color="0.85", zorder=0)
            ax.axvline(crossover, color="k", lw=1, label=f"SMC crossover n = {crossover:.0f} +- {crossover_se:.0f}")
        if np.isfinite(formula):
            ax.axvline(formula, color="C3", ls="--", lw=1, label=f"formula n = {formula:.0f}")
        ax.set_xscale("log")
        round_log_ticks(ax)
        ax.set_xlabel("n")
    for j, name in enumerate(phases):
        if np.nanmax(mass[:, j]) < 0.01:
            continue
        axes[0].errorbar(ns, mass[:, j], yerr=mass_se[:, j], marker="o", ms=3, capsize=2, label=str(name))
    axes[0].set_ylabel("posterior mass (bars: se over data sets)")
    axes[0].set_ylim(-0.02, 1.02)
    legend_right(axes[0])
    ratio = np.asarray(log_ratio, float)
    axes[1].plot(ns, ratio, "o-", ms=3, color="C0")
    axes[1].axhline(0.0, color="0.5", lw=0.8)
    axes[1].set_ylabel(f"log(mass {pair[0]} / mass {pair[1]})")
    legend_right(axes[1])
    if free_energy:
        ax = axes[2]
        for j, (name, cv) in enumerate(free_energy.items()):
            n = np.asarray(cv["n"], float)
            ax.errorbar(n, cv["G"], yerr=cv["G_se"], marker="o", ms=3, capsize=2, color=f"C{j}", label=str(name))
            if cv.get("lambda") is not None and cv.get("C") is not None:
                grid = np.geomspace(n.min(), n.max(), 50)
                ax.plot(grid, cv["lambda"] * np.log(grid * beta) + cv["C"], ls="--", lw=1, color=f"C{j}",
                        label=f"{cv['lambda']:g} log n + C")
        ax.set_xscale("log")
        round_log_ticks(ax)                       # a decade or so: labels at 200, 500, 1000, ... not one
        ax.set_xlabel("n")
        ax.set_ylabel("F_alpha - n L_n(w_alpha) (nats; bars: se)")
        legend_right(ax)
    suptitle(fig, title)
    return fig
