"""The figures of a posterior sweep (kind ``posterior``): its metrics turned into the plain arrays that
``slt_relu.plots`` draws."""
from __future__ import annotations

import numpy as np


def _axis_label(key: str) -> str:
    return {"posterior.beta": "beta", "truth.t": "t", "truth.v": "v", "posterior.n": "n"}.get(key, key)


def _where_label(values: dict) -> str:
    name = lambda k: _axis_label(k).split(".")[-1]
    return ", ".join(f"{name(k)} = {v:.4g}" if isinstance(v, float) else f"{name(k)} = {v}"
                     for k, v in values.items()) or "all points"


def posterior_figures(r, metrics, rows, params, results, outdir):
    """phase_mass.png, free_energy.png (SMC), free_energy_scaling.png (SMC swept over beta),
    phase_diagram.png (two sweep axes), effective_weights.png (n_in = 2), traces.png: a posterior
    sweep's metrics as plain arrays for slt_relu.plots."""
    from ..phases import effective_weights
    from ..plots import (cross_table_figure, free_energy_figure, free_energy_scaling_figure, phase_diagram_figure,
                         phase_mass_figure, posterior_traces_figure, save_figure, weights_facets_figure)

    s, ph, sweep = r.settings, r.settings.phases, r.sweep
    points = r.points
    title = points[0].settings.example.description.split(":")[0]
    axes = list(sweep)
    xkey = ph.crossover_axis or (axes[-1] if axes else None)
    shape = tuple(len(v) for v in sweep.values()) or (1,)
    xi = axes.index(xkey) if xkey else 0
    xs = np.asarray(sweep[xkey], float) if xkey else np.array([0.0])

    def lines(grid):                                   # (lines, len(xs)): one line per value of the other axis
        return np.moveaxis(np.asarray(grid, float).reshape(shape), xi, -1).reshape(-1, len(xs))

    # SMC's stopping rule: each rule phase's own flag, and any phase's for the other labels of the same draws
    flags = metrics.get("converged_phase")
    unconverged = {nm: ~lines(f).astype(bool) for nm, f in flags.items()} if flags else None
    anything = ~lines(metrics["converged"]).astype(bool) if "converged" in metrics else None
    panels = []
    if ph.rule != "none":
        panels.append((f"DSLT4 rule: {ph.rule}", {nm: (lines(metrics["mass"][nm]), lines(metrics["mass_se"][nm]))
                                                   for nm in metrics["mass"]}, unconverged))
    if "classify_phase" in metrics:
        cp = metrics["classify_phase"]
        names = cp.get("names", {})
        panels.append(("classify_phase: phases of W0 at the data's resolution",
                       {names.get(nm, nm): (lines(cp["mass"][nm]), lines(cp["mass_se"][nm])) for nm in list(cp["mass"])[:6]},
                       None if anything is None else {names.get(nm, nm): anything for nm in cp["mass"]}))
    if "compare" in metrics and ph.rule != "none":
        cm = metrics["compare"]
        panels.append((f"{cm['sampler'].upper()} on the same data sets: {ph.rule} rule",
                       {nm: (lines(cm["mass"][nm]), lines(cm["mass_se"][nm])) for nm in cm["mass"]}, None))
    shades = None
    if len(axes) == 2:
        other = axes[1 - xi]
        shades = (_axis_label(other), sweep[other][0], sweep[other][-1])
    cross = None
    if ph.crossover and len(axes) == 1:
        name = xkey.split(".")[-1]
        cross = (metrics.get(f"crossover_{name}"), metrics.get(f"crossover_{name}_se"))
    fig = phase_mass_figure(xs, _axis_label(xkey) if xkey else "", panels, title=title,
                            shades=shades, crossover=cross)
    save_figure(fig, outdir / "phase_mass.png")
    if "cross_table" in metrics:
        names = metrics["classify_phase"].get("names", {})
        tables = {rule: {names.get(lab, lab): lines(grid) for lab, grid in row.items()}
                  for rule, row in metrics["cross_table"].items()}
        fig = cross_table_figure(xs, _axis_label(xkey) if xkey else "", tables,
                                 title=f"{title}: DSLT4's {ph.rule} rule against classify_phase", shades=shades)
        save_figure(fig, outdir / "rules_vs_phases.png")
    if "free_energy" in metrics:
        fe = metrics["free_energy"]
        curves = {nm: (lines(fe["relative"][nm]), lines(fe["relative_se"][nm])) for nm in fe["phase"] if nm != "other"}
        fig = free_energy_figure(xs, _axis_label(xkey) if xkey else "", curves, title=title,
                                 shades=shades, unconverged=unconverged)
        save_figure(fig, outdir / "free_energy.png")
    if "lambda_from_free_energy" in metrics:
        panels = [(_where_label(entry["values"]), entry["n_beta"],
                   {nm: (entry["excess"][nm], entry["excess_se"][nm], entry["lambda"][nm], entry["lambda_se"][nm])
                    for nm in entry["lambda"] if nm != "other"})
                  for entry in metrics["lambda_from_free_energy"]]
        fig = free_energy_scaling_figure(panels, title=title)
        save_figure(fig, outdir / "free_energy_scaling.png")
    if len(axes) == 2 and ph.rule != "none":
        ykey = axes[1 - xi]
        ys = np.asarray(metrics["n_beta"] if ykey == "posterior.beta" else sweep[ykey], float)
        grids = {nm: (np.asarray(metrics["mass"][nm], float).T if xi == 0 else np.asarray(metrics["mass"][nm], float))
                 for nm in metrics["mass"]}
        name = xkey.split(".")[-1]
        crossover = np.asarray(metrics.get(f"crossover_{name}", [np.nan] * len(ys)), float).reshape(-1)
        crossover_se = np.asarray(metrics.get(f"crossover_{name}_se", [np.nan] * len(ys)), float).reshape(-1)
        fig = phase_diagram_figure(xs, ys, grids, crossover, crossover_se, xlabel=_axis_label(xkey),
                                   ylabel="n beta" if ykey == "posterior.beta" else _axis_label(ykey),
                                   crossover_label=f"crossover {_axis_label(xkey)} ({' = '.join(ph.crossover or ())})",
                                   title=title)
        save_figure(fig, outdir / "phase_diagram.png")
    if points[0].settings.model.base.n_in == 2:
        step = max(1, -(-len(points) // s.plots.weight_panels))
        panels = []
        for pt, prm in list(zip(points, params))[::step]:
            truth = pt.settings.example.truth
            eff_truth = np.abs(np.asarray(truth.q))[:, None] * np.asarray(truth.w)
            panels.append((_where_label(pt.values), effective_weights(prm).reshape(-1, 2), eff_truth))
        fig = weights_facets_figure(panels,
                                    title=f"{title}: posterior density of the effective weights |q_i| w_i (all nodes)")
        save_figure(fig, outdir / "effective_weights.png")
    if s.plots.trace_points:
        pick = np.unique(np.linspace(0, len(points) - 1, min(s.plots.trace_points, len(points))).round().astype(int))
        traces = []
        for i in pick:
            res = results[points[i].index]
            radii = np.linalg.norm(effective_weights(params[i]), axis=-1)
            traces.append((rows[i]["values"], res["loss"], radii))
        fig = posterior_traces_figure(traces, title=f"{title}: traces")
        save_figure(fig, outdir / "traces.png")
