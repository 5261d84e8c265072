"""A posterior sweep's analysis (kind ``posterior``): each point's draws turned into its typed results
(``slt_relu.posterior.point.PosteriorPoint``: phase masses by DSLT4's rule and by classify_phase, their
cross-table, the trial filter, diagnostics, log evidence and free energies for SMC, the stopping rule's
verdict), the sweep's Dataset from the points' own (``slt_relu.posterior.sweep_results``), metrics.json (the
sweep's tables derived from that Dataset, each point's row from its results, one function per part), what the
figures (``posterior_figures``) draw beyond it and the draws as ArviZ netCDF files.  The headline numbers are
``posterior_headline``'s, read back from metrics.json.
"""
from __future__ import annotations

import json
from functools import partial

import numpy as np

from ..phases import rule_labels
from ..sampling import NUTSInfo, NUTSSettings, SMCSettings, info_from_dict, tree_depth
from ..workflow.kind import Output
from .posterior_figures import with_figure_data, with_label_rank
from .posterior_headline import point_label

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

SAVE_DRAWS_MB = 50          # save_draws = None (the default): the draws are saved when they take at most this


def draws_params(p, flat):
    """A point's draws or particles, flat (C, S, D), as TwoLayer parameters with leading axes (C, S) (NumPy); p: the
    point's settings (``posterior_kind.PointSpec``)."""
    import jax

    from ..network import from_flat

    w, n_in = p.model.base.width, p.model.base.n_in
    return jax.tree.map(np.asarray, jax.vmap(jax.vmap(lambda f: from_flat(f, w, n_in)))(jax.numpy.asarray(flat)))


def point_info(p, res):
    """A point's sampler statistics (``Draws.info``: NUTSInfo, HMCInfo or SMCInfo) from its result's named
    arrays ``res["stats"]`` (``slt_relu.sampling.info_dict``'s, as its checkpoint holds them); p: the point's
    settings.  Checkpoints written before the statistics were typed may lack NUTS's tree depth (computed from
    the steps) and hold SMC's symmetry acceptance as zeros without symmetry moves (None, as a run gives it)."""
    info = info_from_dict(p.sampler, res["stats"])
    if not p.sampler.symmetry_moves:
        info = info._replace(symmetry_accept=None)
    if isinstance(info, NUTSInfo) and info.tree_depth is None:
        info = info._replace(tree_depth=tree_depth(info.num_steps))
    return info


def point_rule(p, params):
    """(codes, names) of the point's phase rule ([phases]) on its draws as parameters, or None for rule "none"."""
    ph = p.phases
    return rule_labels(ph.rule, params, p.example.truth, eps=ph.eps, non_degenerate=ph.non_degenerate,
                       degenerate=ph.degenerate)


def _classify_labels(ph, p, params):
    """classify_phase codes (C, S') of every classify_every-th draw at the point's resolution, and
    each code's name in words."""
    import jax

    from ..classify import classify_phase

    sub = jax.tree.map(lambda a: np.asarray(a)[:, ::ph.classify_every], params)
    got = classify_phase(sub, p.example.truth, inputs=p.inputs, n=p.n, sigma=p.sigma, beta=p.beta)
    codes = np.vectorize(str, otypes=[object])(got.label)                       # (C, S'), as the draws
    return codes, dict(zip(map(str, got.label.ravel()), got.name.ravel()))




