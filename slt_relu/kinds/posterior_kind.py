"""Experiment kind ``posterior``: tempered posteriors, phase masses and sweeps (DSLT3, DSLT4).

Glue: the schema below, then per sweep point (``slt_relu.sweep``: checkpointed, resumable, points
that share a compiled program run together) data sets drawn with the point's own key and the
posterior sampled by the sampler of ``[sampler]`` (``slt_relu.posterior.sample_posterior``);
the analysis (masses, trial filter, diagnostics, crossovers) is ``slt_relu.analysis``, the
figures ``slt_relu.plots``.

Data for every trial is drawn with its own key (fold_in(seed, point) split per trial); each
chain has its own key too, so a point's numbers do not depend on which points share its program.

Outputs: metrics.json (per point: masses with standard errors across trials and Monte Carlo
errors, per-trial masses, classify_phase masses, trial filter, diagnostics; per sweep axis the
values and mass grids; the crossover), phase_mass.png, effective_weights.png, traces.png,
phase_diagram.png (two sweep axes), arrays.npz (per-trial mean losses).
"""
from __future__ import annotations

from functools import partial
from typing import Annotated, Literal, NamedTuple, Union

import numpy as np
from pydantic import Field, model_validator

from ..config import ConfigError
from ..network import Restriction, make_params
from ..posterior import GROUPS, PRIOR_KINDS, Prior, resolve_beta
from ..samplers import HMC, NUTS
from ..settings import Section, parse
from ..sweep import Point, expand, fingerprint, flatten_sweep, run_points
from .common import TruthExperiment, resolve_setup

SWEEP_TABLES = ("truth", "inputs", "model", "prior", "posterior", "sampler")
RULES = ("radius", "sector", "none")


class ModelSettings(Section):
    width: int | None = Field(None, ge=1, le=64, description="model width (default: the example's model)")
    free: tuple[str, ...] | None = Field(None, description="free coordinate names (default: all, or the example's "
                                         "restricted model, e.g. Example 3.4's w1, w2)")


class PriorGroup(Section):
    dist: Literal[PRIOR_KINDS] | None = Field(None, description="this group's prior (default: [prior] dist)")
    scale: float | None = Field(None, gt=0, description="this group's scale (default: [prior] scale)")


class PriorSettings(Section):
    dist: Literal[PRIOR_KINDS] = Field("normal", description="N(0, scale^2) or U[-scale, scale] per coordinate")
    scale: float = Field(1.0, gt=0, description="the prior's scale")
    w: PriorGroup = PriorGroup()
    b: PriorGroup = PriorGroup()
    q: PriorGroup = PriorGroup()
    c: PriorGroup = PriorGroup()


class PosteriorSettings(Section):
    n: int = Field(10000, ge=2, le=10_000_000, description="data set size")
    beta: Annotated[float, Field(gt=0)] | Literal["wbic"] = Field("wbic", description="inverse temperature; "
                                                                  "\"wbic\" = 1/log n")
    datasets: int = Field(4, ge=1, le=100_000, description="trials per sweep point, each its own data set")
    chains_per_dataset: int = Field(1, ge=1, le=1000, description="chains (or independent runs) per data set")
    init_radius: float = Field(2.0, gt=0, description="chains start uniformly in [-r, r] (unconstrained)")
    trial_filter: bool = Field(False, description="DSLT4's filter dropping trials whose mean L_n has "
                               "|z| > trial_filter_z")
    trial_filter_z: float = Field(1.5, ge=0, description="the filter's threshold")
    points_per_program: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="sweep points per compiled program (each checkpointed when its program ends); "
        "\"auto\": points making twice the sampler's slots in chains (CPU), 512 chains (accelerators)")


class PhasesSettings(Section):
    rule: Literal[RULES] = Field("radius", description="DSLT4's rule on |q_i| w_i (radius: degenerate / "
                                 "non-degenerate; sector: true / reversed orientation)")
    eps: float = Field(0.3, ge=0, description="radius rule: tolerance around the radii")
    non_degenerate: float = Field(1.0, description="radius rule: every node's radius")
    degenerate: float = Field(2.0, description="radius rule: the one live node's radius")
    classify: bool = Field(True, description="classify_phase labels on every classify_every-th draw")
    classify_tol: float = Field(0.1, ge=0, le=10, description="classify_phase tolerance")
    classify_every: int = Field(10, ge=1, description="thinning of the classified draws")
    crossover: tuple[str, str] | None = Field(None, description="two phases of the rule whose crossing is reported")
    crossover_axis: str | None = Field(None, description="the sweep key the crossover runs along (default: the last)")


