"""The figures of a posterior sweep (kind ``posterior``): its Dataset (``results.nc``,
``slt_relu.posterior.sweep_results``) turned into the plain arrays that ``slt_relu.plots`` draws."""
from __future__ import annotations

import numpy as np


def _axis_label(key: str) -> str:
    return {"posterior.beta": "beta", "truth.t": "t", "truth.v": "v", "posterior.n": "n"}.get(key, key)


def _where_label(values: dict) -> str:
    name = lambda k: _axis_label(k).split(".")[-1]
    return ", ".join(f"{name(k)} = {v:.4g}" if isinstance(v, float) else f"{name(k)} = {v}"
                     for k, v in values.items()) or "all points"


def posterior_figures(r, ds, cds, metrics, params, results) -> dict:
    """phase_mass.png, free_energy.png (SMC), free_energy_scaling.png (SMC swept over beta),
    phase_diagram.png (two sweep axes), effective_weights.png (n_in = 2), traces.png: a posterior
    sweep's Dataset (``slt_relu.posterior.sweep_results``; ``cds``: the [compare] sampler's, or None)
    as the plain arrays that slt_relu.plots draws: {name: Figure}."""
    from ..phases import effective_weights
    from ..plots import (cross_table_figure, free_energy_figure, free_energy_scaling_figure, phase_diagram_figure,
                         phase_mass_figure, posterior_traces_figure, weights_facets_figure)

    s, ph, sweep = r.settings, r.settings.phases, r.sweep
    points = r.points
    title = points[0].settings.example.description.split(":")[0]
    axes = list(sweep)
    xkey = ph.crossover_axis or (axes[-1] if axes else None)
    xs = np.asarray(sweep[xkey], float) if xkey else np.array([0.0])
    xlabel = _axis_label(xkey) if xkey else ""
    figures = {}

    def lines(da):                                     # (lines, len(xs)): one line per value of the other axes
        da = da.transpose(..., xkey) if xkey else da
        return np.asarray(da.values, float).reshape(-1, len(xs))

    # SMC's stopping rule: each rule phase's own flag, and any phase's for the other labels of the same draws
    unconverged = ({nm: ~lines(ds["converged_phase"].sel(phase=nm)).astype(bool) for nm in ds["phase"].values}
                   if "converged_phase" in ds else None)
    anything = ~lines(ds["converged"]).astype(bool) if "converged" in ds else None
    labels = ds["label"].values.tolist() if "label" in ds.coords else []
    label_name = dict(zip(labels, ds["label_name"].values.tolist())) if labels else {}
    phase_lines = lambda d, prefix="": {nm: (lines(d[prefix + "mass"].sel(phase=nm)), lines(d[prefix + "mass_se"].sel(
        phase=nm))) for nm in d["phase"].values.tolist()}
    panels = []
    if ph.rule != "none":
        panels.append((f"DSLT4 rule: {ph.rule}", phase_lines(ds), unconverged))
    if "classify_mass" in ds:
        panels.append(("classify_phase: phases of W0 at the data's resolution",
                       {label_name[lab]: (lines(ds["classify_mass"].sel(label=lab)),
                                          lines(ds["classify_mass_se"].sel(label=lab))) for lab in labels[:6]},
                       None if anything is None else {label_name[lab]: anything for lab in labels}))
    if cds is not None and ph.rule != "none":
        panels.append((f"{cds.attrs['sampler'].upper()} on the same data sets: {ph.rule} rule", phase_lines(cds), None))
    shades = None
    if len(axes) == 2:
        other = axes[1 - axes.index(xkey)]
        shades = (_axis_label(other), sweep[other][0], sweep[other][-1])
    cross = (float(ds["crossover"]), float(ds["crossover_se"])) if "crossover" in ds and len(axes) == 1 else None
    fig = phase_mass_figure(xs, xlabel, panels, title=title, shades=shades, crossover=cross)
    figures["phase_mass"] = fig
    if "cross_table" in ds:
        tables = {nm: {label_name[lab]: lines(ds["cross_table"].sel(phase=nm, label=lab)) for lab in labels
                       if bool(ds["cross_table"].sel(label=lab).any())} for nm in ds["phase"].values.tolist()}
        fig = cross_table_figure(xs, xlabel, tables, title=f"{title}: DSLT4's {ph.rule} rule against classify_phase",
                                 shades=shades)
        figures["rules_vs_phases"] = fig
    if "relative_free_energy" in ds:
        curves = {nm: (lines(ds["relative_free_energy"].sel(phase=nm)), lines(ds["relative_free_energy_se"].sel(
            phase=nm))) for nm in ds["phase"].values.tolist() if nm != "other"}
        fig = free_energy_figure(xs, xlabel, curves, title=title, shades=shades, unconverged=unconverged)
        figures["free_energy"] = fig
    if "lambda_from_free_energy" in metrics:
        panels = [(_where_label(entry["values"]), entry["n_beta"],
                   {nm: (entry["excess"][nm], entry["excess_se"][nm], entry["lambda"][nm], entry["lambda_se"][nm])
                    for nm in entry["lambda"] if nm != "other"})
                  for entry in metrics["lambda_from_free_energy"]]
        fig = free_energy_scaling_figure(panels, title=title)
        figures["free_energy_scaling"] = fig
    if len(axes) == 2 and ph.rule != "none":
        ykey = axes[1 - axes.index(xkey)]
        ys = np.asarray(ds["n_beta"].isel({xkey: 0}).values if ykey == "posterior.beta" else sweep[ykey], float)
        grids = {nm: np.asarray(ds["mass"].sel(phase=nm).transpose(ykey, xkey).values, float)
                 for nm in ds["phase"].values.tolist()}
        nan = np.full(len(ys), np.nan)
        crossover = np.asarray(ds["crossover"].values, float).reshape(-1) if "crossover" in ds else nan
        crossover_se = np.asarray(ds["crossover_se"].values, float).reshape(-1) if "crossover" in ds else nan
        fig = phase_diagram_figure(xs, ys, grids, crossover, crossover_se, xlabel=_axis_label(xkey),
                                   ylabel="n beta" if ykey == "posterior.beta" else _axis_label(ykey),
                                   crossover_label=f"crossover {_axis_label(xkey)} ({' = '.join(ph.crossover or ())})",
                                   title=title)
        figures["phase_diagram"] = fig
    if points[0].settings.model.base.n_in == 2:
        step = max(1, -(-len(points) // s.plots.weight_panels))
        panels = []
        for pt, prm in list(zip(points, params))[::step]:
            truth = pt.settings.example.truth
            eff_truth = np.abs(np.asarray(truth.q))[:, None] * np.asarray(truth.w)
            panels.append((_where_label(pt.values), effective_weights(prm).reshape(-1, 2), eff_truth))
        fig = weights_facets_figure(panels,
                                    title=f"{title}: posterior density of the effective weights |q_i| w_i (all nodes)")
        figures["effective_weights"] = fig
    if s.plots.trace_points:
        pick = np.unique(np.linspace(0, len(points) - 1, min(s.plots.trace_points, len(points))).round().astype(int))
        traces = []
        for i in pick:
            res = results[points[i].index]
            radii = np.linalg.norm(effective_weights(params[i]), axis=-1)
            traces.append((points[i].values, res["loss"], radii))
        fig = posterior_traces_figure(traces, title=f"{title}: traces")
        figures["traces"] = fig
    return figures