def _points(r, points, results) -> tuple[list, list, list]:
    """Each point's results (``slt_relu.posterior.point.PosteriorPoint``), the warnings, and the draws as
    parameters."""
    from ..posterior import evidence, masses as analysis
    from ..posterior.point import PosteriorPoint, cross_table, filter_trials, point_masses
    from ..posterior.stopping import agreement_warnings, stored_agreement

    ph = r.settings.phases
    out, warnings, params_per_point = [], [], []
    for pt in points:
        p, res = pt.settings, results[pt.index]
        smc = isinstance(p.sampler, SMCSettings)
        ds, lz = res["dataset"], res["log_evidence"] if smc else None
        params = draws_params(p, res["flat"])
        params_per_point.append(params)
        rule = point_rule(p, params)
        classified, names = _classify_labels(ph, p, params) if ph.classify else (None, {})
        trials = filter_trials(res["loss"], ds, res["truth_loss"], z=p.trial_filter_z, applied=p.trial_filter)
        masses = None if rule is None else point_masses(*rule, ds, trials, lz)
        labelled = None if classified is None else point_masses(classified, None, ds, trials, lz)
        table = None if rule is None or classified is None else \
            cross_table(rule[0][:, ::ph.classify_every], rule[1], classified, ds, lz)
        info = point_info(p, res)
        where = point_label(pt.values)
        point_evidence = agreement = None
        if smc:
            d = evidence.smc_diagnostics(info, res["grad_evals"], res.get("grad_evals_replaced"))
            labels = rule if rule is not None else (classified, None)
            warnings += evidence.smc_warnings(d, where, analysis.phase_masses(*labels, ds, lz),
                                              int(np.shape(res["flat"])[1]), lz, ds, p.sampler.target_ess)
            agreement = stored_agreement(res)
            if agreement is not None:
                warnings += agreement_warnings(agreement, where)
            if rule is not None and classified is not None:
                warnings += evidence.thin_phase_warnings(analysis.phase_masses(classified, None, ds),
                                                         classified.shape[1], where, "classify_phase")
            point_evidence = evidence.point_evidence(lz, ds, res["loss"], rule, classified)
        else:
            free = np.flatnonzero(np.asarray(p.model.free))
            max_steps = 2 ** p.sampler.max_tree_depth - 1 if isinstance(p.sampler, NUTSSettings) else None
            d = analysis.chain_diagnostics(res["loss"], ds, np.asarray(res["flat"])[..., free], info,
                                           res["grad_evals"], max_steps)
            n_draws = p.datasets * p.chains_per_dataset * p.sampler.num_samples
            warnings += analysis.sampler_warnings(d, where, n_draws, p.sampler.target_accept_prob)
        out.append(PosteriorPoint(p.n, p.beta, p.n_beta, trials, masses, labelled, names, table, point_evidence, d,
                                  agreement))
    return out, warnings, params_per_point


# ----------------------------------------------------------------------------------------
# metrics.json's rows: a point's results as JSON, one function per part (headline reads them back)


def _by_name(names, columns) -> dict:
    return {nm: np.asarray(col).tolist() for nm, col in zip(names, columns)}


def _zscores(v) -> list:
    return ((v - v.mean()) / (v.std() or 1.0)).tolist()


def _trials_row(t) -> dict:
    return {"trials": len(t.kept), "mean_loss_per_trial": t.mean_loss, "excess_loss_per_trial": t.excess_loss,
            "trial_filter": {"applied": t.applied, "z": t.z, "z_scores": _zscores(t.mean_loss),
                             "dropped_trials": np.flatnonzero(~t.kept).tolist(),
                             "excess_z_scores": _zscores(t.excess_loss),
                             "dropped_by_excess": np.flatnonzero(~t.kept_by_excess).tolist()}}


def _masses_row(m, trials) -> dict:
    per = partial(_by_name, m.names)
    return {"mass": per(m.mass), "mass_se": per(m.se), "mass_mcse": per(m.mcse),
            "mass_per_trial": per(m.per_trial[trials.used].T)}


def _free_energy_row(fe) -> dict:
    per = partial(_by_name, fe.names)
    return {"total": fe.free_energy_mean, "total_se": fe.free_energy_se, "total_mcse": fe.free_energy_mcse,
            "phase": per(fe.phase_free_energy_mean), "phase_se": per(fe.phase_free_energy_se),
            "phase_mcse": per(fe.phase_free_energy_mcse), "relative": per(fe.relative_mean),
            "relative_se": per(fe.relative_se), "phase_per_trial": per(fe.phase_free_energy.T)}


def _evidence_row(e) -> dict:
    out = {"log_evidence": e.log_evidence, "log_evidence_per_trial": e.log_evidence_per_trial,
           "log_evidence_se": e.log_evidence_se, "log_evidence_mcse": e.log_evidence_mcse,
           "log_evidence_per_run": e.log_evidence_per_run}
    for key, fe in (("free_energy", e.free_energy), ("free_energy_classify_phase", e.classify_free_energy)):
        if fe is not None:
            out[key] = _free_energy_row(fe)
    if e.min_loss_per_trial is not None:
        out["min_loss_per_trial"] = _by_name(e.free_energy.names, e.min_loss_per_trial.T)
    return out