class PlotsSettings(Section):
    trace_points: int = Field(3, ge=0, le=50, description="sweep points with trace plots")
    weight_panels: int = Field(24, ge=1, le=200, description="panels of effective weights")


SamplerSettings = Annotated[Union[NUTS, HMC], Field(discriminator="name", description="the sampler and its settings")]


class Settings(TruthExperiment):
    kind: Literal["posterior"]
    model: ModelSettings = ModelSettings()
    prior: PriorSettings = PriorSettings()
    posterior: PosteriorSettings = PosteriorSettings()
    sampler: SamplerSettings = NUTS()
    phases: PhasesSettings = PhasesSettings()
    plots: PlotsSettings = PlotsSettings()
    sweep: dict = Field({}, description="dotted keys of [truth], [inputs], [model], [prior], [posterior], "
                        "[sampler] or sigma with lists of values: the grid of all combinations")

    @model_validator(mode="before")
    @classmethod
    def _default_sampler(cls, data):
        """[sampler] without a name is NUTS."""
        if isinstance(data, dict) and isinstance(data.get("sampler"), dict) and "name" not in data["sampler"]:
            return {**data, "sampler": {"name": "nuts", **data["sampler"]}}
        return data


class PointSpec(NamedTuple):
    """Everything one sweep point samples with."""

    example: object
    inputs: object
    sigma: float
    model: Restriction
    prior: Prior
    n: int
    beta: float
    n_beta: float
    datasets: int
    chains_per_dataset: int
    init_radius: float
    sampler: object
    trial_filter: bool
    trial_filter_z: float


class Resolved(NamedTuple):
    settings: Settings
    sweep: dict
    points: list
    batch: int


# ----------------------------------------------------------------------------------------
# config


def _prior(t: PriorSettings) -> Prior:
    groups = {}
    for g in GROUPS:
        spec = getattr(t, g)
        groups[g] = (spec.dist or t.dist, spec.scale if spec.scale is not None else t.scale)
    return Prior(**groups)


def _model(t: ModelSettings, example) -> Restriction:
    import jax.numpy as jnp

    base = example.model.base
    width = t.width or base.width
    if width != base.width:
        if example.model.num_free != len(example.model.free):
            raise ConfigError(f"model.width: expected {base.width} (the example's restricted model) unless free "
                              f"coordinates are listed, got {width}")
        base = make_params(jnp.zeros((width, base.n_in)), 0.0, 0.0, 0.0)
    if t.free is None:
        return example.model if width == example.model.base.width else Restriction.full(base)
    try:
        return Restriction.from_names(base, t.free)
    except ValueError as err:
        raise ConfigError(f"model.free: {err}") from None


def point_spec(s: Settings) -> PointSpec:
    setup = resolve_setup(s)
    model = _model(s.model, setup.example)
    if model.base.n_in != setup.example.truth.n_in:
        raise ConfigError(f"model: expected n_in = {setup.example.truth.n_in} like the truth")
    p = s.posterior
    try:
        beta = resolve_beta(p.beta, p.n)
    except ValueError as err:
        raise ConfigError(f"posterior.{err}") from None
    return PointSpec(setup.example, setup.inputs, setup.sigma, model, _prior(s.prior), p.n, beta, p.n * beta,
                     p.datasets, p.chains_per_dataset, p.init_radius, s.sampler, p.trial_filter, p.trial_filter_z)


def resolve(s: Settings, raw: dict) -> Resolved:
    from ..phases import RADIUS_PHASES, SECTOR_PHASES, check_truth, reduced_truth

    sweep = flatten_sweep(raw.get("sweep", {}))
    points = expand(raw, sweep, lambda d: point_spec(parse(Settings, d)), tables=SWEEP_TABLES, scalars=("sigma",))
    ph = s.phases
    names = {"radius": RADIUS_PHASES, "sector": SECTOR_PHASES, "none": ()}[ph.rule]
    axis = ph.crossover_axis or (list(sweep)[-1] if sweep else None)
    if ph.crossover is not None and not set(ph.crossover) <= set(names):
        raise ConfigError(f"phases.crossover: expected two phase names of the {ph.rule} rule ({', '.join(names)}), "
                          f"got {list(ph.crossover)}")
    if ph.crossover is not None and axis not in sweep:
        raise ConfigError(f"phases.crossover_axis: expected one of the sweep keys ({', '.join(sweep) or 'none'}), "
                          f"got {axis!r}")
    for pt in points:
        if ph.rule == "sector" and pt.settings.model.base.n_in != 2:
            raise ConfigError(f"phases.rule: expected \"radius\" or \"none\" unless n_in = 2, got {ph.rule!r}")
        if ph.classify:
            try:
                check_truth(reduced_truth(pt.settings.example.truth))
            except ValueError as err:
                raise ConfigError(f"phases.classify: the truth cannot be classified against ({err}); set it false") \
                    from None
    s = s.model_copy(update={"phases": ph.model_copy(update={"crossover_axis": axis})})
    return Resolved(s, sweep, points, _batch(s.posterior.points_per_program, points[0].settings))


