"""One sweep point of a posterior: its results as typed values, and the point as one labelled Dataset (DSLT4).

A point samples K data sets (trials) with C chains or independent SMC runs on them.  Its results:

* :class:`TrialFilter` (:func:`filter_trials`): each trial's mean L_n, its excess over L_n(truth) on
  the same data, and DSLT4's trial filter on them;
* :class:`PointMasses` (:func:`point_masses`): the masses of one labelling's phases (DSLT4's rule, or
  classify_phase's labels) over the trials the filter kept, with their errors, per trial and per run;
* :class:`CrossTable` (:func:`cross_table`): how the rule's phases split into classify_phase's labels;
* log Z and free energies (SMC: ``slt_relu.posterior.evidence.PointEvidence``), the sampler's diagnostics
  (``masses.ChainDiagnostics``, ``evidence.SMCDiagnostics``), the stopping rule's verdict
  (``stopping.RunAgreement``);

each with ``to_dataset()``, its part of the point's Dataset; :class:`PosteriorPoint` holds them all and
merges the parts.  Dimensions: ``dataset`` (the K trials), ``run`` (the C chains or runs), ``phase`` (the
rule's phases), ``label`` (classify_phase's labels, their names in words as coordinate ``label_name``).
``slt_relu.posterior.sweep_results`` puts the points of a sweep together.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .evidence import PointEvidence, SMCDiagnostics
from .masses import ChainDiagnostics, phase_masses, pool_weights, trial_filter
from .stopping import RunAgreement

__all__ = ["CrossTable", "PointMasses", "PosteriorPoint", "TrialFilter", "cross_table", "filter_trials", "point_masses"]


class TrialFilter(NamedTuple):
    """DSLT4's trial filter at one point of K trials: keep the trials whose mean L_n has |z-score| <= z
    (:func:`~slt_relu.posterior.masses.trial_filter`).  A trial's mean L_n differs from the others' mostly
    through its data set's noise (L_n(truth) itself varies by ~ sigma^2 sqrt(2/n)); its excess over the
    truth's L_n on the same data isolates the posterior's own part, filtered beside it for comparison.

    Attributes:
        mean_loss: (K,) each trial's posterior mean of L_n (its chains' draws pooled).
        excess_loss: (K,) mean_loss - L_n(truth) on the trial's data set.
        z: the threshold on |z-score|.
        applied: whether the point's masses use only the kept trials.
        kept: (K,) bool, the filter on mean_loss.
        kept_by_excess: (K,) bool, the filter on excess_loss.
    """

    mean_loss: np.ndarray
    excess_loss: np.ndarray
    z: float
    applied: bool
    kept: np.ndarray
    kept_by_excess: np.ndarray

    @property
    def used(self) -> np.ndarray:
        """(K,) bool, the trials the masses use (the kept ones where the filter is applied, else all)."""
        return self.kept if self.applied else np.ones(self.kept.shape, bool)

    def to_dataset(self):
        """``trials`` (K), ``mean_loss_per_trial``, ``excess_loss_per_trial`` and ``dropped`` (the trials the
        masses leave out) along ``dataset``."""
        import xarray as xr

        return xr.Dataset({"trials": ((), len(self.kept)),
                           "mean_loss_per_trial": ("dataset", np.asarray(self.mean_loss, np.float64)),
                           "excess_loss_per_trial": ("dataset", np.asarray(self.excess_loss, np.float64)),
                           "dropped": ("dataset", ~self.used)})


def filter_trials(loss, dataset, truth_loss, *, z: float = 1.5, applied: bool = False) -> TrialFilter:
    """DSLT4's trial filter at a point.

    Args:
        loss: (C, S) L_n of each draw.
        dataset: (C,) each chain's data set (trial), 0 .. K-1.
        truth_loss: (K,) L_n(truth) on each data set.
        z: the threshold on |z-score| (population standard deviation).
        applied: whether the point's masses use only the kept trials.

    Returns:
        :class:`TrialFilter`.

    References:
        DSLT4: trials whose mean loss is an outlier are dropped before the masses are averaged.
    """
    ds = np.asarray(dataset)
    mean_loss = np.array([loss[ds == g].mean() for g in np.unique(ds)])
    excess = mean_loss - np.asarray(truth_loss, np.float64)
    return TrialFilter(mean_loss, excess, z, applied, trial_filter(mean_loss, z), trial_filter(excess, z))


class PointMasses(NamedTuple):
    """The masses of one labelling's P phases at a point of K trials and C chains or runs
    (:func:`~slt_relu.posterior.masses.phase_masses` of the trials the filter kept).

    Attributes:
        names: the P phase names (labels).
        mass: (P,) the mean over kept trials of each trial's mass.
        se: (P,) its standard error across kept trials (NaN with one).
        mcse: (P,) its Monte Carlo error: from the spread of the runs on each data set (``mcse_runs``) for SMC
            runs, from each chain's ESS (``mcse``) for MCMC chains.
        per_trial: (K, P) each trial's mass (its chains or runs pooled); NaN at the trials the filter dropped.
        unfiltered: (P,) the masses over every trial where the filter is applied, else None.
        per_run: (C, P) each SMC run's own masses (every run, before the filter), else None.  (A label that only
            draws of dropped trials have is not among the P.)
    """

    names: tuple
    mass: np.ndarray
    se: np.ndarray
    mcse: np.ndarray
    per_trial: np.ndarray
    unfiltered: np.ndarray | None = None
    per_run: np.ndarray | None = None

    def to_dataset(self, dim: str = "phase", prefix: str = ""):
        """The masses as a Dataset along ``dim`` (coordinate: ``names``), each variable's name led by ``prefix``:
        ``mass``, ``mass_se``, ``mass_mcse`` (dim), ``mass_per_trial`` (dataset, dim), and where the point has them
        ``mass_unfiltered`` (dim) and ``mass_per_run`` (run, dim)."""
        import xarray as xr

        fields = {"mass": (dim, self.mass), "mass_se": (dim, self.se), "mass_mcse": (dim, self.mcse),
                  "mass_unfiltered": (dim, self.unfiltered), "mass_per_trial": (("dataset", dim), self.per_trial),
                  "mass_per_run": (("run", dim), self.per_run)}
        return xr.Dataset({prefix + name: (dims, np.asarray(v, np.float64)) for name, (dims, v) in fields.items()
                           if v is not None}, coords={dim: list(self.names)})


def point_masses(labels, names, dataset, trials: TrialFilter, log_evidence=None) -> PointMasses:
    """The masses of a labelling at a point, over the trials its filter keeps.

    Args:
        labels: (C, S) array of each draw's phase: codes into ``names``, or hashable labels with ``names`` None
            (as :func:`~slt_relu.posterior.masses.phase_masses` takes them).
        names: the phase names, or None.
        dataset: (C,) each chain's data set, 0 .. K-1.
        trials: the point's :class:`TrialFilter`: the masses use its :attr:`~TrialFilter.used` trials.
        log_evidence: (C,) each run's log Z when the chains are independent SMC runs (each data set's runs
            pooled by their evidence), else None.

    Returns:
        :class:`PointMasses`.
    """
    labels, ds = np.asarray(labels), np.asarray(dataset)
    groups = np.unique(ds)
    use = trials.used[np.searchsorted(groups, ds)]
    lz = None if log_evidence is None else np.asarray(log_evidence)
    pm = phase_masses(labels[use], names, ds[use], None if lz is None else lz[use])
    per_trial = np.full((len(groups), len(pm.names)), np.nan)
    per_trial[np.searchsorted(groups, np.unique(ds[use]))] = pm.per_dataset
    every = pm if use.all() else phase_masses(labels, names, ds, lz)
    cols = [every.names.index(nm) for nm in pm.names]       # (labels seen only on dropped trials left out)
    return PointMasses(pm.names, pm.mass, pm.se, pm.mcse_runs if lz is not None else pm.mcse, per_trial,
                       every.mass[cols] if trials.applied else None, None if lz is None else every.per_chain[:, cols])


class CrossTable(NamedTuple):
    """How a phase rule's P phases split into classify_phase's L labels at a point.

    Attributes:
        phases: the rule's P phase names.
        labels: the L labels of the classified draws, sorted.
        mass: (P, L) the mass of the draws in both (the mean over data sets of each data set's fraction, its
            chains pooled as in :func:`~slt_relu.posterior.masses.phase_masses`): each phase's row sums to its mass.
        count: (P, L) the draws in both (0: a pair that never occurs, whose mass is 0).
    """

    phases: tuple
    labels: tuple
    mass: np.ndarray
    count: np.ndarray

    def to_dataset(self):
        """``cross_table`` (phase, label): :attr:`mass`."""
        import xarray as xr

        return xr.Dataset({"cross_table": (("phase", "label"), np.asarray(self.mass, np.float64))},
                          coords={"phase": list(self.phases), "label": list(self.labels)})


def cross_table(codes, names, labels, dataset, log_evidence=None) -> CrossTable:
    """How a rule's phases split into classify_phase's labels, on the same draws.

    Args:
        codes: (C, S) the rule's phase codes of the classified draws.
        names: the rule's P phase names.
        labels: (C, S) their classify_phase labels.
        dataset: (C,) each chain's data set.
        log_evidence: (C,) each run's log Z for independent SMC runs (pooled by their evidence), else None.

    Returns:
        :class:`CrossTable`.
    """
    codes, labels, dataset = np.asarray(codes), np.asarray(labels, object), np.asarray(dataset)
    groups = np.unique(dataset)
    w = pool_weights(dataset, log_evidence)
    table = tuple(sorted(set(labels.ravel().tolist()), key=str))
    mass, count = np.zeros((len(names), len(table))), np.zeros((len(names), len(table)), int)
    for k in range(len(names)):
        for j, lab in enumerate(table):
            both = (codes == k) & (labels == lab)
            count[k, j] = both.sum()
            if count[k, j]:
                per_chain = both.mean(1)
                mass[k, j] = float(np.mean([w[dataset == g] @ per_chain[dataset == g] for g in groups]))
    return CrossTable(tuple(names), tuple(str(lab) for lab in table), mass, count)


class PosteriorPoint(NamedTuple):
    """One sweep point's results (module docstring).

    Attributes:
        n: the data sets' size.
        beta: the inverse temperature.
        n_beta: n beta.
        trials: :class:`TrialFilter`.
        masses: :class:`PointMasses` of the phase rule's phases, or None (no rule).
        classified: :class:`PointMasses` of classify_phase's labels, or None.
        label_names: {label: its name in words} of every classified draw's label (empty without them).
        cross_table: :class:`CrossTable` of the rule against the labels, or None.
        evidence: :class:`~slt_relu.posterior.evidence.PointEvidence` (SMC runs), or None.
        diagnostics: :class:`~slt_relu.posterior.masses.ChainDiagnostics` (MCMC chains) or
            :class:`~slt_relu.posterior.evidence.SMCDiagnostics` (SMC runs).
        convergence: the stopping rule's :class:`~slt_relu.posterior.stopping.RunAgreement`, or None.
    """

    n: int
    beta: float
    n_beta: float
    trials: TrialFilter
    masses: PointMasses | None
    classified: PointMasses | None
    label_names: dict
    cross_table: CrossTable | None
    evidence: PointEvidence | None
    diagnostics: ChainDiagnostics | SMCDiagnostics
    convergence: RunAgreement | None = None

    def to_dataset(self):
        """The point as one Dataset: ``n``, ``beta``, ``n_beta`` and every part's ``to_dataset()``, classify_phase's
        variables led by ``classify_``; the label axis is the labels of the masses (those of the kept trials:
        the cross-table and classify_phase's free energies, of every trial, are restricted to them)."""
        import xarray as xr

        parts = [xr.Dataset({"n": ((), self.n), "beta": ((), self.beta), "n_beta": ((), self.n_beta)}),
                 self.trials.to_dataset(), self.diagnostics.to_dataset()]
        labels = None if self.classified is None else list(self.classified.names)
        if self.masses is not None:
            parts.append(self.masses.to_dataset("phase"))
        if self.classified is not None:
            parts.append(self.classified.to_dataset("label", "classify_").assign_coords(
                label_name=("label", [self.label_names.get(lab, lab) for lab in labels])))
        if self.cross_table is not None:
            parts.append(self.cross_table.to_dataset().reindex(label=labels, fill_value=0.0))
        if self.evidence is not None:
            ev = self.evidence.to_dataset()
            parts.append(ev.reindex(label=labels) if "label" in ev.dims else ev)
        if self.convergence is not None:
            parts.append(self.convergence.to_dataset(None if self.masses is None else self.masses.names))
        return xr.merge(parts, join="exact", combine_attrs="drop")