def point_row(pt, point, res) -> dict:
    """A sweep point's row of metrics.json from its results (``slt_relu.posterior.point.PosteriorPoint``); pt: the
    point (index, values); res: its sampler's results (the program that ran it: wall time, ticks, chains, points)."""
    row = {"index": pt.index, "values": pt.values, "n": point.n, "beta": point.beta, "n_beta": point.n_beta,
           **_trials_row(point.trials)}
    if point.masses is not None:
        m = point.masses
        row.update(_masses_row(m, point.trials))
        if m.unfiltered is not None:
            row["mass_unfiltered"] = _by_name(m.names, m.unfiltered)
        if m.per_run is not None:                  # every run's own masses, so that any pool's error can be rederived
            row.update(mass_per_run=_by_name(m.names, m.per_run.T), dataset_per_run=point.evidence.dataset_per_run)
    if point.classified is not None:
        row["classify_phase"] = {**_masses_row(point.classified, point.trials), "names": point.label_names}
    if point.cross_table is not None:
        t = point.cross_table
        row["cross_table"] = {nm: {lab: float(t.mass[k, j]) for j, lab in enumerate(t.labels) if t.count[k, j]}
                              for k, nm in enumerate(t.phases)}
    if point.convergence is not None:
        row["convergence"] = point.convergence.to_dict()
    if point.evidence is not None:
        row.update(_evidence_row(point.evidence))
    row["diagnostics"] = {**{k: v for k, v in point.diagnostics._asdict().items() if v is not None},
                          "program_wall_s": float(res["program_wall_s"]), "program_ticks": int(res["program_ticks"]),
                          "program_chains": int(res["program_chains"]), "program_points": int(res["program_points"])}
    return row




def lambda_entry(p) -> dict:
    """metrics.json's entry of the phases' lambdas at one value of the other sweep axes (a ``PhaseLambdas`` of
    ``slt_relu.posterior.sweep_results.lambda_along_beta``): values, n_beta, lambda and lambda_se by phase, excess and
    excess_se by phase along n beta."""
    return {"values": p.values, "n_beta": np.asarray(p.n_beta).tolist(),
            "lambda": {nm: e.lambda_ for nm, e in p.lambdas.items()}, "lambda_se": {nm: e.se for nm, e in p.lambdas.items()},
            "excess": {nm: np.asarray(v).tolist() for nm, v in p.excess.items()},
            "excess_se": {nm: np.asarray(v).tolist() for nm, v in p.excess_se.items()}}


