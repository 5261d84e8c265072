"""SMC's stopping rule for a batch of posterior points: more independent runs until they agree.

A point's runs agree when the Monte Carlo error of every phase mass of its phase rule and of log Z, estimated
from the spread of its independent runs on each data set, each data set's runs pooled by their evidence
(:func:`~slt_relu.posterior.masses.run_weights`, :func:`~slt_relu.posterior.masses.runs_mcse`,
:func:`~slt_relu.posterior.masses.log_evidence_mcse`), is at most its target.  log Z's error is on the Z scale,
so a data set where one run carries most of the evidence (a mode the other runs missed) cannot pass however
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
(fewer than MIN_EFFECTIVE_RUNS effective runs, ``masses.effective_runs``) is not converged whatever
its errors; where every other run has Z = 0 the masses' error is infinite (``masses.runs_mcse``) and the
point grows as far as the bounds allow.  An error that is NaN (a run's log Z or mass not finite) more
runs cannot mend: such a point is flagged as it is.  A point still above a target after MAX_ROUNDS
rounds or at its bounds is reported as not converged.

A point's results are a dict of arrays with a leading chain (run) axis: ``log_evidence`` (R,), ``dataset``
(R,) (each run's data set), ``flat`` (R, N, D) (the particles), ``grad_evals`` (R,), ``stats`` (the sampler's
statistics as named (R, ...) arrays, ``slt_relu.sampling.info_dict``), and the program counters
``program_ticks``, ``program_chains``; a sampler of points (:func:`until_runs_agree`) returns one per point.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["RunAgreement", "StoppingRule", "agreement_warnings", "growth", "pool_runs", "replace_runs", "run_agreement",
           "stored_agreement", "until_runs_agree"]

MAX_ROUNDS = 3                 # rounds of growth: the first's estimate of the runs needed is itself noisy
MIN_EFFECTIVE_RUNS = 2.0       # a data set's evidence-weighted pool resting on fewer runs is not converged
CHAIN_AXIS = ("flat", "loss", "dataset", "potential_energy", "grad_evals", "log_evidence")


class StoppingRule(NamedTuple):
    """The stopping rule's targets and bounds (module docstring).

    Attributes:
        mass_mcse: the largest Monte Carlo error of a phase mass, in (0, 1), or None (no mass target).
        log_evidence_mcse: the largest Monte Carlo error of log Z in nats, > 0, or None (no log Z target).
        max_chains_per_dataset: independent runs per data set at most, the first ones included (>= 2).
        max_particles: when set, a point may instead get new runs with up to this many particles.
    """

    mass_mcse: float | None = None
    log_evidence_mcse: float | None = None
    max_chains_per_dataset: int = 16
    max_particles: int | None = None

    @property
    def active(self) -> bool:
        """Whether the rule has a target (without one it never grows a point)."""
        return self.mass_mcse is not None or self.log_evidence_mcse is not None


def _checked(rule) -> StoppingRule:
    """``rule`` if it is a StoppingRule of valid numbers; else a one-line TypeError / ValueError naming the field."""
    if not isinstance(rule, StoppingRule):
        raise TypeError(f"rule: expected a StoppingRule, got {type(rule).__name__}")
    real = lambda v: isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
    count = lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    if rule.mass_mcse is not None and not (real(rule.mass_mcse) and 0 < rule.mass_mcse < 1):
        raise ValueError(f"rule.mass_mcse: expected None or a number in (0, 1), got {rule.mass_mcse!r}")
    if rule.log_evidence_mcse is not None and not (real(rule.log_evidence_mcse) and rule.log_evidence_mcse > 0):
        raise ValueError(f"rule.log_evidence_mcse: expected None or a positive finite number, got "
                         f"{rule.log_evidence_mcse!r}")
    if not (count(rule.max_chains_per_dataset) and rule.max_chains_per_dataset >= 2):
        raise ValueError(f"rule.max_chains_per_dataset: expected an integer >= 2, got {rule.max_chains_per_dataset!r}")
    if rule.max_particles is not None and not (count(rule.max_particles) and rule.max_particles >= 1):
        raise ValueError(f"rule.max_particles: expected None or a positive integer, got {rule.max_particles!r}")
    return rule


class RunAgreement(NamedTuple):
    """How well a point's independent SMC runs agree (:func:`run_agreement`), against the rule's targets.

    Attributes:
        converged: whether every error is at most its target and every data set rests on at least
            MIN_EFFECTIVE_RUNS effective runs.
        mass_mcse: {phase: the Monte Carlo error of its mass} of the rule's phases (empty without a mass target).
        log_evidence_mcse: the Monte Carlo error of log Z (nats, on the Z scale).
        runs_per_dataset: the fewest runs on a data set.
        runs_needed: the runs per data set that would meet the targets (the error falls as 1 / sqrt(runs)); None
            where an error is NaN; max_chains_per_dataset + 1 where one is infinite.
        particles: the particles of each run.
        worst_ratio: the largest error / target (at least 2 where a data set rests on one run; inf where an error is
            NaN or infinite).
        effective_runs: (K,) per data set 1 / sum_r w_r^2 of its runs' evidence weights.
        targets: the rule.
    """

    converged: bool
    mass_mcse: dict
    log_evidence_mcse: float
    runs_per_dataset: int
    runs_needed: int | None
    particles: int
    worst_ratio: float
    effective_runs: list
    targets: StoppingRule

    def converged_phases(self, phases) -> np.ndarray:
        """(P,) bool: whether each of ``phases`` met the mass target (its error finite and at most the target;
        every phase without a mass target)."""
        target = self.targets.mass_mcse
        met = lambda v: target is None or (np.isfinite(v) and v <= target)
        return np.array([bool(met(self.mass_mcse[nm])) for nm in phases], bool)

    def to_dataset(self, phases=None):
        """``converged``, ``runs_per_dataset`` (scalars) and, given the rule's ``phases``, ``converged_phase``
        (phase: :meth:`converged_phases`)."""
        import xarray as xr

        out = xr.Dataset({"converged": ((), bool(self.converged)),
                          "runs_per_dataset": ((), int(self.runs_per_dataset))})
        if phases is not None:
            out = out.assign(converged_phase=("phase", self.converged_phases(phases))).assign_coords(phase=list(phases))
        return out

    def to_dict(self) -> dict:
        """The agreement as plain values (``targets`` too), as a point's results hold it (``res["convergence"]``,
        which a checkpoint stores): :func:`stored_agreement` reads it back."""
        return {**self._asdict(), "targets": self.targets._asdict()}


def stored_agreement(res: dict) -> RunAgreement | None:
    """What :func:`until_runs_agree` put under a point's results' "convergence" (also as a checkpoint read it
    back), or None where the rule did not run."""
    c = res.get("convergence")
    return None if c is None else RunAgreement(**{**c, "targets": StoppingRule(**c["targets"])})


def run_agreement(rule: StoppingRule, res: dict, labels=None) -> RunAgreement:
    """How well a point's independent SMC runs agree: the Monte Carlo errors of its phase masses and of log Z
    (from the spread of the runs on each data set, pooled by their evidence) against the rule's targets, and the
    runs per data set that would meet them (the error falls as 1 / sqrt(runs)).

    Args:
        rule: the targets and bounds.
        res: the point's results (module docstring): ``log_evidence``, ``dataset``, ``flat``.
        labels: (codes (R, N) of every particle's phase, the phases' names), needed with ``rule.mass_mcse``.

    Returns:
        :class:`RunAgreement`.
    """
    from .masses import effective_runs, log_evidence_mcse, phase_masses

    rule = _checked(rule)
    mass_mcse = {}
    if rule.mass_mcse is not None:
        if labels is None:
            raise ValueError("labels: expected the particles' phase codes and names for rule.mass_mcse, got None")
        codes, names = labels
        pm = phase_masses(codes, names, res["dataset"], res["log_evidence"])
        mass_mcse = dict(zip(pm.names, (float(v) for v in pm.mcse_runs)))
    lz_mcse = log_evidence_mcse(res["log_evidence"], res["dataset"])
    ratios = [v / rule.mass_mcse for v in mass_mcse.values()]
    if rule.log_evidence_mcse is not None:
        ratios.append(lz_mcse / rule.log_evidence_mcse)
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
        needed = int(np.ceil(runs * worst**2)) if np.isfinite(worst) else rule.max_chains_per_dataset + 1
    return RunAgreement(bool(worst <= 1), mass_mcse, lz_mcse, runs, needed, int(np.shape(res["flat"])[1]),
                        float(worst), effective.tolist(), rule)


def agreement_warnings(a: RunAgreement, where: str) -> list[str]:
    """What makes a point's runs doubtful after the rule's rounds: a line naming the errors above their targets
    and why the rule could not grow the point further (an undefined error, a data set resting on one run, the
    bounds); none for a converged point.  where: the point, as the line begins."""
    if a.converged:
        return []
    t = a.targets
    over = [f"{nm} {v:.3g}" for (nm, v), met in zip(a.mass_mcse.items(), a.converged_phases(a.mass_mcse)) if not met]
    parts = [f"mass MC errors {', '.join(over)} > {t.mass_mcse}"] if over else []
    if t.log_evidence_mcse is not None and not a.log_evidence_mcse <= t.log_evidence_mcse:
        parts.append(f"log Z MC error {a.log_evidence_mcse:.3g} > {t.log_evidence_mcse}")
    if a.runs_needed is None:
        need = "errors undefined: a run's log Z or mass is not finite"
    elif min(a.effective_runs) < MIN_EFFECTIVE_RUNS:
        need = (f"one run carries a data set's evidence: {min(a.effective_runs):.2f} effective runs, fewer than "
                f"{MIN_EFFECTIVE_RUNS}")
    elif t.max_particles is not None:
        need = (f"errors {a.worst_ratio:.2g} x the targets; at most {t.max_particles} particles and "
                f"{t.max_chains_per_dataset} runs per data set in {MAX_ROUNDS} rounds")
    else:
        need = f"their spread asks for {a.runs_needed}; at most {t.max_chains_per_dataset}"
    return [f"{where}: NOT CONVERGED with {a.runs_per_dataset} runs of {a.particles} particles per data set "
            f"({need})" + (": " + "; ".join(parts) if parts else "")]


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


def replace_runs(first: dict, new: dict) -> dict:
    """A point's results replaced by runs with more particles, the program counters of both added and the first
    runs' gradients kept in ``grad_evals_replaced`` (they were spent too)."""
    out = dict(new)
    out["program_ticks"] = first["program_ticks"] + new["program_ticks"]
    out["program_chains"] = first["program_chains"] + new["program_chains"]
    out["grad_evals_replaced"] = float(np.sum(first["grad_evals"])) + float(first.get("grad_evals_replaced", 0.0))
    return out


