"""A posterior sweep's numbers as one labelled ``xarray.Dataset`` (``results.nc``), and what derives from it.

Each sweep point's results (``slt_relu.posterior.point.PosteriorPoint``: masses, trial filter, log evidence,
free energies, diagnostics) are one Dataset (its ``to_dataset()``); :func:`sweep_dataset` puts them together
as one Dataset whose dimensions are the sweep's keys (in the config's order, their values as coordinates), the
data set, the independent run (a chain, or an SMC run) and the phase:

    n, beta, n_beta, trials                                      (sweep...)
    mass, mass_se, mass_mcse [, mass_unfiltered]                 (sweep..., phase)      DSLT4's rule
    mass_per_trial                                               (sweep..., dataset, phase)
    mean_loss_per_trial, excess_loss_per_trial, dropped          (sweep..., dataset)
    classify_mass, classify_mass_se, classify_mass_mcse [, ...]  (sweep..., label)      classify_phase
    classify_mass_per_trial                                      (sweep..., dataset, label)
    cross_table                                                  (sweep..., phase, label)
    log_evidence, log_evidence_se, log_evidence_mcse             (sweep...)             SMC
    log_evidence_per_trial (sweep..., dataset), log_evidence_per_run, dataset_per_run (sweep..., run)
    [classify_]mass_per_run                                      (sweep..., run, phase or label)  SMC, each run
    free_energy[_se, _mcse], relative_free_energy[_se]           (sweep..., phase)      SMC
    free_energy_total[_se, _mcse] (sweep...), free_energy_per_trial (sweep..., dataset, phase)
    classify_free_energy[...]                                    (sweep..., label)      SMC
    min_loss_per_trial                                           (sweep..., dataset, phase)
    converged, runs_per_dataset (sweep...), converged_phase (sweep..., phase)   SMC's stopping rule
    the sampler's diagnostics (``masses.ChainDiagnostics``, ``evidence.SMCDiagnostics``): scalars (sweep...),
    step_size or stages (sweep..., run); num_runs (sweep...)

``dataset`` and ``run`` are positions (coordinates 0, 1, ...) whose length may differ between points (a
swept ``posterior.datasets``; SMC's stopping rule giving some points more runs than others): the Dataset
spans the longest, and a point's real entries are its first ``trials`` data sets and ``num_runs`` runs
(:data:`COUNTS`, :func:`present`); beyond them every number is NaN (``dropped`` False).  Each
derived number here reads only a point's real entries.

``label`` carries each classify_phase code's name in words (coordinate ``label_name``).  With a
second sampler on the same data sets (a config's ``[compare]``), ``results.nc`` holds both along a
leading ``sampler`` dimension (:func:`by_sampler`).  A sweep
value that is not a number (``posterior.beta = "wbic"``) makes that axis' coordinate strings.
:func:`grids` derives the sweep-level tables of ``metrics.json`` from the Dataset (the masses on
the sweep's grid, the crossover of two phases along an axis for every value of the others, who
leads), and the figures of ``slt_relu.kinds.posterior_figures`` read it too.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .evidence import free_energy_slopes
from .masses import crossover_bootstrap

__all__ = ["PhaseLambdas", "axis_values", "by_sampler", "crossover_metrics", "grids", "lambda_along_beta", "present",
           "sweep_dataset", "with_crossover"]

FREE_ENERGY_FIELDS = {"phase": "free_energy", "phase_se": "free_energy_se", "phase_mcse": "free_energy_mcse",
                      "relative": "relative_free_energy", "relative_se": "relative_free_energy_se"}


# the positional dimensions of a point's Dataset (their coordinate 0, 1, ...; their lengths may differ between
# points) and the per-point variable that counts their real entries; any other dimension a point has without a
# coordinate is made positional the same way, counted by num_<dim>
COUNTS = {"dataset": "trials", "run": "num_runs"}

FILL = {v: 0.0 for v in ("classify_mass", "classify_mass_se", "classify_mass_mcse", "classify_mass_unfiltered",
                         "classify_mass_per_trial", "classify_mass_per_run", "cross_table")} | {"dropped": False}
# (a label absent at a point has mass 0)


def axis_values(values: Sequence) -> np.ndarray:
    """A sweep axis' coordinate: its values as floats, or as strings when one is not a number."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.asarray(values, np.float64)
    return np.asarray([str(v) for v in values])


