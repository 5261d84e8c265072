"""Log evidence and free energies from SMC runs (docs/design.md), and the diagnostics of those runs.

    Z = int phi(w) exp(-n beta L_n(w)) dw,   F = -log Z,
    F_alpha = -log int_{U_alpha} phi exp(-n beta L_n) = F - log mass_alpha,

so mass_alpha = exp(F - F_alpha) and a Bayesian phase transition is where two phases' F_alpha cross
(DSLT3/DSLT4).  Watanabe's expansion restricted to a phase's region,
F_alpha = n beta L_n(w_alpha) + lambda_alpha log(n beta) + ..., gives each phase's learning
coefficient as the slope of F_alpha - n beta L_n(w_alpha) against log(n beta) at fixed data
(:func:`free_energy_slopes`).  Pure functions of arrays; errors across data sets and from
independent runs on one data set are kept apart (``*_se``, ``*_mcse``).  A sweep point's log Z and free
energies (:func:`point_evidence`) and its runs' diagnostics (:func:`smc_diagnostics`) are typed results, each
with its part of the point's Dataset (``to_dataset()``, ``slt_relu.posterior.point``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .learning_coefficient import LambdaEstimate, weighted_least_squares
from .masses import PhaseMasses, log_evidence_mcse, phase_masses

__all__ = ["FreeEnergies", "FreeEnergySlopes", "PhaseSlope", "PointEvidence", "SMCDiagnostics", "free_energies",
           "free_energy_slopes", "logmeanexp", "point_evidence", "smc_diagnostics", "smc_warnings",
           "thin_phase_warnings"]


def logmeanexp(values, axis=0):
    """log mean exp(values) along ``axis``, computed stably (the largest value factored out); float64.

    Args:
        values: array-like of log values.
        axis: the axis averaged over.

    Returns:
        log(mean(exp(values), axis)), the other axes kept.
    """
    values = np.asarray(values, np.float64)
    top = np.max(values, axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.mean(np.exp(values - top), axis=axis))


class FreeEnergies(NamedTuple):
    """Free energies of a point from SMC runs (docs/design.md): F = -log Z per data set, the log of the
    mean of its runs' Z (SMC's Z is unbiased, log Z is not); the local free energy of each phase
    F_alpha = F - log mass_alpha = -log mean_r Z_r mass_alpha,r with the runs pooled by their
    evidence (``analysis.run_weights``), so that mass_alpha = exp(F - F_alpha) (inf for a phase with
    no particle).  log_evidence, free_energy: (K,); phase_free_energy: (K, P); each *_mean with its
    standard error across data sets (*_se) and its Monte Carlo error from the runs (*_mcse);
    relative_mean, relative_se: (P,) F_alpha - F = -log mass_alpha of the mean mass over data sets,
    its error by the delta method, se(mass) / mass (the data sets' own n L_n cancels in the
    difference, so its error bar is much smaller than F_alpha's)."""

    names: tuple
    log_evidence: np.ndarray
    free_energy: np.ndarray
    phase_free_energy: np.ndarray
    free_energy_mean: float
    free_energy_se: float
    free_energy_mcse: float
    phase_free_energy_mean: np.ndarray
    phase_free_energy_se: np.ndarray
    phase_free_energy_mcse: np.ndarray
    relative_mean: np.ndarray
    relative_se: np.ndarray

    def to_dataset(self, dim: str = "phase", prefix: str = ""):
        """The free energies as a Dataset along ``dim`` (coordinate: ``names``), each variable's name led by
        ``prefix``: ``free_energy_total``, ``free_energy_total_se``, ``free_energy_total_mcse`` (scalars: F's
        mean over data sets and its errors), ``free_energy``, ``free_energy_se``, ``free_energy_mcse``,
        ``relative_free_energy``, ``relative_free_energy_se`` (dim), ``free_energy_per_trial`` (dataset, dim)."""
        import xarray as xr

        fields = {"free_energy_total": ((), self.free_energy_mean), "free_energy_total_se": ((), self.free_energy_se),
                  "free_energy_total_mcse": ((), self.free_energy_mcse),
                  "free_energy": (dim, self.phase_free_energy_mean), "free_energy_se": (dim, self.phase_free_energy_se),
                  "free_energy_mcse": (dim, self.phase_free_energy_mcse),
                  "relative_free_energy": (dim, self.relative_mean), "relative_free_energy_se": (dim, self.relative_se),
                  "free_energy_per_trial": (("dataset", dim), self.phase_free_energy)}
        return xr.Dataset({prefix + name: (dims, np.asarray(v, np.float64)) for name, (dims, v) in fields.items()},
                          coords={dim: list(self.names)})


def free_energies(log_z, dataset, masses: PhaseMasses) -> FreeEnergies:
    """F and F_alpha of a point from each run's log evidence log_z (C,) on data set dataset (C,)
    and the masses of its phases (``phase_masses`` with the same log_z: per run in
    ``masses.per_chain``, pooled by evidence in ``masses.per_dataset``).  Monte Carlo errors on the Z
    scale (``analysis.log_evidence_mcse``: of log mean_r Z_r, and of log mean_r Z_r mass_alpha,r)."""
    log_z, dataset = np.asarray(log_z, np.float64), np.asarray(dataset)
    groups = np.unique(dataset)
    K = len(groups)
    lz = np.array([logmeanexp(log_z[dataset == g]) for g in groups])
    F = -lz
    with np.errstate(divide="ignore"):
        Fa = F[:, None] - np.log(masses.per_dataset)
        per_run = -log_z[:, None] - np.log(masses.per_chain)
    se = lambda v: float(np.std(v, ddof=1) / np.sqrt(K)) if K > 1 else float("nan")
    with np.errstate(invalid="ignore"):                # a phase without particles: F_alpha = inf, its errors NaN
        fa_mean = Fa.mean(0)
        fa_se = Fa.std(0, ddof=1) / np.sqrt(K) if K > 1 else np.full(Fa.shape[1], np.nan)
        fa_mcse = np.array([log_evidence_mcse(-per_run[:, k], dataset) for k in range(per_run.shape[1])])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel, rel_se = -np.log(masses.mass), masses.se / masses.mass
    return FreeEnergies(masses.names, lz, F, Fa, float(F.mean()), se(F), log_evidence_mcse(log_z, dataset),
                        fa_mean, fa_se, fa_mcse, rel, rel_se)


class SMCDiagnostics(NamedTuple):
    """Diagnostics of one sweep point's C independent SMC runs.

    Attributes:
        stages: (C,) the stages each run took.
        ess_min: the smallest ESS fraction of a stage's weights over the runs' stages (NaN: non-finite potentials).
        accept_prob_mean: the mean HMC acceptance over the runs' stages.
        accept_prob_min: the smallest HMC acceptance of a stage.
        final_lambda_min: the smallest final lambda (1 unless max_stages ran out).
        grad_evals: the runs' gradient evaluations, those of runs the stopping rule replaced included.
        symmetry_accept_mean: the mean acceptance of the symmetry proposals (``slt_relu.moves``) over the runs'
            stages; None without them.
        grad_evals_replaced: the gradient evaluations of runs the stopping rule replaced by runs with more
            particles (``slt_relu.posterior.stopping``); None when it replaced none.
    """

    stages: np.ndarray
    ess_min: float
    accept_prob_mean: float
    accept_prob_min: float
    final_lambda_min: float
    grad_evals: int
    symmetry_accept_mean: float | None = None
    grad_evals_replaced: int | None = None

    def to_dataset(self):
        """The diagnostics as a Dataset: ``stages`` along ``run``, a scalar variable per other attribute that is
        not None."""
        import xarray as xr

        return xr.Dataset({name: (("run",) if name == "stages" else (), np.asarray(v))
                           for name, v in self._asdict().items() if v is not None})


def smc_diagnostics(info, grad_evals, grad_evals_replaced: float | None = None) -> SMCDiagnostics:
    """A point's SMC runs: stages, the smallest ESS fraction and acceptance over their stages, the
    final lambda (1 unless max_stages ran out), gradient evaluations, and where they ran the mean
    acceptance of the symmetry proposals (``slt_relu.moves``) over the runs' stages.

    Args:
        info: the runs' statistics (``Draws.info``, a :class:`~slt_relu.sampling.smc.SMCInfo`).
        grad_evals: (C,) each run's gradient evaluations.
        grad_evals_replaced: the gradient evaluations of runs the stopping rule replaced (their results'
            ``grad_evals_replaced``), or None.

    Returns:
        :class:`SMCDiagnostics`.
    """
    stages = np.asarray(info.num_stages)
    used = np.arange(np.asarray(info.ess).shape[1])[None, :] < stages[:, None]
    ess = np.where(used, info.ess, np.inf)
    acc = np.where(used, info.accept_prob, np.nan)
    replaced = None if grad_evals_replaced is None else int(grad_evals_replaced)
    symmetry = None if info.symmetry_accept is None else float(np.nanmean(np.where(used, info.symmetry_accept, np.nan)))
    return SMCDiagnostics(stages, float(ess.min()), float(np.nanmean(acc)), float(np.nanmin(acc)),
                          float(np.min(info.final_lambda)), int(np.sum(grad_evals)) + (replaced or 0), symmetry,
                          replaced)


def smc_warnings(d: SMCDiagnostics, where: str, masses: PhaseMasses, num_particles: int, log_z, dataset,
                 target_ess: float) -> list[str]:
    """What makes a point's SMC numbers doubtful: a stage whose ESS collapsed, moves that barely
    move, a run that did not reach lambda = 1 (the adaptive schedule holds every stage's ESS at
    the target, so a collapse, e.g. particles whose potential is NaN and lose all weight at any
    step, shows as the schedule stalling at max_stages; tests/test_evidence.py), a phase whose
    mass in a run rests on fewer than 20 particles, runs on one data set whose masses differ
    beyond the particles' binomial error, and runs whose log evidences differ by more than one nat."""
    out = []
    if np.isnan(d.ess_min):
        out.append(f"{where}: ESS of a stage's weights is NaN: undefined (non-finite potentials)")
    elif d.ess_min < target_ess / 2:
        out.append(f"{where}: ESS collapsed to {d.ess_min:.2f} of the particles at a stage (target {target_ess})")
    if d.accept_prob_min < 0.2:
        out.append(f"{where}: HMC acceptance fell to {d.accept_prob_min:.2f} at a stage: the moves barely move")
    if d.final_lambda_min < 1.0:
        out.append(f"{where}: a run stopped at lambda = {d.final_lambda_min:.3g} < 1 (max_stages too small)")
    out += thin_phase_warnings(masses, num_particles, where)
    dataset = np.asarray(dataset)
    for g in np.unique(dataset):
        runs = masses.per_chain[dataset == g]
        if len(runs) < 2:
            continue
        m = runs.mean(0)
        binom = np.sqrt(np.maximum(m * (1 - m), 1.0 / num_particles) / num_particles)
        spread = runs.std(0, ddof=1)
        bad = [nm for k, nm in enumerate(masses.names) if spread[k] > 3 * binom[k]]
        if bad:
            out.append(f"{where}: runs on data set {int(g)} disagree on {', '.join(bad)} beyond 3 binomial errors "
                       "of their particles (resampling correlates particles: trust mass_mcse, not N)")
        lz = np.asarray(log_z)[dataset == g]
        if np.ptp(lz) > 1.0:
            out.append(f"{where}: runs on data set {int(g)} differ by {np.ptp(lz):.2f} nats in log evidence")
    return out


def thin_phase_warnings(masses: PhaseMasses, counted: int, where: str, what: str = "") -> list[str]:
    """A warning naming the phases whose mass in some run rests on fewer than 20 of the ``counted``
    particles it was measured on (all of a run's particles, or the every-k-th that
    classify_phase labels): such a mass has a relative error of 1/sqrt(count) > 0.2 at best."""
    counts = np.rint(masses.per_chain * counted)
    thin = [nm for k, nm in enumerate(masses.names) if np.any((counts[:, k] > 0) & (counts[:, k] < 20))]
    if not thin:
        return []
    return [f"{where}: the {what + ' ' if what else ''}mass of {', '.join(thin)} rests on fewer than 20 of the "
            f"{counted} particles it is measured on in a run"]


class PhaseSlope(NamedTuple):
    """A phase's slope reading (the ``details`` of each estimate of :func:`free_energy_slopes`).

    Attributes:
        per_dataset: (K,) the slope of G = F_alpha - n beta L_min against log(n beta) on each data set.
    """

    per_dataset: np.ndarray


class FreeEnergySlopes(NamedTuple):
    """Each phase's lambda from its local free energy along n beta (:func:`free_energy_slopes`).

    Attributes:
        lambdas: one :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate` per phase (P), in the order of
            the phases' axis.
        excess: (B, K, P) G = F_alpha - n beta L_min at each n beta, data set and phase.
    """

    lambdas: tuple
    excess: np.ndarray


def free_energy_slopes(n_beta, phase_free_energy, min_loss) -> FreeEnergySlopes:
    """lambda_alpha from the growth of a phase's local free energy with n beta at fixed data:

        F_alpha(n beta) = n beta L_n(w_alpha) + lambda_alpha log(n beta) + O_p(log log n beta),

    w_alpha the minimum of L_n in the phase (DSLT3; Watanabe's free energy expansion restricted to
    the phase's region).  Per data set and phase, the least-squares slope of G = F_alpha - n beta L_min
    against log(n beta) (``learning_coefficient.weighted_least_squares``, unit weights); lambda_alpha is its mean
    over the data sets, with their standard error.  L_min, the smallest L_n among the phase's particles on a data
    set (its minimum over the B temperatures), stands in for L_n(w_alpha); it lies above it, which adds a term
    linear in n beta to G and biases the slope upward where a phase has few particles at the largest n beta.

    Args:
        n_beta: (B,) the temperatures, the data sets fixed.
        phase_free_energy: (B, K, P) F_alpha at each n beta, data set and phase (a non-finite value makes that data
            set's slope, and so the phase's lambda, NaN).
        min_loss: (B, K, P) the smallest L_n among the phase's particles.

    Returns:
        :class:`FreeEnergySlopes`: per phase a :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`
        (lambda_alpha, its standard error across data sets (NaN for one), m None, method
        "phase_free_energy_slope", window (the smallest n beta, the largest), details :class:`PhaseSlope`), and G.

    References:
        Watanabe 2009 (the free energy's expansion); Carroll 2021, "Phase transitions in neural networks" (DSLT4: phases
        and their local free energies).
    """
    n_betas = np.asarray(n_beta, np.float64)
    F = np.asarray(phase_free_energy, np.float64)
    L = np.min(np.asarray(min_loss, np.float64), axis=0)                    # (K, P)
    G = F - n_betas[:, None, None] * L[None]
    B, K, P = G.shape
    X = np.stack([np.ones(B), np.log(n_betas)], 1)
    slopes = weighted_least_squares(X, G.reshape(B, K * P)).coef[1].reshape(K, P)
    window = (float(n_betas.min()), float(n_betas.max()))
    reason = "not read: the slope against log(n beta) leaves out the (m - 1) log log(n beta) term"
    lambdas = []
    for p in range(P):
        se = float(np.std(slopes[:, p], ddof=1) / np.sqrt(K)) if K > 1 else float("nan")
        lambdas.append(LambdaEstimate(float(np.mean(slopes[:, p])), se, None, reason, "phase_free_energy_slope", window,
                                      (), PhaseSlope(slopes[:, p])))
    return FreeEnergySlopes(tuple(lambdas), G)


class PointEvidence(NamedTuple):
    """One sweep point's log evidence and free energies from its C independent SMC runs on K data sets.

    Attributes:
        log_evidence: the mean over data sets of log Zbar_k, Zbar_k = mean_r Z_r of the runs on data set k.
        log_evidence_se: its standard error across data sets (NaN with one data set).
        log_evidence_mcse: its Monte Carlo error from the runs (:func:`~slt_relu.posterior.masses.log_evidence_mcse`).
        log_evidence_per_trial: (K,) log Zbar_k.
        log_evidence_per_run: (C,) each run's log Z.
        dataset_per_run: (C,) each run's data set.
        free_energy: :class:`FreeEnergies` of the phase rule's phases (every run, pooled by evidence), or None.
        classify_free_energy: :class:`FreeEnergies` of classify_phase's labels, or None.
        min_loss_per_trial: (K, P) the smallest L_n of each rule phase's particles on each data set (inf where it
            has none; for :func:`free_energy_slopes`), or None without a rule.
    """

    log_evidence: float
    log_evidence_se: float
    log_evidence_mcse: float
    log_evidence_per_trial: np.ndarray
    log_evidence_per_run: np.ndarray
    dataset_per_run: np.ndarray
    free_energy: FreeEnergies | None = None
    classify_free_energy: FreeEnergies | None = None
    min_loss_per_trial: np.ndarray | None = None

    def to_dataset(self):
        """The point's evidence as a Dataset: ``log_evidence``, ``log_evidence_se``, ``log_evidence_mcse``,
        ``num_runs`` (scalars), ``log_evidence_per_trial`` (dataset), ``log_evidence_per_run`` and
        ``dataset_per_run`` (run); the rule's free energies (:meth:`FreeEnergies.to_dataset` along ``phase``),
        classify_phase's (along ``label``, each name led by ``classify_``) and ``min_loss_per_trial``
        (dataset, phase) where the point has them."""
        import xarray as xr

        f64 = lambda v: np.asarray(v, np.float64)
        parts = [xr.Dataset({"log_evidence": ((), self.log_evidence), "log_evidence_se": ((), self.log_evidence_se),
                             "log_evidence_mcse": ((), self.log_evidence_mcse),
                             "log_evidence_per_trial": ("dataset", f64(self.log_evidence_per_trial)),
                             "log_evidence_per_run": ("run", f64(self.log_evidence_per_run)),
                             "dataset_per_run": ("run", f64(self.dataset_per_run)),
                             "num_runs": ((), len(self.log_evidence_per_run))})]
        if self.free_energy is not None:
            parts.append(self.free_energy.to_dataset("phase"))
        if self.classify_free_energy is not None:
            parts.append(self.classify_free_energy.to_dataset("label", "classify_"))
        if self.min_loss_per_trial is not None:
            parts.append(xr.Dataset({"min_loss_per_trial": (("dataset", "phase"), f64(self.min_loss_per_trial))},
                                    coords={"phase": list(self.free_energy.names)}))
        return xr.merge(parts, join="exact", combine_attrs="drop")


def point_evidence(log_z, dataset, loss, rule=None, classified=None) -> PointEvidence:
    """A sweep point's log Z and free energies from its independent SMC runs.

    Args:
        log_z: (C,) each run's log evidence.
        dataset: (C,) each run's data set.
        loss: (C, N) L_n of each particle.
        rule: (codes (C, N), names) of a phase rule (DSLT4's), or None.
        classified: (C, N') classify_phase labels of the particles (every k-th), or None.

    Returns:
        :class:`PointEvidence`: log Z with its errors, the free energies of the rule's phases and of the labels
        (:func:`free_energies`, each run's masses from :func:`~slt_relu.posterior.masses.phase_masses` pooled by
        evidence), per data set the smallest L_n of each rule phase's particles.
    """
    log_z, ds = np.asarray(log_z), np.asarray(dataset)
    groups = np.unique(ds)
    K = len(groups)
    lz = np.array([logmeanexp(np.asarray(log_z, np.float64)[ds == g]) for g in groups])
    se = float(np.std(-lz, ddof=1) / np.sqrt(K)) if K > 1 else float("nan")
    fe = lambda codes, names: free_energies(log_z, ds, phase_masses(codes, names, ds, log_z))
    min_loss = None
    if rule is not None:
        codes, names = rule
        loss = np.asarray(loss, np.float64)
        min_loss = np.array([[np.min(loss[ds == g][codes[ds == g] == k], initial=np.inf) for k in range(len(names))]
                             for g in groups])
    return PointEvidence(float(np.mean(lz)), se, log_evidence_mcse(log_z, ds), lz, log_z, ds,
                         None if rule is None else fe(*rule), None if classified is None else fe(classified, None),
                         min_loss)