def analyze(r, results: dict, compare_points: list | None = None, compare: dict | None = None):
    """A posterior sweep's Output (``slt_relu.kinds.kind``) from its points' results (and the [compare]
    sampler's on the same data sets): each point's results typed (:func:`_points`), results.nc (the sweep as one
    Dataset of the points' own, ``slt_relu.posterior.sweep_results``), metrics.json (the sweep's tables derived
    from that Dataset, each point's row from its results: :func:`point_row`; with what its figures draw beyond the
    sweep's numbers, ``posterior_figures.with_figure_data``) and, when asked or small, the draws as ArviZ data."""
    from ..posterior.sweep_results import by_sampler, grids, lambda_along_beta, sweep_dataset, with_crossover

    s, ph = r.settings, r.settings.phases
    points, warnings, params_per_point = _points(r, r.points, results)
    attrs = {"truth": r.points[0].settings.example.name, "rule": ph.rule, "sampler": r.points[0].settings.sampler.name}

    def dataset(specs, points_, attrs_):
        ds_ = with_label_rank(sweep_dataset(r.sweep, [point.to_dataset() for point in points_],
                                            [pt.values for pt in specs], attrs_))
        return ds_ if ph.crossover is None else with_crossover(ds_, r.sweep, ph.crossover, ph.crossover_axis)

    ds = dataset(r.points, points, attrs)
    rows = [point_row(pt, point, results[pt.index]) for pt, point in zip(r.points, points)]
    summary = partial(grids, sweep=r.sweep)
    metrics = {"truth": attrs["truth"], "rule": ph.rule, "sweep": r.sweep, "sampler": attrs["sampler"]}
    metrics.update(summary(ds))
    if "converged" in ds:
        metrics["converged"] = ds["converged"].values.tolist()
        metrics["converged_phase"] = {nm: ds["converged_phase"].sel(phase=nm).values.tolist()
                                      for nm in ds["phase"].values.tolist()}
        metrics["runs_per_dataset"] = ds["runs_per_dataset"].values.tolist()
    metrics["points"] = rows
    metrics["warnings"] = warnings
    metrics["sampler_totals"] = {"grad_evals": sum(point.diagnostics.grad_evals for point in points),
                                 "draws": int(sum(np.size(results[pt.index]["loss"]) for pt in r.points))}
    lambdas = lambda_along_beta(ds, r.sweep) if "posterior.beta" in r.sweep and "free_energy" in metrics else []
    if lambdas:
        metrics["lambda_from_free_energy"] = [lambda_entry(p) for p in lambdas]
    runs = [("", r.points, results, params_per_point)]
    cds = None
    if compare is not None:
        cpoints, cwarnings, cparams = _points(r, compare_points, compare)
        cds = dataset(compare_points, cpoints, {**attrs, "sampler": s.compare.name})
        crows = [point_row(pt, point, compare[pt.index]) for pt, point in zip(compare_points, cpoints)]
        metrics["compare"] = {"sampler": s.compare.name, **summary(cds),
                              "points": [{k: row[k] for k in ("index", "values", "mass", "mass_se", "mass_mcse",
                                                               "mass_per_trial", "classify_phase", "diagnostics")
                                          if k in row} for row in crows],
                              "grad_evals": sum(point.diagnostics.grad_evals for point in cpoints)}
        metrics["warnings"] += [f"{s.compare.name} (compare): {w}" for w in cwarnings]
        runs.append(("compare-", compare_points, compare, cparams))
    metrics["draws"], draws = sweep_draws(s.save_draws, runs)
    both = ds if cds is None else by_sampler(ds, cds)
    return Output(metrics, with_figure_data(both, r, lambdas, params_per_point, results), draws=draws)


def sweep_draws(save: bool | None, runs: list) -> tuple[dict, dict]:
    """Each point's draws as ArviZ data (slt_relu.arviz_data), ``draws/[compare-]point-NNNNN.nc``, when
    ``save`` is true, or when it is None (the default) and they take at most SAVE_DRAWS_MB.
    runs: [(prefix, points, results, params per point)].  Returns (what metrics.json says of them,
    {name: DataTree})."""
    from ..arviz_data import posterior_tree

    size = sum(np.asarray(res["flat"]).nbytes + np.asarray(res["loss"]).nbytes * 8
               for _, points, results, _ in runs for res in (results[pt.index] for pt in points))
    mb = size / 2**20
    if save is False or (save is None and mb > SAVE_DRAWS_MB):
        why = "save_draws = false" if save is False else f"about {mb:.0f} MB > {SAVE_DRAWS_MB} MB; set save_draws = true"
        return {"saved": False, "why": why}, {}
    trees = {}
    for prefix, points, results, params_per_point in runs:
        for pt, params in zip(points, params_per_point):
            p, res = pt.settings, results[pt.index]
            C = len(res["dataset"])
            tree = posterior_tree(params, res["loss"], res["dataset"], point_info(p, res),
                                  log_evidence=res.get("log_evidence"),
                                  n_beta=np.full(C, p.n_beta), potential_energy=res.get("potential_energy"),
                                  grad_evals=res["grad_evals"],
                                  observed=(res["x"], res["y"]) if "x" in res else None,
                                  attrs={"sampler": p.sampler.name, "point": json.dumps(pt.values),
                                         "truth": p.example.name, "n": p.n, "beta": p.beta, "n_beta": p.n_beta,
                                         "sigma": p.sigma})
            trees[f"{prefix}point-{pt.index:05d}"] = tree
    return {"saved": True, "files": [f"draws/{name}.nc" for name in trees], "megabytes": round(mb, 1)}, trees







