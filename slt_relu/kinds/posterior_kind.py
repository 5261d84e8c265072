"""Experiment kind ``posterior``: tempered posteriors, phase masses and sweeps (DSLT3, DSLT4).

Glue: the schema (``posterior_settings``), then per sweep point (``slt_relu.workflow.sweep``: checkpointed,
resumable, points that share a compiled program run together) data sets drawn with the point's own key and the
posterior sampled by the sampler of ``[sampler]`` (``slt_relu.posterior.sample_posterior``), with SMC's stopping
rule (more runs until they agree, ``[convergence]``: ``slt_relu.posterior.stopping``); the analysis (masses, trial
filter, diagnostics, crossovers; ``slt_relu.posterior.masses``, ``slt_relu.posterior.evidence``) is
``posterior_report``, the figures ``posterior_figures`` (the kind's ``figures``: drawn from results.nc).

Data for every trial is drawn with its own key (fold_in(seed, data index) split per trial; points that differ only in
beta, prior, model or sampler share their data sets, see ``slt_relu.workflow.sweep.data_indices``); each chain has
its own key too (fold_in(seed, point)), so a point's numbers do not depend on which points share its program.

Outputs: results.nc (the sweep as one labelled Dataset: sweep axes, data set, run and phase as dimensions,
``slt_relu.posterior.sweep_results``; the grids of metrics.json and the figures derive from it, and it holds what the
figures draw beyond: ``posterior_figures.with_figure_data``), metrics.json (per point: masses with standard errors
across trials and Monte Carlo errors, per-trial masses, classify_phase masses and their cross-table with the DSLT4
rule, trial filter, diagnostics, SMC's log evidence and free energies; per sweep axis the values and mass grids; the
crossover and where each phase leads; the [compare] sampler's numbers), phase_mass.png, rules_vs_phases.png,
free_energy.png and free_energy_scaling.png (SMC), effective_weights.png, traces.png, phase_diagram.png (two sweep
axes), and draws/[compare-]point-NNNNN.nc (each point's draws as ArviZ data, ``save_draws``).
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import numpy as np

from ..network import Restriction, make_params
from ..posterior import Prior, resolve_beta
from ..posterior.stopping import StoppingRule, until_runs_agree
from ..sampling import SMCSettings, info_dict
from ..workflow.settings import ConfigError, parse
from ..workflow.kind import Kind, first_line, register_kind
from ..workflow.memory import Need, params, truth_size
from ..workflow.schemas import SMCSection, resolve_setup
from ..workflow.sweep import Point, data_indices, expand, fingerprint, flatten_sweep, run_points
from .posterior_figures import posterior_figures
from .posterior_headline import headline
from .posterior_report import analyze, draws_params, point_rule
from .posterior_settings import ModelSettings, PhasesSettings, PriorSettings, Settings, check_convergence

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)
SWEEP_TABLES = ("truth", "inputs", "model", "prior", "posterior", "sampler")
OBSERVED_SMALL = 20_000     # values of a point's x and y at most to be kept with its draws (observed_data)
# a point's checkpoint (slt_relu.workflow.sweep): the dimensions of its arrays; chain: a chain or SMC run, draw: a
# kept draw or particle, trial: a data set (the analysis's "dataset" is each chain's data set index)
POINT_DIMS = {"flat": ("chain", "draw", "parameter"), "loss": ("chain", "draw"), "dataset": ("chain",),
              "potential_energy": ("chain", "draw"), "grad_evals": ("chain",), "log_evidence": ("chain",),
              "truth_loss": ("trial",), "x": ("trial", "sample", "input"), "y": ("trial", "sample")}


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
    data_index: int = 0
    phases: PhasesSettings | None = None
    convergence: StoppingRule | None = None


# the sweep keys that change a point's data sets: points that differ only in beta, the prior, the model or the
# sampler see the same data sets, so their differences are the posterior's, not the data's
DATA_KEYS = ("truth.", "inputs.", "sigma", "posterior.n", "posterior.datasets")


class Resolved(NamedTuple):
    settings: Settings
    sweep: dict
    points: list
    batch: int


# ----------------------------------------------------------------------------------------
# config


def _prior(t: PriorSettings) -> Prior:
    groups = {}
    for g in ("w", "b", "q", "c"):
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
    conv = check_convergence(s)
    return PointSpec(setup.example, setup.inputs, setup.sigma, model, _prior(s.prior), p.n, beta, p.n * beta,
                     p.datasets, p.chains_per_dataset, p.init_radius, s.sampler.build(), p.trial_filter, p.trial_filter_z,
                     phases=s.phases, convergence=conv)


def resolve(s: Settings, raw: dict) -> Resolved:
    from ..phases import RADIUS_PHASES, SECTOR_PHASES, check_truth, reduced_truth

    sweep = flatten_sweep(raw.get("sweep", {}))
    points = expand(raw, sweep, lambda d: point_spec(parse(Settings, d)), tables=SWEEP_TABLES, scalars=("sigma",))
    points = [pt._replace(settings=pt.settings._replace(data_index=di)) for pt, di in zip(points, data_indices(sweep, DATA_KEYS))]
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
    slots in chains (CPU_SLOTS per CPU device; the measurement behind it: docs/notes.md), and 512 chains
    per program on accelerators."""
    import jax

    from ..sampling.nuts import CPU_SLOTS

    if setting != "auto":
        return int(setting)
    chains = p.datasets * p.chains_per_dataset
    devices = jax.local_devices()
    if devices[0].platform != "cpu":
        return max(1, 512 // chains)
    slots = getattr(p.sampler, "slots", None) or CPU_SLOTS * len(devices)
    return max(1, 2 * slots // chains)


# ----------------------------------------------------------------------------------------
# sampling: one program per group of points


def _signature(point: Point) -> tuple:
    """Points with equal signatures share one compiled program (only data and n_beta differ)."""
    p = point.settings
    return (p.model, p.prior, p.sigma, p.n, p.datasets, p.chains_per_dataset, p.sampler, p.init_radius, p.convergence)


def _ident(point: Point, seed: int) -> str:
    import jax

    p = point.settings
    from ..network import to_flat

    return fingerprint("posterior", point.index, repr(point.values), p.example.name,
                       np.asarray(to_flat(p.example.truth)).tolist(), repr(p.inputs), p.sigma,
        repr(p.model), p.prior, p.n, p.n_beta, p.datasets, p.chains_per_dataset, p.init_radius,
        dataclasses.asdict(p.sampler), p.data_index, seed, bool(jax.config.read("jax_enable_x64")), jax.__version__,
        # with [convergence] the phase rule decides how many runs are sampled
        (p.convergence._asdict(), p.phases.model_dump()) if p.convergence else None)


def _cost(point: Point) -> float:
    p = point.settings
    s = p.sampler
    if isinstance(s, SMCSettings):
        per_chain = s.num_particles * s.num_mcmc_steps
    else:
        per_chain = s.num_warmup + s.num_samples * s.thin
    return p.datasets * p.chains_per_dataset * per_chain


def point_keys(key, index: int, data_index: int, datasets: int, chains: int, round_: int = 0):
    """(data set keys (K,), chain keys (K * chains_per_dataset,)) of sweep point ``index`` whose data
    index (``slt_relu.workflow.sweep.data_indices``) is ``data_index``; ``round_`` > 0: the runs the stopping rule adds in
    that round (new chain keys, the same data sets)."""
    import jax

    k_data = jax.random.split(jax.random.fold_in(key, data_index))[0]
    k_chain = jax.random.split(jax.random.fold_in(key, index))[1]
    if round_:
        k_chain = jax.random.fold_in(k_chain, round_)
    return jax.random.split(k_data, datasets), jax.random.split(k_chain, datasets * chains)


def _run_program(points: list, key) -> list[dict]:
    """Sample every point of one program together (a dict of arrays per point); with [convergence]
    targets, until each point's independent runs agree (``slt_relu.posterior.stopping``)."""
    rule = points[0].settings.convergence
    if rule is None:
        return sample_program(points, key, 0)
    return until_runs_agree(points, partial(_grown, key=key), rule, labels=_labels)


def _grown(points: list, round_: int, size, key) -> list[dict]:
    """The stopping rule's sampler: round 0 the points as they are, later rounds size = (runs per data set,
    particles) new runs of each point."""
    if size is not None:
        runs, particles = size
        points = [pt._replace(settings=pt.settings._replace(
            chains_per_dataset=runs, sampler=pt.settings.sampler.replace(num_particles=particles)))
            for pt in points]
    return sample_program(points, key, round_)


def _labels(point: Point, res: dict):
    """The phase rule's codes and names of a point's particles (the stopping rule's masses)."""
    return point_rule(point.settings, draws_params(point.settings, res["flat"]))


def sample_program(points: list, key, round_: int) -> list[dict]:
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
        kd, kc = point_keys(key, pt.index, p.data_index, p.datasets, p.chains_per_dataset, round_)
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
               "potential_energy": np.asarray(d.potential_energy)[sl], "grad_evals": d.grad_evals[sl],
               "truth_loss": truth_loss[k], "program_ticks": d.ticks, "program_chains": len(ps.dataset)}
        if np.size(xs[k]) + np.size(ys[k]) <= OBSERVED_SMALL:          # small data sets go into the draws' file
            res.update(x=np.asarray(xs[k]), y=np.asarray(ys[k]))
        res["stats"] = {name: v[sl] for name, v in info_dict(d.info).items()}     # posterior_report.point_info
        if d.log_evidence is not None:
            res["log_evidence"] = np.asarray(d.log_evidence)[sl]
        out.append(res)
    return out


def _compare_points(r: Resolved) -> list:
    return [pt._replace(settings=pt.settings._replace(sampler=r.settings.compare.build(), convergence=None))
            for pt in r.points]


def run(r: Resolved, key, ctx):
    runs = {"sampler": r.points}
    if r.settings.compare is not None:
        runs["compare"] = _compare_points(r)
    reports = {}
    for name, points in runs.items():                   # the same data sets: keys depend on the point only
        folder = ctx.checkpoints if name == "sampler" else ctx.checkpoints / name
        reports[name] = run_points(points, partial(_run_program, key=key), ident=partial(_ident, seed=ctx.seed),
                                   signature=_signature, batch=r.batch, checkpoints=folder, cost=_cost,
                                   progress=ctx.progress, label="sweep points" + ("" if name == "sampler" else
                                                                                  f" ({r.settings.compare.name})"),
                                   layout=ctx.layout, dims=POINT_DIMS)
    if ctx.layout[0]:                                   # not process 0: its points are checkpointed, done
        return None
    output = analyze(r, reports["sampler"].results, runs.get("compare"),
                     reports["compare"].results if "compare" in reports else None)
    metrics = output.metrics
    metrics["resumed_points"] = reports["sampler"].resumed
    metrics["resumed_wall_s"] = sum(rep.resumed_wall_s() for rep in reports.values())
    metrics["programs"] = [{"points": prog} for prog in reports["sampler"].programs]
    return output


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    p, sampler = s.posterior, s.sampler
    width = s.model.width or truth_size(s)[0]
    n_in = truth_size(s)[1]
    D = params(width, n_in)
    runs = p.datasets * p.chains_per_dataset
    out = [Need("posterior.n, posterior.datasets", "the data sets of one sweep point", p.datasets * p.n * (n_in + 1))]
    if isinstance(sampler, SMCSection):
        particles = sampler.num_particles
        if s.convergence.active:                          # the stopping rule may add runs and grow their particles
            runs = p.datasets * max(p.chains_per_dataset, s.convergence.max_chains_per_dataset)
            particles = max(particles, s.convergence.max_particles or 0)
        out += [Need("sampler.num_particles, posterior.datasets, posterior.chains_per_dataset, "
                     "convergence.max_chains_per_dataset, convergence.max_particles", "the particles of one sweep point",
                     runs * particles * D),
                Need("posterior.n, sampler.particle_batch", "one batch of forward passes over the data",
                     runs * min(sampler.particle_batch, particles) * p.n * width)]
    else:
        out += [Need("sampler.num_samples, posterior.datasets, posterior.chains_per_dataset",
                     "the kept draws of one sweep point", runs * sampler.num_samples * D),
                Need("posterior.n, posterior.datasets, posterior.chains_per_dataset",
                     "one forward pass of every chain over its data", runs * p.n * width)]
    return out


# a sweep: the processes of a multi-process run share its points
KIND = register_kind(Kind("posterior", Settings, resolve, run, headline,
                          description=first_line(__doc__), sweeps=True, memory=memory, figures=posterior_figures))
