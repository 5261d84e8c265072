"""SMC's stopping rule for the points of a posterior sweep (kind ``posterior``, ``[convergence]``).

A point's runs agree when the Monte Carlo error of every phase mass of its DSLT4 rule and of log Z,
estimated from the spread of its independent runs on each data set, each data set's runs pooled by
their evidence (``slt_relu.posterior.masses``: :func:`run_weights`, :func:`runs_mcse`,
:func:`log_evidence_mcse`), is at most its target.  log Z's error is on the Z scale, so a data set
where one run carries most of the evidence (a mode the other runs missed) cannot pass however
close the other runs are.

A point with R runs of N particles per data set and a worst ratio error / target = r > 1 grows in
one of two ways, whichever costs fewer gradients (a run's gradients are proportional to its
particles):

- more runs: the error falls as 1 / sqrt(runs), so it needs about R r^2 runs; the missing ones
  (new keys, the same data sets) are pooled with the first, at most ``max_chains_per_dataset``;
  cost (R r^2 - R) N;
- with ``max_particles``, more particles: R new runs with 2^ceil(log2 r) times the particles (at
  least twice, at most ``max_particles``) replace the first; cost R 2^ceil(log2 r) N.  Where the
  runs disagree because the share of a mode in a run rests on few ancestors (resampling), the
  spread can fall as 1 / particles, faster than 1 / sqrt(runs) (docs/notes.md); where it falls
  only as 1 / sqrt(particles) the growth falls short and the next round grows again.

Of the two, the cheaper that meets the targets by its law; where neither can within the bounds, as far
as they allow, particles first.  So a point just above its target gets a few more runs, one far above
it more particles, and one at the particle bound more runs.  A pool whose data set rests on one run
(fewer than MIN_EFFECTIVE_RUNS effective runs, ``analysis.effective_runs``) is not converged whatever
its errors; where every other run has Z = 0 the masses' error is infinite (:func:`runs_mcse`) and the
point grows as far as the bounds allow.  An error that is NaN (a run's log Z or mass not finite) more
runs cannot mend: such a point is flagged as it is.  A point still above a target after MAX_ROUNDS
rounds or at its bounds is reported as not converged (``posterior_report``: metrics, warnings,
headline, figures).
"""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ..sampling import SMCSettings
from ..settings import ConfigError, Section


class ConvergenceSettings(Section):
    """SMC's stopping rule: a point whose independent runs disagree more than these targets gets more runs
    on its data sets (as many as its runs' spread says the targets need, pooled with the first ones), up
    to max_chains_per_dataset, or with max_particles new runs with more particles where that costs fewer
    gradients, in at most MAX_ROUNDS rounds; a point still above a target is flagged as not converged in
    metrics.json, the warnings, the headline and the figures."""

    mass_mcse: float | None = Field(None, gt=0, lt=1, description="largest Monte Carlo error of a phase mass "
                                    "(the rule's phases; from the runs' spread on each data set)")
    log_evidence_mcse: float | None = Field(None, gt=0, description="largest Monte Carlo error of log Z (nats)")
    max_chains_per_dataset: int = Field(16, ge=2, le=1000, description="independent runs per data set at most, "
                                        "the first posterior.chains_per_dataset included")
    max_particles: int | None = Field(None, ge=8, le=1_000_000, description="when set, a point whose runs disagree "
                                      "may instead get new runs with more particles (as many runs, "
                                      "2^ceil(log2 error/target) times the particles, replacing the first) where "
                                      "that costs fewer gradients than more runs, up to this many: "
                                      "sampler.num_particles times a power of 2")

    @property
    def active(self) -> bool:
        return self.mass_mcse is not None or self.log_evidence_mcse is not None


MIN_RUNS_FOR_CONVERGENCE = 4   # runs per data set: from 2 the spread (so the MC error) is itself uncertain ~2x
MAX_ROUNDS = 3                 # rounds of growth: the first's estimate of the runs needed is itself noisy
MIN_EFFECTIVE_RUNS = 2.0       # a data set's evidence-weighted pool resting on fewer runs is not converged


