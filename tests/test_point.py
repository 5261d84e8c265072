"""A sweep point's typed results (slt_relu.posterior.point, evidence, stopping): each against hand counts, and
each one's ``to_dataset()`` against the values it holds; the point's Dataset merges them on one label axis.  Small
arrays, no sampling.  (The diagnostics of a point's chains and runs: tests/test_diagnostics.py.)"""
import numpy as np
import pytest

from slt_relu.posterior import evidence, masses, point
from slt_relu.posterior.stopping import RunAgreement, StoppingRule, stored_agreement

# two data sets x two chains of four draws; data set 1's chains have the larger L_n
DATASET = np.array([0, 0, 1, 1])
LOSS = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 4.0]])
CODES = np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]])          # phases ("a", "b")
LABELS = np.array([["x", "x", "y", "y"], ["x", "x", "x", "y"], ["y", "y", "y", "y"], ["y", "z", "z", "z"]], object)


def test_the_trial_filter_by_hand():
    """Mean L_n per data set 1 and 2.25 (excess over L_n(truth) 0 and 1.25); two trials always have z = -+1, so
    z = 0.5 drops both and z = 1 keeps both; where the filter is not applied every trial is used."""
    t = point.filter_trials(LOSS, DATASET, [1.0, 1.0], z=0.5, applied=True)
    np.testing.assert_array_equal(t.mean_loss, [1.0, 2.25])
    np.testing.assert_array_equal(t.excess_loss, [0.0, 1.25])
    assert t.z == 0.5 and t.applied and not t.kept.any() and not t.kept_by_excess.any() and not t.used.any()
    assert point.filter_trials(LOSS, DATASET, [1.0, 1.0], z=1.0, applied=True).kept.all()
    t = point.filter_trials(LOSS, DATASET, [1.0, 1.0], z=0.5, applied=False)
    assert t.used.all() and not t.kept.any()
    ds = t.to_dataset()
    assert ds["trials"].item() == 2 and ds["mean_loss_per_trial"].dims == ("dataset",)
    np.testing.assert_array_equal(ds["mean_loss_per_trial"], t.mean_loss)
    np.testing.assert_array_equal(ds["excess_loss_per_trial"], t.excess_loss)
    np.testing.assert_array_equal(ds["dropped"], [False, False])


def _filter(kept, applied=True):
    kept = np.asarray(kept)
    return point.TrialFilter(np.zeros(len(kept)), np.zeros(len(kept)), 1.5, applied, kept, kept)


def test_a_points_masses_by_hand_with_a_dropped_trial():
    """Phase b's fraction per chain 1/4, 2/4, 3/4, 4/4: per data set 3/8 and 7/8.  With data set 1 dropped the mass
    is data set 0's, its per-trial row NaN at data set 1, the unfiltered mass the mean over both."""
    m = point.point_masses(CODES, ("a", "b"), DATASET, _filter([True, False]))
    assert m.names == ("a", "b") and m.per_run is None
    np.testing.assert_array_equal(m.mass, [5 / 8, 3 / 8])
    assert np.isnan(m.se).all()                                            # one trial: no spread across trials
    np.testing.assert_array_equal(m.per_trial, [[5 / 8, 3 / 8], [np.nan, np.nan]])
    np.testing.assert_array_equal(m.unfiltered, [(5 / 8 + 1 / 8) / 2, (3 / 8 + 7 / 8) / 2])
    ds = m.to_dataset()
    assert ds["mass_per_trial"].dims == ("dataset", "phase") and ds["phase"].values.tolist() == ["a", "b"]
    for name, field in (("mass", "mass"), ("mass_se", "se"), ("mass_mcse", "mcse"), ("mass_unfiltered", "unfiltered"),
                        ("mass_per_trial", "per_trial")):
        np.testing.assert_array_equal(ds[name].values, getattr(m, field), err_msg=name)
    assert "mass_per_run" not in ds
    everything = point.point_masses(CODES, ("a", "b"), DATASET, _filter([True, False], applied=False))
    assert everything.unfiltered is None
    np.testing.assert_array_equal(everything.mass, [3 / 8, 5 / 8])


def test_a_points_masses_of_smc_runs_by_hand():
    """Runs on one data set pooled by their evidence (Z 1 : 3): phase b 1/4 * 1/4 + 3/4 * 2/4 = 7/16 on data set 0;
    the Monte Carlo error is the runs' jackknife (``mcse_runs``); every run's own masses kept; classify_phase's labels
    along ``label``, each name led by ``classify_``."""
    lz = np.log([1.0, 3.0, 1.0, 1.0])
    m = point.point_masses(CODES, ("a", "b"), DATASET, _filter([True, True], applied=False), lz)
    assert m.per_trial[0, 1] == pytest.approx(7 / 16, rel=1e-12) and m.per_trial[1, 1] == pytest.approx(7 / 8)
    np.testing.assert_allclose(m.mcse, masses.phase_masses(CODES, ("a", "b"), DATASET, lz).mcse_runs, rtol=1e-12)
    np.testing.assert_array_equal(m.per_run[:, 1], [1 / 4, 2 / 4, 3 / 4, 1.0])
    labelled = point.point_masses(LABELS, None, DATASET, _filter([True, True], applied=False), lz)
    assert labelled.names == ("x", "y", "z")
    ds = labelled.to_dataset("label", "classify_")
    assert ds["classify_mass_per_run"].dims == ("run", "label") and ds["label"].values.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(ds["classify_mass_per_run"].values, labelled.per_run)
    np.testing.assert_array_equal(ds["classify_mass"].values, labelled.mass)


