"""The figures of a posterior sweep (kind ``posterior``): what they draw beyond the sweep's own numbers put into
its results Dataset (:func:`with_figure_data`: each phase's lambda from its free energy along beta, a subsample of
the effective weights of the points drawn, the traces of the points traced), and the figures drawn from that
Dataset as ``results.nc`` holds it (:func:`posterior_figures`), turned into the plain arrays that
``slt_relu.plots`` draws."""
from __future__ import annotations

import numpy as np

__all__ = []   # nothing to import: a part of the kinds that import it, not an API


def _axis_label(key: str) -> str:
    return {"posterior.beta": "beta", "truth.t": "t", "truth.v": "v", "posterior.n": "n"}.get(key, key)


def _where_label(values: dict) -> str:
    name = lambda k: _axis_label(k).split(".")[-1]
    return ", ".join(f"{name(k)} = {v:.4g}" if isinstance(v, float) else f"{name(k)} = {v}"
                     for k, v in values.items()) or "all points"


def _numbers(values) -> np.ndarray | None:
    """values as floats, or None where one is not a number."""
    try:
        return np.asarray([float(v) for v in values])
    except (TypeError, ValueError):
        return None


def weight_points(r) -> list:
    """The sweep points whose effective weights are drawn (n_in = 2): every k-th, at most plots.weight_panels."""
    if r.points[0].settings.model.base.n_in != 2:
        return []
    return r.points[::max(1, -(-len(r.points) // r.settings.plots.weight_panels))]


def trace_points(r) -> list:
    """The sweep points whose traces are drawn: plots.trace_points of them, evenly spread."""
    n, k = len(r.points), r.settings.plots.trace_points
    return [r.points[i] for i in np.unique(np.linspace(0, n - 1, min(k, n)).round().astype(int))] if k else []


def _padded(arrays: list, fill=np.nan) -> np.ndarray:
    """Arrays of one rank and dtype, each padded with ``fill`` at the end of every axis to the largest."""
    shape = tuple(max(a.shape[k] for a in arrays) for k in range(arrays[0].ndim))
    out = np.full((len(arrays), *shape), fill, dtype=np.result_type(arrays[0].dtype, np.float32))
    for i, a in enumerate(arrays):
        out[(i, *(slice(0, n) for n in a.shape))] = a
    return out


def with_label_rank(ds):
    """A sampler's sweep Dataset with ``label_rank`` (label): each classify_phase label's place in its order (most
    mass first), so that the figures draw this sampler's own labels in its order where a second sampler's share
    the results Dataset (``slt_relu.posterior.sweep_results.by_sampler``: their union, NaN for a label it lacks)."""
    if "label" not in ds.coords:
        return ds
    return ds.assign(label_rank=("label", np.arange(ds.sizes["label"]), {
        "long_name": "the label's place among the sampler's labels by classify_phase mass over the sweep "
                     "(0: the most; NaN: a label the sampler never gave)"}))


def with_figure_data(ds, r, lambdas: list, params: list, results: dict):
    """The results Dataset with what the figures draw beyond the sweep's own numbers, all of the [sampler]'s
    runs (no ``sampler`` dimension):

        lambda_from_free_energy[_se] (other axes..., phase)                each phase's lambda from the slope
        free_energy_excess[_se] (other axes..., posterior.beta, phase)     of G = F_alpha - n beta L_min along beta
        effective_weights (weights_point, weights_sample, weights_input), effective_weights_count (weights_point)
        trace_loss, trace_radius_min, trace_radius_max (trace_point, trace_chain, trace_draw),
        trace_thin, trace_draws, trace_chains (trace_point)

    Args:
        ds: the results Dataset (``slt_relu.posterior.sweep_results``; of both samplers with [compare]).
        r: the resolved config (``posterior_kind.Resolved``).
        lambdas: ``slt_relu.posterior.sweep_results.lambda_along_beta`` of the [sampler]'s Dataset, or [].
        params: each point's draws as parameters (in the order of ``r.points``).
        results: {point index: the point's sampled arrays} (``loss`` (C, S)).

    Returns:
        the Dataset with those variables.
    """
    from ..phases import effective_weights
    from ..plots.posterior import trace_lines, weights_subsample

    new = {}
    if lambdas:
        others = [k for k in r.sweep if k != "posterior.beta"]
        shape = tuple(len(r.sweep[k]) for k in others)
        names = ds["phase"].values.tolist()
        grid = lambda f: np.array([[f(p, nm) for nm in names] for p in lambdas], np.float64)
        along = lambda f: np.moveaxis(grid(f).reshape(*shape, len(names), -1), -1, -2)
        dims, dims_beta = (*others, "phase"), (*others, "posterior.beta", "phase")
        new.update(
            lambda_from_free_energy=(dims, grid(lambda p, nm: p.lambdas[nm].lambda_).reshape(*shape, -1),
                                     {"long_name": "each phase's lambda: the slope of its free energy along "
                                                   "log(n beta) (metrics.json's lambda_from_free_energy)"}),
            lambda_from_free_energy_se=(dims, grid(lambda p, nm: p.lambdas[nm].se).reshape(*shape, -1)),
            free_energy_excess=(dims_beta, along(lambda p, nm: p.excess[nm]),
                                {"long_name": "G = F_alpha - n beta L_min, mean over data sets"}),
            free_energy_excess_se=(dims_beta, along(lambda p, nm: p.excess_se[nm]),
                                   {"long_name": "its standard error across data sets"}))
    index = {pt.index: i for i, pt in enumerate(r.points)}
    shown = weight_points(r)
    if shown:
        effs = weights_subsample([effective_weights(params[index[pt.index]]).reshape(-1, 2) for pt in shown])
        new.update(effective_weights=(("weights_point", "weights_sample", "weights_input"), _padded(effs),
                                      {"long_name": "|q_i| w_i of every node of the draws the figure draws (a "
                                                    "random subsample beyond its most), NaN past the count"}),
                   effective_weights_count=("weights_point", np.array([len(e) for e in effs], np.int64)))
    traced = trace_points(r)
    if traced:
        lines = [trace_lines(results[pt.index]["loss"],
                             np.linalg.norm(effective_weights(params[index[pt.index]]), axis=-1)) for pt in traced]
        dims = ("trace_point", "trace_chain", "trace_draw")
        new.update(trace_loss=(dims, _padded([ln[1] for ln in lines]), {"long_name": "L_n of every chain's draws, "
                                                                        "every trace_thin-th"}),
                   trace_radius_min=(dims, _padded([ln[2] for ln in lines]),
                                     {"long_name": "the smallest radius | |q_i| w_i | of the draw's nodes"}),
                   trace_radius_max=(dims, _padded([ln[3] for ln in lines]),
                                     {"long_name": "the largest radius | |q_i| w_i | of the draw's nodes"}),
                   trace_thin=("trace_point", np.array([ln[0][1] - ln[0][0] if len(ln[0]) > 1 else 1
                                                        for ln in lines], np.int64),
                               {"long_name": "every how many draws a trace keeps"}),
                   trace_draws=("trace_point", np.array([len(ln[0]) for ln in lines], np.int64)),
                   trace_chains=("trace_point", np.array([len(ln[1]) for ln in lines], np.int64)))
    coords = {"weights_point": [pt.index for pt in shown]} if shown else {}
    if traced:
        coords["trace_point"] = [pt.index for pt in traced]
    return ds.assign(new).assign_coords(coords) if new else ds


def posterior_figures(r, results) -> dict:
    """The kind's figures (``Kind.figures``): phase_mass.png, rules_vs_phases.png (both labellings),
    free_energy.png (SMC), free_energy_scaling.png (SMC swept over beta), phase_diagram.png (two sweep axes),
    effective_weights.png (n_in = 2), traces.png, drawn from the results alone.

    Args:
        r: the resolved config (``posterior_kind.Resolved``): the sweep, its points' values and truths, the settings.
        results: the results Dataset as ``results.nc`` holds it (``slt_relu.posterior.sweep_results``, with a leading
            ``sampler`` dimension where [compare] ran a second sampler; :func:`with_figure_data`).

    Returns:
        {name: Figure}, drawn by slt_relu.plots from the Dataset's arrays.
    """
    from ..plots import (cross_table_figure, free_energy_figure, free_energy_scaling_figure, phase_diagram_figure,
                         phase_mass_figure, posterior_traces_figure, weights_facets_figure)

    s, ph, sweep = r.settings, r.settings.phases, r.sweep
    ds, cds = (results.isel(sampler=0), results.isel(sampler=1)) if "sampler" in results.dims else (results, None)
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
    # the [sampler]'s own labels, in its order (the Dataset holds those of both samplers)
    labels = ([lab for _, lab in sorted((float(k), lab) for k, lab in zip(ds["label_rank"].values,
                                                                          ds["label"].values.tolist()) if k == k)]
              if "label" in ds.coords else [])
    label_name = dict(zip(ds["label"].values.tolist(), ds["label_name"].values.tolist())) if labels else {}
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
        panels.append((f"{s.compare.name.upper()} on the same data sets: {ph.rule} rule", phase_lines(cds), None))
    shades = None
    if len(axes) == 2:
        other = axes[1 - axes.index(xkey)]
        shades = (_axis_label(other), sweep[other][0], sweep[other][-1])
    cross = (float(ds["crossover"]), float(ds["crossover_se"])) if "crossover" in ds and len(axes) == 1 else None
    figures["phase_mass"] = phase_mass_figure(xs, xlabel, panels, title=title, shades=shades, crossover=cross)
    if "cross_table" in ds:
        tables = {nm: {label_name[lab]: lines(ds["cross_table"].sel(phase=nm, label=lab)) for lab in labels
                       if bool(ds["cross_table"].sel(label=lab).any())} for nm in ds["phase"].values.tolist()}
        figures["rules_vs_phases"] = cross_table_figure(
            xs, xlabel, tables, title=f"{title}: DSLT4's {ph.rule} rule against classify_phase", shades=shades)
    if "relative_free_energy" in ds and points[0].settings.sampler.name == "smc":
        curves = {nm: (lines(ds["relative_free_energy"].sel(phase=nm)), lines(ds["relative_free_energy_se"].sel(
            phase=nm))) for nm in ds["phase"].values.tolist() if nm != "other"}
        figures["free_energy"] = free_energy_figure(xs, xlabel, curves, title=title, shades=shades,
                                                    unconverged=unconverged)
    if "lambda_from_free_energy" in ds:
        others = [k for k in sweep if k != "posterior.beta"]
        n_beta = ds["n_beta"].transpose(*others, "posterior.beta").values
        P = int(np.prod(n_beta.shape[:-1]))

        def per_point(name, nm, *last):                # (P, *last): the points in the sweep's order
            da = ds[name].sel(phase=nm).transpose(*others, *last)
            return da.values.reshape(P, *da.shape[len(others):])

        curves = {nm: (per_point("free_energy_excess", nm, "posterior.beta"),
                       per_point("free_energy_excess_se", nm, "posterior.beta"),
                       per_point("lambda_from_free_energy", nm), per_point("lambda_from_free_energy_se", nm))
                  for nm in ds["phase"].values.tolist() if nm != "other"}
        values = _numbers(sweep[others[0]]) if len(others) == 1 else None
        names = None
        if values is None:                             # no other axis, several, or not numbers: the points by name
            values = np.arange(P)
            names = [_where_label({k: sweep[k][i] for k, i in zip(others, idx)})
                     for idx in np.ndindex(n_beta.shape[:-1])]
        figures["free_energy_scaling"] = free_energy_scaling_figure(
            values, _axis_label(others[0]) if names is None else "sweep point", n_beta.reshape(P, -1), curves,
            title=title, point_labels=names)
    if len(axes) == 2 and ph.rule != "none":
        ykey = axes[1 - axes.index(xkey)]
        ys = np.asarray(ds["n_beta"].isel({xkey: 0}).values if ykey == "posterior.beta" else sweep[ykey], float)
        grids = {nm: np.asarray(ds["mass"].sel(phase=nm).transpose(ykey, xkey).values, float)
                 for nm in ds["phase"].values.tolist()}
        nan = np.full(len(ys), np.nan)
        crossover = np.asarray(ds["crossover"].values, float).reshape(-1) if "crossover" in ds else nan
        crossover_se = np.asarray(ds["crossover_se"].values, float).reshape(-1) if "crossover" in ds else nan
        figures["phase_diagram"] = phase_diagram_figure(
            xs, ys, grids, crossover, crossover_se, xlabel=_axis_label(xkey),
            ylabel="n beta" if ykey == "posterior.beta" else _axis_label(ykey),
            crossover_label=f"crossover {_axis_label(xkey)} ({' = '.join(ph.crossover or ())})", title=title)
    by_index = {pt.index: pt for pt in points}
    if "effective_weights" in ds:
        panels = []
        for i, pt in enumerate(by_index[k] for k in ds["weights_point"].values.tolist()):
            truth = pt.settings.example.truth
            eff_truth = np.abs(np.asarray(truth.q))[:, None] * np.asarray(truth.w)
            eff = ds["effective_weights"].values[i, :int(ds["effective_weights_count"].values[i])]
            panels.append((_where_label(pt.values), eff, eff_truth))
        figures["effective_weights"] = weights_facets_figure(
            panels, title=f"{title}: posterior density of the effective weights |q_i| w_i (all nodes)")
    if "trace_loss" in ds:
        traces = []
        for i, k in enumerate(ds["trace_point"].values.tolist()):
            c, n = int(ds["trace_chains"].values[i]), int(ds["trace_draws"].values[i])
            part = lambda name: ds[name].values[i, :c, :n]
            traces.append((by_index[k].values, np.arange(n) * int(ds["trace_thin"].values[i]), part("trace_loss"),
                           part("trace_radius_min"), part("trace_radius_max")))
        figures["traces"] = posterior_traces_figure(traces, title=f"{title}: traces")
    return figures