def check_convergence(s) -> ConvergenceSettings | None:
    """A posterior config's [convergence] if its targets are set (None otherwise); ConfigError when they
    cannot hold (not SMC, too few runs per data set, a mass target without a rule)."""
    conv, p = s.convergence, s.posterior
    if conv.active and not isinstance(s.sampler, SMCSettings):
        raise ConfigError(f"convergence: the stopping rule adds independent SMC runs; expected sampler.name = "
                          f"\"smc\", got {s.sampler.name!r}")
    if conv.active and p.chains_per_dataset < MIN_RUNS_FOR_CONVERGENCE:
        raise ConfigError(f"posterior.chains_per_dataset: the convergence targets need at least "
                          f"{MIN_RUNS_FOR_CONVERGENCE} independent runs per data set, got {p.chains_per_dataset}")
    if conv.max_particles is not None and (not isinstance(s.sampler, SMCSettings) or not conv.active):
        raise ConfigError("convergence.max_particles: grows the particles of SMC runs under the stopping rule; "
                          "expected sampler.name = \"smc\" and a target (convergence.mass_mcse or "
                          "convergence.log_evidence_mcse)")
    if conv.active and conv.max_chains_per_dataset < p.chains_per_dataset:
        raise ConfigError(f"convergence.max_chains_per_dataset: expected at least posterior.chains_per_dataset = "
                          f"{p.chains_per_dataset}, got {conv.max_chains_per_dataset}")
    if conv.max_particles is not None:
        ratio = conv.max_particles / s.sampler.num_particles
        if ratio < 2 or ratio != 2 ** round(np.log2(ratio)):
            raise ConfigError(f"convergence.max_particles: expected sampler.num_particles = {s.sampler.num_particles} "
                              f"times a power of 2 (at least 2), got {conv.max_particles}")
    if conv.mass_mcse is not None and s.phases.rule == "none":
        raise ConfigError("convergence.mass_mcse: the masses it bounds are the rule's; expected phases.rule "
                          "\"radius\" or \"sector\", got \"none\"")
    return conv if conv.active else None


def run_agreement(p, res: dict) -> dict:
    """How well a point's independent SMC runs agree: the Monte Carlo errors of its rule's phase masses
    and of log Z (from the spread of the runs on each data set, pooled by their evidence) against the
    [convergence] targets, and the runs per data set that would meet them (the error falls as
    1 / sqrt(runs)).  Returns {"converged", "mass_mcse": {phase: ...}, "log_evidence_mcse",
    "runs_per_dataset", "runs_needed" (None where an error is NaN; max_chains_per_dataset + 1 where one is
    infinite), "particles", "worst_ratio" (the largest error / target), "effective_runs"} (the last: per data
    set, 1 / sum_r w_r^2 of the runs' evidence weights)."""
    from ..posterior.masses import effective_runs, log_evidence_mcse, phase_masses
    from .posterior_report import _params, _rule_labels

    conv = p.convergence
    mass_mcse = {}
    if conv.mass_mcse is not None:
        codes, names = _rule_labels(p.phases, p, _params(p, res["flat"]))
        pm = phase_masses(codes, names, res["dataset"], res["log_evidence"])
        mass_mcse = dict(zip(pm.names, (float(v) for v in pm.mcse_runs)))
    lz_mcse = log_evidence_mcse(res["log_evidence"], res["dataset"])
    ratios = [v / conv.mass_mcse for v in mass_mcse.values()]
    if conv.log_evidence_mcse is not None:
        ratios.append(lz_mcse / conv.log_evidence_mcse)
    runs = int(np.min(np.bincount(np.asarray(res["dataset"]))))
    effective = effective_runs(res["log_evidence"], res["dataset"])
    undefined = any(np.isnan(r) for r in ratios) or bool(np.any(np.isnan(effective)))
    worst = np.inf if undefined else max(ratios, default=0.0)          # inf: one run holds a data set's Z
    if not np.all(effective >= MIN_EFFECTIVE_RUNS):     # one run carries a data set
        worst = max(worst, 2.0)
    if undefined:                                       # an error is NaN, which more runs cannot mend
        needed = None
    elif worst <= 1:
        needed = runs
    else:                                               # an infinite error: more than the bound allows
        needed = int(np.ceil(runs * worst**2)) if np.isfinite(worst) else conv.max_chains_per_dataset + 1
    return {"converged": bool(worst <= 1), "mass_mcse": mass_mcse, "log_evidence_mcse": lz_mcse,
            "runs_per_dataset": runs, "runs_needed": needed, "particles": int(np.shape(res["flat"])[1]),
            "worst_ratio": float(worst),
            "effective_runs": effective.tolist()}


CHAIN_AXIS = ("flat", "loss", "dataset", "potential_energy", "grad_evals", "log_evidence")