def growth(agreement: RunAgreement, rule: StoppingRule) -> tuple[str, int, int] | None:
    """How a point whose runs disagree grows (module docstring): ("runs", k, N), k new runs of N particles
    per data set pooled with the first, or ("particles", R, N'), R new runs of N' particles replacing
    them.  Of the ways that meet the targets by their law (more runs within max_chains_per_dataset;
    more particles by the full factor 2^ceil(log2 r) within max_particles) the one that costs fewer
    gradients, more runs on a tie (their law is certain); where neither can, as far as the bounds allow,
    particles first (their law may be faster).  None when converged, at both bounds, or an error is
    NaN.

    Args:
        agreement: what :func:`run_agreement` says of the point's runs.
        rule: the targets and bounds.
    """
    rule, a = _checked(rule), agreement
    if a.converged or a.runs_needed is None:
        return None
    R, N = a.runs_per_dataset, a.particles
    added = min(max(a.runs_needed, R + 1), rule.max_chains_per_dataset) - R
    options = []                                         # (meets the targets, gradients per data set, growth)
    if added > 0:
        options.append((R + added >= a.runs_needed, added * N, ("runs", added, N)))
    if rule.max_particles is not None and N < rule.max_particles:
        r = a.worst_ratio
        factor = 2 ** max(1, int(np.ceil(np.log2(r)))) if np.isfinite(r) else np.inf
        particles = int(min(N * factor, rule.max_particles))
        options.append((particles == N * factor, R * particles, ("particles", R, particles)))
    meets = [o for o in options if o[0]]
    if meets:
        return min(meets, key=lambda o: (o[1], o[2][0] != "runs"))[2]
    return min(options, key=lambda o: o[2][0] != "particles")[2] if options else None