def _positional(ds):
    """``ds`` with every dimension that has no coordinate made positional (coordinate 0, 1, ...; its length
    counted by :data:`COUNTS`' variable, or ``num_<dim>``), so that points (or samplers) whose lengths differ
    align on their positions (an unlabelled dimension of two lengths cannot be aligned at all)."""
    for dim in [d for d in ds.dims if d not in ds.indexes]:
        ds = ds.assign_coords({dim: np.arange(ds.sizes[dim])})
        count = COUNTS.get(dim, f"num_{dim}")
        if count not in ds:
            ds = ds.assign({count: ((), ds.sizes[dim])})
    return ds


def present(ds, dim: str):
    """Which entries along the positional dimension ``dim`` (``dataset``, ``run``) are real at each point
    (sweep..., dim): the first ``COUNTS[dim]`` of them (:data:`COUNTS`); the rest pad a point to the longest."""
    count = ds[COUNTS.get(dim, f"num_{dim}")]
    return ds[dim] < count.fillna(0)


def _mask_padding(ds):
    """NaN at the entries of a positional dimension that a point lacks (:func:`present`; a variable's own
    fill, such as mass 0 for a label absent at a point, holds only at a point's real data sets and runs),
    and in the per-trial variables that have a fill at a data set DSLT4's filter dropped (NaN there, as in
    mass_per_trial)."""
    for dim in ds.dims:
        if COUNTS.get(dim, f"num_{dim}") not in ds:
            continue
        real = present(ds, dim)
        ds = ds.assign({name: da.where(real) for name, da in ds.data_vars.items()
                        if dim in da.dims and np.issubdtype(da.dtype, np.floating)})
    if "dropped" in ds:
        kept = ~ds["dropped"].astype(bool)
        ds = ds.assign({name: ds[name].where(kept) for name in FILL
                        if name in ds and "dataset" in ds[name].dims and name != "dropped"})
    return ds


def sweep_dataset(sweep: dict, points: Sequence, values: Sequence[dict], attrs: dict | None = None):
    """The Dataset of a sweep (module docstring) from its points' own Datasets (``points``:
    ``slt_relu.posterior.point.PosteriorPoint.to_dataset()``) and their coordinates (``values``: {sweep key:
    value} of each point), in the sweep's order, the last key varying fastest, as
    ``slt_relu.workflow.sweep.expand`` makes them.  A label absent at a point has mass 0 there; a run or data
    set that does not exist at a point (the stopping rule gave others more runs; a swept
    ``posterior.datasets``) NaN, beyond the point's ``num_runs`` and ``trials``."""
    import pandas as pd
    import xarray as xr

    points = [_positional(p) for p in points]
    ds = _concat(points, "point") if len(points) > 1 else points[0].expand_dims("point")
    if "label" in ds.coords:                   # labels ordered by their total mass over the sweep (most first)
        order = np.argsort(-ds["classify_mass"].sum("point").values, kind="stable") if "classify_mass" in ds \
            else np.arange(ds.sizes["label"])
        ds = ds.isel(label=order)
    if sweep:
        keys = list(sweep)
        index = pd.MultiIndex.from_arrays([axis_values([v[k] for v in values]) for k in keys], names=keys)
        ds = ds.assign_coords(xr.Coordinates.from_pandas_multiindex(index, "point")).unstack("point")
        ds = ds.sel({k: axis_values(v) for k, v in sweep.items()}).transpose(*keys, ...)
    else:
        ds = ds.isel(point=0, drop=True)
    ds.attrs.update(attrs or {})
    return ds


def by_sampler(*datasets):
    """Sweeps of several samplers on the same data sets (a config's [sampler] and [compare]) as one
    Dataset with a leading ``sampler`` dimension (its coordinate: each Dataset's ``sampler`` attribute);
    a label or run one of them lacks is filled as in :func:`sweep_dataset`."""
    names = [d.attrs["sampler"] for d in datasets]
    if len(set(names)) < len(names):               # the same sampler twice (other settings): number them
        names = [f"{nm} ({i})" for i, nm in enumerate(names)]
    return _concat([d.expand_dims(sampler=[nm]) for d, nm in zip(datasets, names)], "sampler",
                   combine_attrs="drop_conflicts")


def _concat(datasets: Sequence, dim: str, **kwargs):
    """Points (or samplers) as one Dataset along ``dim``: aligned on their labels, phases and positions
    (the union of them; FILL or NaN where one lacks an entry, :func:`_mask_padding`).  label_name, the one
    coordinate that is no index, is set aside and put back along ``label`` (each code has one name):
    concatenated, it would be NaN for a label a point lacks, and xarray leaves it unchecked (merged as equal)
    when another coordinate (``run``) is in only some of the datasets."""
    import xarray as xr

    names = {}
    for d in datasets:
        if "label_name" in d.coords:
            for lab, nm in zip(d["label"].values.tolist(), d["label_name"].values.tolist()):
                if isinstance(nm, str):
                    names.setdefault(lab, nm)
    out = xr.concat([d.drop_vars("label_name", errors="ignore") for d in datasets], dim=dim, join="outer",
                    fill_value=FILL, coords="minimal", compat="equals", **kwargs)
    if names:
        out = out.assign_coords(label_name=("label", [names.get(lab, str(lab)) for lab in out["label"].values]))
    return _mask_padding(out)