def test_a_points_evidence_holds_its_log_z_and_free_energies():
    """log Zbar per data set by hand; the free energies those of :func:`free_energies`; the smallest L_n of each
    phase's particles by hand (inf for a phase without particles)."""
    lz = np.array([-10.0, -10.2, -12.0, -11.6])
    codes = CODES.copy()
    codes[2:] = 1                                                          # no particle of phase a on data set 1
    e = evidence.point_evidence(lz, DATASET, LOSS, (codes, ("a", "b")), LABELS)
    per_trial = [np.log(np.mean(np.exp(lz[:2]))), np.log(np.mean(np.exp(lz[2:])))]
    np.testing.assert_allclose(e.log_evidence_per_trial, per_trial, rtol=1e-12)
    assert e.log_evidence == pytest.approx(np.mean(per_trial), rel=1e-12)
    assert e.log_evidence_se == pytest.approx(abs(per_trial[0] - per_trial[1]) / 2, rel=1e-12)
    assert e.log_evidence_mcse == masses.log_evidence_mcse(lz, DATASET)
    want = evidence.free_energies(lz, DATASET, masses.phase_masses(codes, ("a", "b"), DATASET, lz))
    for field in want._fields:
        np.testing.assert_array_equal(getattr(e.free_energy, field), getattr(want, field), err_msg=field)
    np.testing.assert_array_equal(e.min_loss_per_trial, [[1.0, 1.0], [np.inf, 2.0]])
    assert e.classify_free_energy.names == ("x", "y", "z")
    ds = e.to_dataset()
    np.testing.assert_array_equal(ds["log_evidence_per_run"].values, lz)
    np.testing.assert_array_equal(ds["dataset_per_run"].values, DATASET)
    assert ds["num_runs"].item() == 4 and ds["log_evidence"].item() == e.log_evidence
    fe = e.free_energy
    for name, v in (("free_energy_total", fe.free_energy_mean), ("free_energy", fe.phase_free_energy_mean),
                    ("free_energy_mcse", fe.phase_free_energy_mcse), ("relative_free_energy", fe.relative_mean),
                    ("free_energy_per_trial", fe.phase_free_energy), ("min_loss_per_trial", e.min_loss_per_trial)):
        np.testing.assert_array_equal(ds[name].values, v, err_msg=name)
    np.testing.assert_array_equal(ds["classify_free_energy"].sel(label="z").item(),
                                  e.classify_free_energy.phase_free_energy_mean[2])
    assert ds["classify_free_energy_per_trial"].dims == ("dataset", "label")


def test_the_stopping_rules_verdict_per_phase_and_as_a_checkpoint_holds_it():
    a = RunAgreement(False, {"a": 0.01, "b": 0.03, "c": float("nan")}, 0.2, 4, 9, 64, 1.5, [3.9, 2.5],
                     StoppingRule(mass_mcse=0.02, log_evidence_mcse=0.1))
    np.testing.assert_array_equal(a.converged_phases(("a", "b", "c")), [True, False, False])
    ds = a.to_dataset(("a", "b", "c"))
    assert ds["converged"].item() is False and ds["runs_per_dataset"].item() == 4
    np.testing.assert_array_equal(ds["converged_phase"].values, [True, False, False])
    assert "converged_phase" not in a.to_dataset()
    assert a._replace(targets=StoppingRule(log_evidence_mcse=0.1)).converged_phases(("c",)).all()
    stored = a.to_dict()
    assert list(stored) == list(RunAgreement._fields) and stored["targets"] == a.targets._asdict()
    assert stored_agreement({"convergence": stored}) == a and stored_agreement({}) is None


def test_a_points_dataset_keeps_the_labels_of_its_kept_trials():
    """Label z occurs only on data set 1, which the filter drops: the point's label axis is that of its masses
    (x, y); the cross-table and classify_phase's free energies, of every trial, are restricted to it."""
    lz = np.zeros(4)
    trials = point.filter_trials(LOSS, DATASET, [1.0, 1.0], z=1.0, applied=True)._replace(
        kept=np.array([True, False]))
    rule = point.point_masses(CODES, ("a", "b"), DATASET, trials, lz)
    labelled = point.point_masses(LABELS, None, DATASET, trials, lz)
    table = point.cross_table(CODES, ("a", "b"), LABELS, DATASET, lz)
    assert table.labels == ("x", "y", "z") and labelled.names == ("x", "y")
    diagnostics = evidence.SMCDiagnostics(np.array([3, 3, 3, 3]), 0.5, 0.7, 0.6, 1.0, 400)
    agreement = RunAgreement(True, {"a": 0.01, "b": 0.01}, 0.1, 2, 2, 4, 0.5, [2.0, 2.0], StoppingRule(mass_mcse=0.02))
    pt = point.PosteriorPoint(100, 0.5, 50.0, trials, rule, labelled, {"x": "phase x", "y": "phase y"}, table,
                              evidence.point_evidence(lz, DATASET, LOSS, (CODES, ("a", "b")), LABELS), diagnostics,
                              agreement)
    ds = pt.to_dataset()
    assert ds["label"].values.tolist() == ["x", "y"] and ds["label_name"].values.tolist() == ["phase x", "phase y"]
    np.testing.assert_array_equal(ds["cross_table"].values, table.mass[:, :2])
    np.testing.assert_array_equal(ds["classify_free_energy"].values,
                                  pt.evidence.classify_free_energy.phase_free_energy_mean[:2])
    np.testing.assert_array_equal(ds["dropped"].values, [False, True])
    np.testing.assert_array_equal(ds["mass_per_trial"].values, rule.per_trial)
    np.testing.assert_array_equal(ds["converged_phase"].values, [True, True])
    assert (ds["n"].item(), ds["beta"].item(), ds["n_beta"].item()) == (100, 0.5, 50.0)
    assert ds["stages"].dims == ("run",) and ds.sizes == {"dataset": 2, "run": 4, "phase": 2, "label": 2}