def until_runs_agree(points: list, sample: Callable, rule: StoppingRule, labels: Callable | None = None) -> list[dict]:
    """The points' results, growing a point whose runs disagree by :func:`growth` (more runs, pooled with the
    first, or new runs with more particles), in at most MAX_ROUNDS rounds; points grown alike share a call of
    ``sample``.  Each result gets under "convergence" what :func:`run_agreement` says of all its runs, as plain
    values (:meth:`RunAgreement.to_dict`; :func:`stored_agreement` reads it back).

    Args:
        points: the points, as ``sample`` takes them.
        sample: sample(points, round_, size) -> a result per point (module docstring); round_ 0 with size None:
            the first runs, as the points say; round_ k > 0 with size (runs, particles): that many new runs per
            data set of that many particles, with keys of their own.
        rule: the targets and bounds.
        labels: labels(point, result) -> (codes (R, N), phase names), the particles' phases; needed with
            ``rule.mass_mcse``.
    """
    rule = _checked(rule)
    if rule.mass_mcse is not None and labels is None:
        raise ValueError("labels: expected a function of (point, result) for rule.mass_mcse, got None")
    agree = lambda pt, res: run_agreement(rule, res, None if rule.mass_mcse is None else labels(pt, res))
    out = sample(points, 0, None)
    agreement = [agree(pt, res) for pt, res in zip(points, out)]
    for round_ in range(1, MAX_ROUNDS + 1):
        grow = {}
        for i, a in enumerate(agreement):
            g = growth(a, rule)
            if g is not None:
                grow.setdefault(g, []).append(i)
        if not grow:
            break
        for (how, runs, particles), idx in sorted(grow.items()):
            for i, res in zip(idx, sample([points[i] for i in idx], round_, (runs, particles))):
                out[i] = pool_runs(out[i], res) if how == "runs" else replace_runs(out[i], res)
                agreement[i] = agree(points[i], out[i])
    for res, a in zip(out, agreement):
        res["convergence"] = a.to_dict()
    return out