def _grid(da) -> list:
    return da.values.tolist()


def grids(ds, sweep: dict) -> dict:
    """The sweep-level tables of metrics.json from the sweep's Dataset: each axis' values, n beta along
    a beta axis, the masses of every phase and label on the sweep's grid (axes in the order of ``sweep``),
    the cross-table, log Z and free energies, and the crossover with who leads (:func:`crossover_metrics`)
    when the Dataset has them."""
    axes = list(sweep)
    metrics = {key.split(".")[-1]: sweep[key] for key in axes}
    if "posterior.beta" in axes or "posterior.n" in axes:
        metrics["n_beta_per_point"] = ds["n_beta"].values.ravel().tolist()
    if "posterior.beta" in axes:
        metrics["n_beta"] = ds["n_beta"].isel({k: 0 for k in axes if k != "posterior.beta"}).values.tolist()
    if "mass" in ds:
        names = ds["phase"].values.tolist()
        for field in ("mass", "mass_se", "mass_mcse"):
            metrics[field] = {nm: _grid(ds[field].sel(phase=nm)) for nm in names}
    if "classify_mass" in ds:
        labels = ds["label"].values.tolist()
        metrics["classify_phase"] = {"names": dict(zip(labels, ds["label_name"].values.tolist())),
                                     **{field: {lab: _grid(ds[f"classify_{field}"].sel(label=lab)) for lab in labels}
                                        for field in ("mass", "mass_se", "mass_mcse")}}
    if "cross_table" in ds:
        labels = [lab for lab in ds["label"].values.tolist() if bool(ds["cross_table"].sel(label=lab).any())]
        metrics["cross_table"] = {nm: {lab: _grid(ds["cross_table"].sel(phase=nm, label=lab)) for lab in labels}
                                  for nm in ds["phase"].values.tolist()}
    if "log_evidence" in ds:
        metrics["log_evidence"] = _grid(ds["log_evidence"])
        metrics["log_evidence_mcse"] = _grid(ds["log_evidence_mcse"])
        for key, dim, prefix in (("free_energy", "phase", ""), ("free_energy_classify_phase", "label", "classify_")):
            if f"{prefix}free_energy" not in ds:
                continue
            names = ds[dim].values.tolist()
            metrics[key] = {"total": _grid(ds[f"{prefix}free_energy_total"]),
                            **{field: {nm: _grid(ds[prefix + name].sel({dim: nm})) for nm in names}
                               for field, name in FREE_ENERGY_FIELDS.items()}}
    if "crossover" in ds:
        metrics.update(crossover_metrics(ds, sweep))
    return metrics


def with_crossover(ds, sweep: dict, phases, axis: str):
    """``ds`` with where the masses of ``phases`` = (a, b) cross along the sweep axis ``axis``, for every
    combination of the other axes: ``crossover``, ``crossover_se`` (a bootstrap over trials,
    :func:`slt_relu.posterior.masses.crossover_bootstrap`, one generator seeded 0 drawn in the grid's
    order) and ``crossover_bootstrap_fraction``; and who leads: ``lead_difference`` (sweep...), the mean
    over data sets of mass_a - mass_b, with ``lead_difference_se`` across data sets (kept trials).
    attrs ``crossover_phases``, ``crossover_axis``."""
    a, b = phases
    xs = np.asarray(ds[axis].values, np.float64)
    rng = np.random.default_rng(0)
    mpt = ds["mass_per_trial"]
    others = [k for k in sweep if k != axis]
    ta = mpt.sel(phase=a).transpose(*others, axis, "dataset")
    tb = mpt.sel(phase=b).transpose(*others, axis, "dataset")
    out = []
    for x, y in zip(ta.values.reshape(-1, *ta.shape[-2:]), tb.values.reshape(-1, *tb.shape[-2:])):
        keep = [~np.isnan(t) for t in x]               # dropped trials are NaN
        out.append(crossover_bootstrap(xs, [t[k] for t, k in zip(x, keep)], [t[k] for t, k in zip(y, keep)], rng))
    grid = lambda j: (others, np.array([o[j] for o in out]).reshape(ta.shape[:-2]))
    diff = mpt.sel(phase=a, drop=True) - mpt.sel(phase=b, drop=True)
    count = diff.notnull().sum("dataset")
    ds = ds.assign(crossover=grid(0), crossover_se=grid(1), crossover_bootstrap_fraction=grid(2),
                   lead_difference=diff.mean("dataset"),
                   lead_difference_se=(diff.std("dataset", ddof=1) / np.sqrt(count)).where(count > 1))
    ds.attrs.update(crossover_phases=[a, b], crossover_axis=axis)
    return ds


