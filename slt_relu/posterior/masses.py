"""Phase masses and their analysis: per data set, per sweep point, across a sweep (DSLT4).

Pure functions of arrays (labels, losses, sampler statistics): testable without running a
sampler, and shared by every sampler's output.

* :func:`phase_masses`: masses of labelled phases, their spread across data sets (``se``,
  DSLT4's error bars across trials) and their Monte Carlo error within data sets (``mcse``);
  independent SMC runs on one data set pooled by their evidence (:func:`run_weights`, the island
  estimator), with the Monte Carlo errors of such pools (:func:`runs_mcse`,
  :func:`log_evidence_mcse`);
* :func:`trial_filter`: DSLT4's filter on trials' mean L_n;
* :func:`crossover`, :func:`crossover_bootstrap`: where two phases' masses cross along a sweep
  axis, with a bootstrap error over trials;
* :func:`chain_diagnostics` (:class:`ChainDiagnostics`), :func:`sampler_warnings`: R-hat, ESS, divergences
  and tree depths of a point's chains, within data sets (never pooled), and what of them deserves a warning.

A sweep point's masses by labelling, trial filter and cross-table are ``slt_relu.posterior.point``; log
evidences, free energies and SMC runs' diagnostics ``slt_relu.posterior.evidence``.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .. import diagnostics as dg

__all__ = ["ChainDiagnostics", "Crossover", "PhaseMasses", "chain_diagnostics", "crossover", "crossover_bootstrap",
           "effective_runs", "log_evidence_mcse", "phase_masses", "pool_weights", "run_weights", "runs_mcse",
           "sampler_warnings", "trial_filter"]

class PhaseMasses(NamedTuple):
    """Posterior mass of each phase.

    names: the P phase names; mass: (P,) the mean over data sets of each data set's mass (each
    data set's chains pooled: with equal weights, or for SMC runs by their evidence,
    :func:`run_weights`); se: (P,) standard error of that mean across data sets (std / sqrt(K),
    DSLT4's error bars across trials; NaN with one data set); mcse: (P,) Monte Carlo standard
    error within data sets, sqrt(p (1 - p) / ESS) of the phase indicator, combined over data sets
    (it trusts each chain's mixing); mcse_runs: (P,) the Monte Carlo standard error from the
    spread of independent chains or runs on the same data set (:func:`runs_mcse`, combined over
    data sets; NaN unless every data set has at least two; the error bar of SMC masses, and the
    honest one for chains that may not mix); per_dataset: (K, P); per_chain: (C, P).
    """

    names: tuple
    mass: np.ndarray
    se: np.ndarray
    mcse: np.ndarray
    mcse_runs: np.ndarray
    per_dataset: np.ndarray
    per_chain: np.ndarray

    def as_dict(self) -> dict:
        return {name: float(m) for name, m in zip(self.names, self.mass)}


def phase_masses(labels, names: Sequence | None = None, dataset=None, log_evidence=None) -> PhaseMasses:
    """Masses of the phases in labels, per data set and their mean over data sets.

        m_k(alpha) = sum_c w_c (1/S) sum_s [label_{c,s} = alpha]   (c the chains of data set k),
        mass(alpha) = (1/K) sum_k m_k(alpha),

    with w_c = 1 / (chains of data set k), or for independent SMC runs their evidence weights
    (:func:`run_weights`, the island estimator).

    Args:
        labels: (C, S) per-draw phase labels, an array or nested lists: ints indexing ``names``, or hashable
            labels such as strings or PhaseLabels (then names default to the sorted distinct labels), e.g.
            :func:`~slt_relu.classify_phase`'s ``label`` of draws (C, S) as it is.
        names: the P phase names, or None.
        dataset: (C,) data set of each chain (default: each chain its own).
        log_evidence: (C,) each chain's log Z when the chains are independent SMC runs (their
            particles equally weighted); a data set with a NaN or +inf log Z has NaN masses (so has
            the mean over data sets).

    Returns:
        :class:`PhaseMasses`: names, mass, se, mcse, mcse_runs, per_dataset (K, P), per_chain (C, P).

    References:
        DSLT4: phase masses with error bars across trials.
    """
    labels = _label_array(labels) if names is None else np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels: expected shape (chains, draws), got {labels.shape}")
    C, S = labels.shape
    if names is None:
        names = sorted({v for v in labels.reshape(-1)}, key=str)
        codes = np.vectorize({v: k for k, v in enumerate(names)}.get, otypes=[int])(labels)
    else:
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels: with names given, expected integer codes, got dtype {labels.dtype}")
        codes = labels
        if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
            raise ValueError(f"labels: expected codes in [0, {len(names)}), got {codes.min()}..{codes.max()}")
    dataset = np.arange(C) if dataset is None else np.asarray(dataset)
    if dataset.shape != (C,):
        raise ValueError(f"dataset: expected shape ({C},), got {dataset.shape}")
    weights = pool_weights(dataset, log_evidence)
    P = len(names)
    onehot = codes[..., None] == np.arange(P)
    per_chain = onehot.mean(1)
    groups = np.unique(dataset)
    per_dataset = np.array([weights[dataset == g] @ per_chain[dataset == g] for g in groups])
    K = len(groups)
    mass = per_dataset.mean(0)
    se = per_dataset.std(0, ddof=1) / np.sqrt(K) if K > 1 else np.full(P, np.nan)
    var = np.zeros(P)
    for gi, g in enumerate(groups):
        ind = onehot[dataset == g]
        for p in range(P):
            m = per_dataset[gi, p]
            if 0 < m < 1 and S >= 4:
                var[p] += m * (1 - m) / dg.ess(ind[..., p].astype(float))
    mcse = np.sqrt(var) / K
    return PhaseMasses(tuple(str(nm) for nm in names), mass, se, mcse, runs_mcse(per_chain, dataset, weights),
                       per_dataset, per_chain)


def _label_array(labels) -> np.ndarray:
    """labels as an object array: an array as it is, nested lists by their nesting (a label that is a tuple, such
    as a PhaseLabel, stays one entry)."""
    if isinstance(labels, np.ndarray):
        return labels.astype(object)
    shape, level = [], labels
    while isinstance(level, list):
        shape.append(len(level))
        level = level[0] if level else None
    out = np.empty(int(np.prod(shape)), object)

    def flat(x):
        return [v for item in x for v in flat(item)] if isinstance(x, list) else [x]
    for i, v in enumerate(flat(labels)):
        out[i] = v
    return out.reshape(shape)


def pool_weights(dataset, log_evidence=None) -> np.ndarray:
    """Each chain's weight in its data set's pool (C,): 1 / R_k (chains, or runs pooled plainly), or with
    the runs' log Z (C,) :func:`run_weights`."""
    dataset = np.asarray(dataset)
    if log_evidence is not None:
        return run_weights(log_evidence, dataset)
    return 1.0 / np.array([np.sum(dataset == d) for d in dataset])


def run_weights(log_evidence, dataset) -> np.ndarray:
    """Each independent SMC run's share of its data set's evidence, w_r = Z_r / sum_r' Z_r' over the
    runs r' on the same data set (C,) from their log Z (C,); NaN for a data set with a NaN or +inf
    log Z or with every log Z = -inf (a run with Z = 0, log Z = -inf, has weight 0).

    The island estimator: each run's Z_r pi_r (its evidence times its particles' measure) is an
    unbiased estimate of the unnormalised posterior, so sum_r w_r E_r[g] = sum_r Z_r E_r[g] / sum_r Z_r
    is a consistent estimate of E[g] as the runs grow, and so is log(mean_r Z_r) of log Z.  The
    equal-weight mean of the runs' E_r[g] is not, when a mode that holds much of Z is found by few
    runs: those runs have the larger Z, and equal weights count them as one run among many."""
    log_evidence, dataset = np.asarray(log_evidence, np.float64), np.asarray(dataset)
    if log_evidence.shape != dataset.shape or log_evidence.ndim != 1:
        raise ValueError(f"log_evidence: expected shape {dataset.shape} (one per run), got {log_evidence.shape}")
    out = np.full(log_evidence.shape, np.nan)
    for g in np.unique(dataset):
        lz = log_evidence[dataset == g]
        if np.all(np.isfinite(lz) | (lz == -np.inf)) and np.any(np.isfinite(lz)):
            w = np.exp(lz - lz.max())
            out[dataset == g] = w / w.sum()
    return out


def runs_mcse(per_run, dataset, weights=None) -> np.ndarray:
    """Monte Carlo standard error of the mean over data sets of each data set's pooled per_run (R, ...)
    values from independent runs, sqrt(sum_k var_k) / K over the K data sets (NaN unless every data set
    has two runs or more): var_k the delete-one-run jackknife of data set k's pool,

        var_k = (R_k - 1) / R_k sum_r (xbar_-r - mean_r' xbar_-r')^2,
        xbar_-r = sum_{r' != r} w_r' x_r' / sum_{r' != r} w_r',

    the pool without run r.  Equal weights: var_k = sd_k^2 / R_k exactly.  With weights (C,) summing to 1
    on each data set (:func:`run_weights`) the pool is a ratio of means sum_r Z_r x_r / sum_r Z_r, whose
    linearised (delta-method) error R / (R - 1) sum_r w_r^2 (x_r - xbar)^2 understates at few runs; the
    jackknife does not in expectation (Efron and Stein 1981, Ann. Statist. 9: E[var_k] >= the variance of
    the pool of R_k - 1 runs), and when one run carries the evidence the pool without it moves far, so
    the error is large where the delta method's vanishes.  Measured on 64 runs per data set of DSLT4 PT1
    (docs/notes.md): with 4 runs the delta method claims 0.86 of the actual spread (root mean square),
    the jackknife 0.96-0.97 (1.00-1.01 with 8-12 runs).  A data set whose evidence is all in one run (the
    others' Z = 0) has an infinite error: the pool without that run is undefined; NaN in, NaN out."""
    per_run, dataset = np.asarray(per_run, np.float64), np.asarray(dataset)
    groups = np.unique(dataset)
    if any(np.sum(dataset == g) < 2 for g in groups):
        return np.full(per_run.shape[1:], np.nan)
    w = np.asarray(pool_weights(dataset) if weights is None else weights, np.float64)
    var = 0.0
    for g in groups:
        x, wg = per_run[dataset == g].reshape(np.sum(dataset == g), -1), w[dataset == g]
        others = 1.0 - np.eye(len(wg))                      # row r: every run but r
        rest = others @ wg                                  # (R,) the other runs' weight
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = (others * wg) @ x / rest[:, None]         # (R, ...) the pools without each run
        v = _jackknife_var(loo)
        if np.any(rest == 0) and np.all(np.isfinite(wg)) and np.all(np.isfinite(x)):
            v = np.full_like(v, np.inf)                     # one run holds all the evidence
        var = var + v
    return (np.sqrt(var) / len(groups)).reshape(per_run.shape[1:])


def _jackknife_var(loo) -> np.ndarray:
    """(R - 1) / R sum_r (theta_-r - mean theta_-r)^2 of the delete-one estimates loo (R, ...)."""
    R = loo.shape[0]
    return (R - 1) / R * np.sum((loo - loo.mean(0)) ** 2, 0)


def log_evidence_mcse(log_evidence, dataset) -> float:
    """Monte Carlo standard error of the mean over the K data sets of log Zbar_k, Zbar_k = mean_r Z_r of
    the independent runs on data set k (C,) each: the relative error of a mean on the Z scale,
    se(Zbar_k) / Zbar_k = sqrt(R_k / (R_k - 1) sum_r (w_r - 1 / R_k)^2) with w = :func:`run_weights`,
    combined as sqrt(sum_k se_k^2) / K.  About sd(log Z_r) / sqrt(R) when the runs agree; when one run
    carries most of Z (a mode the others missed) it approaches 1 nat, whatever the spread of log Z
    (the delta method on the log of a mean; with 4 runs of DSLT4 PT1 it claims 0.94 of the actual
    spread, root mean square, docs/notes.md; the jackknife of log Zbar would be unbounded where every
    run but one has Z = 0, as a phase's Z_alpha = Z mass_alpha is in a run without its particles).
    NaN unless every data set has two runs, or where :func:`run_weights` is NaN."""
    dataset = np.asarray(dataset)
    w = run_weights(log_evidence, dataset)
    groups = np.unique(dataset)
    if any(np.sum(dataset == g) < 2 for g in groups):
        return float("nan")
    var = 0.0
    for g in groups:
        wg = w[dataset == g]
        R = len(wg)
        var += R / (R - 1) * np.sum((wg - 1.0 / R) ** 2)
    return float(np.sqrt(var) / len(groups))


def effective_runs(log_evidence, dataset) -> np.ndarray:
    """(K,) per data set the effective number of runs of its evidence-weighted pool, 1 / sum_r w_r^2
    (:func:`run_weights`): R_k when the runs' Z agree, 1 when one run carries all of it."""
    dataset = np.asarray(dataset)
    w = run_weights(log_evidence, dataset)
    return np.array([1.0 / np.sum(w[dataset == g] ** 2) for g in np.unique(dataset)])


def trial_filter(mean_loss, z: float = 1.5) -> np.ndarray:
    """DSLT4's trial filter: keep trials whose mean L_n has |z-score| <= z across trials.

    mean_loss: (T,) each trial's posterior mean of L_n.  z-scores use the population standard
    deviation (numpy's and scipy's default); with T trials no |z| can exceed sqrt(T - 1), which
    one trial far from all the others reaches: with 4 trials (bound 1.73) the filter at 1.5
    removes only such a lone outlier, with 3 (bound 1.41) none.  Returns a (T,) bool mask of the
    trials kept.
    """
    v = np.asarray(mean_loss, np.float64)
    sd = v.std()
    if v.size < 2 or sd == 0:
        return np.ones(v.shape, bool)
    return np.abs(v - v.mean()) / sd <= z


def crossover(xs, a, b) -> float:
    """The first x where a(x) - b(x) changes sign, by linear interpolation (NaN if never)."""
    xs, diff = np.asarray(xs, np.float64), np.asarray(a, np.float64) - np.asarray(b, np.float64)
    for i in range(len(xs) - 1):
        if diff[i] == 0:
            return float(xs[i])
        if diff[i] * diff[i + 1] < 0:
            return float(xs[i] + (xs[i + 1] - xs[i]) * diff[i] / (diff[i] - diff[i + 1]))
    return float(xs[-1]) if len(diff) and diff[-1] == 0 else float("nan")


class Crossover(NamedTuple):
    """A crossover of two phase masses along a sweep axis, with its bootstrap error.

    Attributes:
        x: the crossover of the mean masses (NaN where they do not cross).
        se: the standard deviation of the bootstrap replicates' crossovers (NaN with fewer than two).
        bootstrap_fraction: the fraction of replicates that cross.
    """

    x: float
    se: float
    bootstrap_fraction: float


def crossover_bootstrap(xs, trials_a, trials_b, rng: np.random.Generator, n_boot: int = 2000) -> Crossover:
    """Crossover of two phase masses with a bootstrap standard error over trials.

    Each bootstrap replicate resamples the trials of every x with replacement.

    Args:
        xs: (X,) the sweep axis's values.
        trials_a: per x, the per-trial masses of the first phase (a list of arrays).
        trials_b: the same of the second (the same trials).
        rng: a NumPy generator (the replicates' draws).
        n_boot: bootstrap replicates.

    Returns:
        :class:`Crossover` (crossover of the means, std of the replicates, fraction of replicates with a crossover).
    """
    xs = np.asarray(xs, np.float64)
    ta = [np.asarray(t, np.float64) for t in trials_a]
    tb = [np.asarray(t, np.float64) for t in trials_b]
    point = crossover(xs, [t.mean() for t in ta], [t.mean() for t in tb])
    reps = []
    for _ in range(n_boot):
        idx = [rng.integers(0, len(t), len(t)) for t in ta]
        reps.append(crossover(xs, [t[i].mean() for t, i in zip(ta, idx)], [t[i].mean() for t, i in zip(tb, idx)]))
    reps = np.asarray(reps)
    ok = np.isfinite(reps)
    se = float(reps[ok].std(ddof=1)) if ok.sum() > 1 else float("nan")
    return Crossover(point, se, float(ok.mean()))


# ----------------------------------------------------------------------------------------
# a posterior sweep point's MCMC chains


class ChainDiagnostics(NamedTuple):
    """Diagnostics of one sweep point's MCMC chains (C chains on K data sets), each computed within every data
    set (chains on different data sets sample different posteriors) and reported for the worst data set
    (``slt_relu.diagnostics.grouped``); NaN where undefined (a NaN draw, a constant L_n).

    Attributes:
        rhat_loss: the largest split R-hat of L_n.
        ess_bulk_loss: the smallest bulk ESS of L_n.
        ess_tail_loss: the smallest tail ESS of L_n.
        rhat_coordinates_max: the largest split R-hat of any free coordinate.
        rhat_nested_loss: the largest nested R-hat of L_n (every chain its own start); None unless every data
            set has at least two chains.
        divergences: divergent transitions after warm-up, over all chains; None without sampler statistics.
        warmup_divergences: divergent transitions during warm-up; None without sampler statistics.
        accept_prob_mean: the mean acceptance probability over all draws; None without sampler statistics.
        symmetry_accept_mean: the mean acceptance of the symmetry proposals (``slt_relu.moves``); None without
            them.
        step_size: (C,) each chain's adapted step size; None without sampler statistics.
        steps_per_draw_mean: the mean leapfrog steps per draw; None without sampler statistics.
        max_tree_depth_fraction: the fraction of draws whose trajectory took 2^max_tree_depth - 1 steps (0 without
            a tree depth, HMC); None without sampler statistics.
        grad_evals: the chains' gradient evaluations, warm-up included.
    """

    rhat_loss: float
    ess_bulk_loss: float
    ess_tail_loss: float
    rhat_coordinates_max: float
    rhat_nested_loss: float | None
    divergences: int | None
    warmup_divergences: int | None
    accept_prob_mean: float | None
    symmetry_accept_mean: float | None
    step_size: np.ndarray | None
    steps_per_draw_mean: float | None
    max_tree_depth_fraction: float | None
    grad_evals: int

    def to_dataset(self):
        """The diagnostics as a Dataset: a scalar variable per attribute that is not None, ``step_size`` along
        ``run`` (each chain)."""
        import xarray as xr

        return xr.Dataset({name: (("run",) if name == "step_size" else (), np.asarray(v))
                           for name, v in self._asdict().items() if v is not None})


def chain_diagnostics(loss, dataset, coordinates, info, grad_evals, max_steps: int | None = None) -> ChainDiagnostics:
    """Diagnostics of one point's chains, computed within each data set and reported for the worst.

    Args:
        loss: (C, S) L_n of each draw.
        dataset: (C,) each chain's data set.
        coordinates: (C, S, k) the free coordinates of each draw.
        info: the MCMC sampler's statistics (``Draws.info``: a :class:`~slt_relu.sampling.nuts.NUTSInfo` or
            :class:`~slt_relu.sampling.lockstep.HMCInfo`), or None.
        grad_evals: (C,) each chain's gradient evaluations.
        max_steps: NUTS's 2^max_tree_depth - 1 (None: no tree depth).

    Returns:
        :class:`ChainDiagnostics`.
    """
    coord_rhat = [dg.grouped(dg.rhat, coordinates[..., i], dataset) for i in range(coordinates.shape[-1])]
    chains = np.unique(np.asarray(dataset), return_counts=True)[1]
    nested = None
    if chains.min() >= 2:                   # nested R-hat within each data set, every chain its own start
        nested = dg.grouped(lambda x: dg.rhat_nested(x, np.arange(len(x))), loss, dataset)
    stats = dict.fromkeys(ChainDiagnostics._fields[5:-1])            # the sampler's statistics, None without them
    if info is not None:
        steps = np.asarray(info.num_steps)
        stats = dict(divergences=int(np.sum(info.diverging)), warmup_divergences=int(np.sum(info.warmup_divergences)),
                     accept_prob_mean=float(np.mean(info.accept_prob)),
                     symmetry_accept_mean=None if info.symmetry_accept is None     # the flips (slt_relu.moves)
                     else float(np.mean(info.symmetry_accept)),
                     step_size=np.asarray(info.step_size), steps_per_draw_mean=float(steps.mean()),
                     max_tree_depth_fraction=float(np.mean(steps >= max_steps)) if max_steps else 0.0)
    return ChainDiagnostics(dg.grouped(dg.rhat, loss, dataset), dg.grouped(dg.ess_bulk, loss, dataset, worst=min),
                            dg.grouped(dg.ess_tail, loss, dataset, worst=min), float(np.max(coord_rhat)), nested,
                            **stats, grad_evals=int(np.sum(grad_evals)))


def sampler_warnings(d: ChainDiagnostics, where: str, n_draws: int, target_accept: float | None) -> list[str]:
    """What in :func:`chain_diagnostics` makes a point's numbers doubtful, one line each; a NaN
    diagnostic (draws holding a NaN, or a constant L_n) is reported as undefined."""
    out = []
    undefined = "NaN: undefined (non-finite or constant L_n in a data set)"
    if d.divergences:
        out.append(f"{where}: {d.divergences} divergent transitions of {n_draws} draws")
    if d.rhat_nested_loss is not None and np.isnan(d.rhat_nested_loss):
        out.append(f"{where}: nested R-hat of L_n is {undefined}")
    elif d.rhat_nested_loss is not None and d.rhat_nested_loss > 1.05:
        out.append(f"{where}: nested R-hat of L_n within a data set is {d.rhat_nested_loss:.3f} (> 1.05)")
    if np.isnan(d.rhat_loss):
        out.append(f"{where}: R-hat of L_n is {undefined}")
    elif d.rhat_loss > 1.05:
        out.append(f"{where}: R-hat of L_n within a data set is {d.rhat_loss:.3f} (> 1.05): chains not stationary")
    if np.isnan(d.ess_bulk_loss):
        out.append(f"{where}: bulk ESS of L_n is {undefined}")
    elif d.ess_bulk_loss < 100:
        out.append(f"{where}: bulk ESS of L_n is {d.ess_bulk_loss:.0f} in the worst data set (< 100)")
    if target_accept is not None and d.accept_prob_mean is not None and d.accept_prob_mean < target_accept - 0.15:
        out.append(f"{where}: mean acceptance {d.accept_prob_mean:.2f} far below the target {target_accept}")
    if (d.max_tree_depth_fraction or 0.0) > 0.01:
        out.append(f"{where}: {100 * d.max_tree_depth_fraction:.1f}% of draws hit the maximum tree depth")
    return out