def pool_runs(first: dict, more: dict) -> dict:
    """One point's results with the runs of ``more`` (other runs on the same data sets) added, sorted by
    data set; every array with a chain axis (the sampler's statistics too) is joined, the program
    counters added."""
    out = dict(first)
    order = np.argsort(np.concatenate([first["dataset"], more["dataset"]]), kind="stable")
    join = lambda a, b: np.concatenate([np.asarray(a), np.asarray(b)])[order]
    for k in CHAIN_AXIS:
        if k in first:
            out[k] = join(first[k], more[k])
    out["stats"] = {k: join(v, more["stats"][k]) for k, v in first["stats"].items()}
    out["program_ticks"] = first["program_ticks"] + more["program_ticks"]
    out["program_chains"] = first["program_chains"] + more["program_chains"]
    return out


def growth(a: dict, conv: ConvergenceSettings) -> tuple[str, int, int] | None:
    """How a point whose runs disagree grows (module docstring): ("runs", k, N), k new runs of N particles
    per data set pooled with the first, or ("particles", R, N'), R new runs of N' particles replacing
    them.  Of the ways that meet the targets by their law (more runs within max_chains_per_dataset;
    more particles by the full factor 2^ceil(log2 r) within max_particles) the one that costs fewer
    gradients, more runs on a tie (their law is certain); where neither can, as far as the bounds allow,
    particles first (their law may be faster).  None when converged, at both bounds, or an error is
    NaN.  ``a``: what :func:`run_agreement` says of the point's runs."""
    if a["converged"] or a["runs_needed"] is None:
        return None
    R, N = a["runs_per_dataset"], a["particles"]
    added = min(max(a["runs_needed"], R + 1), conv.max_chains_per_dataset) - R
    options = []                                         # (meets the targets, gradients per data set, growth)
    if added > 0:
        options.append((R + added >= a["runs_needed"], added * N, ("runs", added, N)))
    if conv.max_particles is not None and N < conv.max_particles:
        r = a["worst_ratio"]
        factor = 2 ** max(1, int(np.ceil(np.log2(r)))) if np.isfinite(r) else np.inf
        particles = int(min(N * factor, conv.max_particles))
        options.append((particles == N * factor, R * particles, ("particles", R, particles)))
    meets = [o for o in options if o[0]]
    if meets:
        return min(meets, key=lambda o: (o[1], o[2][0] != "runs"))[2]
    return min(options, key=lambda o: o[2][0] != "particles")[2] if options else None


def until_runs_agree(points: list, sample, conv: ConvergenceSettings) -> list[dict]:
    """The points' results from ``sample(points, round_)`` (a dict of arrays per point; round_ 0: the
    first runs, then the runs each round adds, with their own keys), growing a point whose runs
    disagree by :func:`growth` (more runs, pooled with the first, or new runs with more particles), in
    at most MAX_ROUNDS rounds; points grown alike share a program.  Each result gets under
    "convergence" what :func:`run_agreement` says of all its runs."""
    out = sample(points, 0)
    agreement = [run_agreement(pt.settings, res) for pt, res in zip(points, out)]
    for round_ in range(1, MAX_ROUNDS + 1):
        grow = {}
        for i, a in enumerate(agreement):
            g = growth(a, conv)
            if g is not None:
                grow.setdefault(g, []).append(i)
        if not grow:
            break
        for (how, runs, particles), idx in sorted(grow.items()):
            more = [points[i]._replace(settings=points[i].settings._replace(
                chains_per_dataset=runs,
                sampler=points[i].settings.sampler.model_copy(update={"num_particles": particles}))) for i in idx]
            for i, res in zip(idx, sample(more, round_)):
                out[i] = pool_runs(out[i], res) if how == "runs" else _replace_runs(out[i], res)
                agreement[i] = run_agreement(points[i].settings, out[i])
    for res, a in zip(out, agreement):
        res["convergence"] = {**a, "targets": conv.model_dump()}
    return out


def _replace_runs(first: dict, new: dict) -> dict:
    """A point's results replaced by runs with more particles, the program counters of both added (the
    first runs' gradients were spent too)."""
    out = dict(new)
    out["program_ticks"] = first["program_ticks"] + new["program_ticks"]
    out["program_chains"] = first["program_chains"] + new["program_chains"]
    out["grad_evals_replaced"] = float(np.sum(first["grad_evals"])) + float(first.get("grad_evals_replaced", 0.0))
    return out