def _batch(setting, p: PointSpec) -> int:
    """Points per program: the setting, or with "auto" as many points as make twice the sampler's
    slots in chains (CPU_SLOTS per CPU device): on this 2-core CPU a 16-point PT1 sweep ran at
    0.55x, 0.87x, 0.95x the one-program speed with 1, 4, 8 points (16, 32 chains) per program
    (benchmarks/bench_posterior.py --sweep-points 16), so 8 keeps 95% of the speed and checkpoints
    PT1's 22 points three times.  Accelerators: 512 chains per program (not measured here)."""
    import jax

    from ..nuts import CPU_SLOTS

    if setting != "auto":
        return int(setting)
    chains = p.datasets * p.chains_per_dataset
    devices = jax.devices()
    if devices[0].platform != "cpu":
        return max(1, 512 // chains)
    slots = getattr(p.sampler, "slots", None) or CPU_SLOTS * len(devices)
    return max(1, 2 * slots // chains)


# ----------------------------------------------------------------------------------------
# sampling: one program per group of points


def _signature(point: Point) -> tuple:
    """Points with equal signatures share one compiled program (only data and n_beta differ)."""
    p = point.settings
    return (p.model, p.prior, p.sigma, p.n, p.datasets, p.chains_per_dataset, p.sampler, p.init_radius)


def _ident(point: Point, seed: int) -> str:
    import jax

    p = point.settings
    return fingerprint("posterior", point.index, repr(point.values), p.example.name, np.asarray(
        p.example.truth.w).tolist(), np.asarray(p.example.truth.q).tolist(), repr(p.inputs), p.sigma,
        repr(p.model), p.prior, p.n, p.n_beta, p.datasets, p.chains_per_dataset, p.init_radius,
        p.sampler.model_dump(), seed, bool(jax.config.read("jax_enable_x64")), jax.__version__)


def _cost(point: Point) -> float:
    p = point.settings
    s = p.sampler
    return p.datasets * p.chains_per_dataset * (s.num_warmup + s.num_samples * s.thin)


def point_keys(key, index: int, datasets: int, chains: int):
    """(data set keys (K,), chain keys (K * chains_per_dataset,)) of sweep point ``index``."""
    import jax

    k_data, k_chain = jax.random.split(jax.random.fold_in(key, index))
    return jax.random.split(k_data, datasets), jax.random.split(k_chain, datasets * chains)


def _run_program(points: list, key) -> list[dict]:
    """Sample every point of one program together; a dict of arrays per point."""
    import jax
    import jax.numpy as jnp

    from ..loss import empirical_loss
    from ..network import to_flat
    from ..posterior import draw_datasets, sample_posterior

    p0 = points[0].settings
    xs, ys, nbs, ckeys, truth_loss = [], [], [], [], []
    for pt in points:
        p = pt.settings
        kd, kc = point_keys(key, pt.index, p.datasets, p.chains_per_dataset)
        x, y = draw_datasets(kd, p.example.truth, p.inputs, p.n, p.sigma)
        truth_loss.append(np.asarray(jax.vmap(partial(empirical_loss, p.example.truth, sigma=p.sigma))(x, y)))
        xs.append(x)
        ys.append(y)
        nbs.append(np.full(p.datasets, p.n_beta))
        ckeys.append(kc)
    ps = sample_posterior(jnp.concatenate(ckeys), jnp.concatenate(xs), jnp.concatenate(ys),
                          jnp.asarray(np.concatenate(nbs)), model=p0.model, prior=p0.prior, sigma=p0.sigma,
                          settings=p0.sampler, chains_per_dataset=p0.chains_per_dataset, init_radius=p0.init_radius)
    C = p0.datasets * p0.chains_per_dataset
    flat = np.asarray(jax.vmap(jax.vmap(to_flat))(ps.params))
    d = ps.draws
    out = []
    for k in range(len(points)):
        sl = slice(k * C, (k + 1) * C)
        res = {"flat": flat[sl], "loss": ps.loss[sl], "dataset": ps.dataset[sl] - k * p0.datasets,
               "grad_evals": d.grad_evals[sl], "truth_loss": truth_loss[k], "program_ticks": d.ticks,
               "program_chains": len(ps.dataset)}
        res.update({f"stat_{name}": np.asarray(v)[sl] for name, v in d.stats.items()})
        out.append(res)
    return out


def run(r: Resolved, outdir, key, ctx) -> dict:
    report = run_points(r.points, partial(_run_program, key=key), ident=partial(_ident, seed=ctx.seed),
                        signature=_signature, batch=r.batch, checkpoints=ctx.checkpoints, cost=_cost,
                        progress=ctx.progress, label="sweep points")
    metrics = _analyze(r, report.results, outdir)
    metrics["resumed_points"] = report.resumed
    metrics["programs"] = [{"points": prog} for prog in report.programs]
    return metrics


# ----------------------------------------------------------------------------------------
# analysis (slt_relu.analysis) and figures


def _params(p: PointSpec, flat):
    import jax

    from ..network import from_flat

    w, n_in = p.model.base.width, p.model.base.n_in
    return jax.tree.map(np.asarray, jax.vmap(jax.vmap(lambda f: from_flat(f, w, n_in)))(jax.numpy.asarray(flat)))


def _rule_labels(ph: PhasesSettings, p: PointSpec, params):
    from ..phases import RADIUS_PHASES, SECTOR_PHASES, radius_rule, sector_phase

    if ph.rule == "radius":
        return radius_rule(params, ph.eps, ph.non_degenerate, ph.degenerate), RADIUS_PHASES
    if ph.rule == "sector":
        return sector_phase(params, p.example.truth), SECTOR_PHASES
    return None


def _classify_labels(ph: PhasesSettings, p: PointSpec, params):
    import jax

    from ..inputs import UniformBox
    from ..phases import classify_phase, reduced_truth

    sub = jax.tree.map(lambda a: np.asarray(a)[:, ::ph.classify_every], params)
    inputs = p.inputs if isinstance(p.inputs, UniformBox) else None
    got = classify_phase(sub, reduced_truth(p.example.truth), tol=ph.classify_tol, inputs=inputs)
    C, S = np.shape(sub.c)
    return np.array([str(lab) for lab in got.label], dtype=object).reshape(C, S)


def _where(values: dict) -> str:
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in values.items()) \
        or "the run"


def _analyze(r: Resolved, results: dict, outdir) -> dict:
    from .. import analysis

    s, ph = r.settings, r.settings.phases
    rows, warnings, params_per_point = [], [], []
    for pt in r.points:
        p, res = pt.settings, results[pt.index]
        params = _params(p, res["flat"])
        params_per_point.append(params)
        rule = _rule_labels(ph, p, params)
        classified = _classify_labels(ph, p, params) if ph.classify else None
        row = {"index": pt.index, "values": pt.values, "n": p.n, "beta": p.beta, "n_beta": p.n_beta}
        row.update(analysis.point_summary(res["loss"], res["dataset"], res["truth_loss"], filter_z=p.trial_filter_z,
                                          apply_filter=p.trial_filter, rule=rule, classified=classified))
        stats = {k[5:]: v for k, v in res.items() if k.startswith("stat_")}
        stats["grad_evals"] = res["grad_evals"]
        free = np.flatnonzero(np.asarray(p.model.free))
        max_steps = 2 ** p.sampler.max_tree_depth - 1 if p.sampler.name == "nuts" else None
        d = analysis.chain_diagnostics(res["loss"], res["dataset"], np.asarray(res["flat"])[..., free], stats,
                                       max_steps)
        d.update(program_wall_s=float(res["program_wall_s"]), program_ticks=int(res["program_ticks"]),
                 program_chains=int(res["program_chains"]), program_points=int(res["program_points"]))
        row["diagnostics"] = d
        n_draws = p.datasets * p.chains_per_dataset * p.sampler.num_samples
        warnings += analysis.sampler_warnings(d, _where(pt.values), n_draws, p.sampler.target_accept_prob)
        rows.append(row)
    metrics = {"truth": r.points[0].settings.example.name, "rule": ph.rule, "sweep": r.sweep}
    metrics.update(analysis.sweep_summary(r.sweep, rows, crossover_phases=ph.crossover,
                                          crossover_axis=ph.crossover_axis))
    metrics["points"] = rows
    metrics["warnings"] = warnings
    metrics["sampler_totals"] = {"grad_evals": sum(row["diagnostics"]["grad_evals"] for row in rows),
                                 "draws": int(sum(np.size(results[pt.index]["loss"]) for pt in r.points))}
    _plots(r, metrics, rows, params_per_point, results, outdir)
    np.savez_compressed(outdir / "arrays.npz", **{f"point{row['index']}_mean_loss_per_trial": row["mean_loss_per_trial"]
                                                  for row in rows})
    return metrics


def _axis_label(key: str) -> str:
    return {"posterior.beta": "beta", "truth.t": "t", "truth.v": "v", "posterior.n": "n"}.get(key, key)


def _plots(r: Resolved, metrics, rows, params, results, outdir):
    from ..phases import effective_weights
    from ..plots import phase_diagram_figure, phase_mass_figure, posterior_traces_figure, weights_facets_figure

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

    panels = []
    if ph.rule != "none":
        panels.append((f"DSLT4 rule: {ph.rule}", {nm: (lines(metrics["mass"][nm]), lines(metrics["mass_se"][nm]))
                                                   for nm in metrics["mass"]}))
    if "classify_phase" in metrics:
        cp = metrics["classify_phase"]
        panels.append(("classify_phase (on the input box)", {nm: (lines(cp["mass"][nm]), lines(cp["mass_se"][nm]))
                                                               for nm in list(cp["mass"])[:6]}))
    shades = None
    if len(axes) == 2:
        other = axes[1 - xi]
        shades = (_axis_label(other), sweep[other][0], sweep[other][-1])
    cross = None
    if ph.crossover and len(axes) == 1:
        name = xkey.split(".")[-1]
        cross = (metrics.get(f"crossover_{name}"), metrics.get(f"crossover_{name}_se"))
    phase_mass_figure(outdir / "phase_mass.png", xs, _axis_label(xkey) if xkey else "", panels, title=title,
                      shades=shades, crossover=cross)
    if len(axes) == 2 and ph.rule != "none":
        ykey = axes[1 - xi]
        ys = np.asarray(metrics["n_beta"] if ykey == "posterior.beta" else sweep[ykey], float)
        grids = {nm: (np.asarray(metrics["mass"][nm], float).T if xi == 0 else np.asarray(metrics["mass"][nm], float))
                 for nm in metrics["mass"]}
        name = xkey.split(".")[-1]
        phase_diagram_figure(outdir / "phase_diagram.png", xs, ys, grids,
                             np.asarray(metrics.get(f"crossover_{name}", [np.nan] * len(ys)), float).reshape(-1),
                             np.asarray(metrics.get(f"crossover_{name}_se", [np.nan] * len(ys)), float).reshape(-1),
                             xlabel=_axis_label(xkey), ylabel="n beta" if ykey == "posterior.beta" else _axis_label(ykey),
                             crossover_label=f"crossover {_axis_label(xkey)} ({' = '.join(ph.crossover or ())})",
                             title=title)
    if points[0].settings.model.base.n_in == 2:
        step = max(1, -(-len(points) // s.plots.weight_panels))
        panels = []
        for pt, prm in list(zip(points, params))[::step]:
            truth = pt.settings.example.truth
            eff_truth = np.abs(np.asarray(truth.q))[:, None] * np.asarray(truth.w)
            label = ", ".join(f"{_axis_label(k).split('.')[-1]} = {v:.4g}" if isinstance(v, float)
                              else f"{_axis_label(k).split('.')[-1]} = {v}" for k, v in pt.values.items())
            panels.append((label, effective_weights(prm).reshape(-1, 2), eff_truth))
        weights_facets_figure(outdir / "effective_weights.png", panels,
                              title=f"{title}: posterior density of the effective weights |q_i| w_i (all nodes)")
    if s.plots.trace_points:
        pick = np.unique(np.linspace(0, len(points) - 1, min(s.plots.trace_points, len(points))).round().astype(int))
        traces = []
        for i in pick:
            res = results[points[i].index]
            radii = np.linalg.norm(effective_weights(params[i]), axis=-1)
            traces.append((rows[i]["values"], res["loss"], radii))
        posterior_traces_figure(outdir / "traces.png", traces, title=f"{title}: traces")