def crossover_metrics(ds, sweep: dict) -> dict:
    """metrics.json's crossover (``crossover_<axis>``, ``..._se``, ``..._bootstrap_fraction``: a number, or
    a list over the other axis' values) and ``lead`` (the difference of the masses on the sweep's grid,
    its standard error, the points where a leads by more than two standard errors and whether it ever
    does) from a Dataset :func:`with_crossover` made."""
    a, b = (str(p) for p in ds.attrs["crossover_phases"])
    name = str(ds.attrs["crossover_axis"]).split(".")[-1]
    out = {}
    for suffix in ("", "_se", "_bootstrap_fraction"):
        v = ds["crossover" + suffix]
        out[f"crossover_{name}{suffix}"] = float(v) if v.ndim == 0 else v.values.tolist()
    mean, se = ds["lead_difference"], ds["lead_difference_se"]
    leads = ((mean - 2 * se.fillna(0.0)) > 0).transpose(*sweep).values
    out["crossover_phases"] = [a, b]
    out["crossover_axis"] = str(ds.attrs["crossover_axis"])
    out["lead"] = {"phases": [a, b], "difference": _grid(mean), "difference_se": _grid(se),
                   f"{a}_leads_at": [{k: sweep[k][i] for k, i in zip(sweep, idx)} for idx in np.ndindex(leads.shape)
                                     if leads[idx]],
                   f"{a}_ever_leads": bool(leads.any())}
    return out


class PhaseLambdas(NamedTuple):
    """Each phase's lambda along the sweep's beta axis at one value of the other axes (:func:`lambda_along_beta`).

    Attributes:
        values: the other sweep axes' values there ({key: value}).
        n_beta: (B,) n beta along the axis.
        lambdas: {phase: :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`} (``free_energy_slopes``).
        excess: {phase: (B,)} the mean over data sets of G = F_alpha - n beta L_min at each n beta.
        excess_se: {phase: (B,)} its standard error across data sets (NaN for one).
    """

    values: dict
    n_beta: np.ndarray
    lambdas: dict
    excess: dict
    excess_se: dict


def lambda_along_beta(ds, sweep: dict) -> list[PhaseLambdas]:
    """Each phase's lambda from the slope of its free energy along the sweep's ``posterior.beta`` axis
    (:func:`slt_relu.posterior.evidence.free_energy_slopes`; the points of that axis share their data sets), for
    every value of the other sweep axes, from the data sets every point along beta has (a point's first ``trials``:
    the others pad the Dataset).

    Args:
        ds: the sweep's Dataset (:func:`sweep_dataset`) with ``free_energy_per_trial`` and ``min_loss_per_trial``.
        sweep: the sweep's axes {key: values}, ``posterior.beta`` among them.

    Returns:
        one :class:`PhaseLambdas` per combination of the other axes' values (in the sweep's order).
    """
    others = [k for k in sweep if k != "posterior.beta"]
    order = (*others, "posterior.beta", "dataset", "phase")
    F = ds["free_energy_per_trial"].transpose(*order).values
    L = ds["min_loss_per_trial"].transpose(*order).values
    n_beta = ds["n_beta"].transpose(*others, "posterior.beta").values
    trials = ds["trials"].transpose(*others, "posterior.beta").values
    names = ds["phase"].values.tolist()
    out = []
    for idx in np.ndindex(n_beta.shape[:-1]):
        real = slice(0, int(np.min(trials[idx])))
        F_real = F[idx][:, real]
        slopes = free_energy_slopes(n_beta[idx], np.where(np.isfinite(F_real), F_real, np.nan), L[idx][:, real])
        G = slopes.excess
        K = G.shape[1]
        with np.errstate(invalid="ignore"):
            g_mean, g_se = G.mean(1), G.std(1, ddof=1) / np.sqrt(K) if K > 1 else np.full(G.mean(1).shape, np.nan)
        out.append(PhaseLambdas({k: sweep[k][i] for k, i in zip(others, idx)}, np.asarray(n_beta[idx]),
                                dict(zip(names, slopes.lambdas)), {nm: g_mean[:, k] for k, nm in enumerate(names)},
                                {nm: g_se[:, k] for k, nm in enumerate(names)}))
    return out
