"""Free energies, their slopes, who leads, cross-tables and SMC warnings: the pure functions of
slt_relu.posterior.evidence and slt_relu.posterior.masses against hand computations."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.posterior import evidence, sweep_results, masses as analysis


def test_free_energies_by_hand():
    """Two data sets x two runs, two phases: F = -log mean_r Z_r per data set, each data set's runs pooled by
    their evidence (mass_alpha = sum_r Z_r mass_alpha,r / sum_r Z_r), F_alpha = F - log mass_alpha, so
    mass_alpha = exp(F - F_alpha); errors across data sets and from the runs kept apart."""
    log_z = np.array([-10.0, -10.2, -12.0, -11.6])
    dataset = np.array([0, 0, 1, 1])
    labels = np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]])   # 4 particles per run
    pm = analysis.phase_masses(labels, ("a", "b"), dataset, log_z)
    fe = evidence.free_energies(log_z, dataset, pm)
    Z = np.exp(log_z + 10)
    F = -np.array([np.log(np.mean(Z[:2])), np.log(np.mean(Z[2:]))]) + 10
    np.testing.assert_allclose(fe.free_energy, F, rtol=1e-12)
    np.testing.assert_allclose(fe.log_evidence, -F, rtol=1e-12)
    per_run_a = np.array([0.75, 0.5, 0.25, 0.0])
    mass_a = np.array([Z[:2] @ per_run_a[:2] / Z[:2].sum(), Z[2:] @ per_run_a[2:] / Z[2:].sum()])
    mass = np.stack([mass_a, 1 - mass_a], 1)                                         # per data set
    np.testing.assert_allclose(pm.per_dataset, mass, rtol=1e-12)
    np.testing.assert_allclose(fe.phase_free_energy, F[:, None] - np.log(mass), rtol=1e-12)
    np.testing.assert_allclose(np.exp(fe.free_energy[:, None] - fe.phase_free_energy), mass, rtol=1e-12)
    assert fe.free_energy_mean == pytest.approx(F.mean())
    assert fe.free_energy_se == pytest.approx(F.std(ddof=1) / np.sqrt(2))
    # Monte Carlo error of log mean_r Z_r on the Z scale: sd(Z_r) / sqrt(R) / mean(Z_r) per data set
    rel = [np.std(z, ddof=1) / np.sqrt(2) / np.mean(z) for z in (Z[:2], Z[2:])]
    assert fe.free_energy_mcse == pytest.approx(np.sqrt(rel[0] ** 2 + rel[1] ** 2) / 2, rel=1e-12)
    # ... and of a phase's -log mean_r Z_r mass_alpha,r the same way (phase a on data set 1: one run has none)
    za = Z * per_run_a
    rel_a = [np.std(z, ddof=1) / np.sqrt(2) / np.mean(z) for z in (za[:2], za[2:])]
    assert fe.phase_free_energy_mcse[0] == pytest.approx(np.sqrt(rel_a[0] ** 2 + rel_a[1] ** 2) / 2, rel=1e-12)
    np.testing.assert_allclose(fe.relative_mean, -np.log(mass.mean(0)), rtol=1e-12)
    # a phase without particles has F_alpha = inf
    empty = analysis.phase_masses(np.zeros((4, 4), int), ("a", "b"), dataset, log_z)
    assert np.isinf(evidence.free_energies(log_z, dataset, empty).phase_free_energy[:, 1]).all()


def test_runs_pooled_by_evidence_reduce_to_the_plain_mean_when_their_evidences_agree():
    """Equal log Z: the weights are 1 / R, the masses the plain mean of the runs and their Monte Carlo error
    sd / sqrt(R) per data set (the delta method's R / (R - 1) sum w^2 (x - xbar)^2 is then sd^2 / R)."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, (6, 50))
    dataset = np.array([0, 0, 0, 1, 1, 1])
    plain = analysis.phase_masses(labels, ("a", "b", "c"), dataset)
    pooled = analysis.phase_masses(labels, ("a", "b", "c"), dataset, np.full(6, -7.5))
    np.testing.assert_allclose(pooled.per_dataset, plain.per_dataset, rtol=1e-12)
    np.testing.assert_allclose(pooled.mcse_runs, plain.mcse_runs, rtol=1e-12)
    by_hand = np.sqrt(sum(plain.per_chain[dataset == g].var(0, ddof=1) / 3 for g in (0, 1))) / 2
    np.testing.assert_allclose(plain.mcse_runs, by_hand, rtol=1e-12)
    assert analysis.effective_runs(np.full(6, -7.5), dataset) == pytest.approx([3.0, 3.0])


def test_the_runs_error_of_a_pool_is_its_delete_one_run_jackknife():
    """mcse_runs by hand: on each data set the masses of the pool without run r (phase_masses of the other
    runs, their log Z renormalised), var_k = (R - 1) / R sum_r (xbar_-r - their mean)^2, combined as
    sqrt(sum_k var_k) / K; a data set whose other runs all have Z = 0 has an infinite error, NaN log Z a NaN one."""
    rng = np.random.default_rng(4)
    labels, dataset = rng.integers(0, 3, (9, 40)), np.repeat([0, 1, 2], 3)
    log_z = rng.normal(-50.0, 1.5, 9)
    pm = analysis.phase_masses(labels, ("a", "b", "c"), dataset, log_z)
    var = 0.0
    for g in range(3):
        rows = np.flatnonzero(dataset == g)
        loo = np.array([analysis.phase_masses(labels[np.delete(rows, r)], ("a", "b", "c"), None,
                                              log_z[np.delete(rows, r)]).per_dataset.T @ analysis.run_weights(
                                                  log_z[np.delete(rows, r)], np.zeros(2, int)) for r in range(3)])
        var = var + 2 / 3 * np.sum((loo - loo.mean(0)) ** 2, 0)
    np.testing.assert_allclose(pm.mcse_runs, np.sqrt(var) / 3, rtol=1e-10)
    log_z[[0, 1]] = -np.inf                                                  # data set 0: one run holds all of Z
    assert np.isinf(analysis.phase_masses(labels, ("a", "b", "c"), dataset, log_z).mcse_runs).all()
    log_z[0] = np.nan                                                         # NaN in, NaN out
    assert np.isnan(analysis.phase_masses(labels, ("a", "b", "c"), dataset, log_z).mcse_runs).all()


def test_the_runs_error_of_a_pool_is_not_optimistic_at_four_runs():
    """Pools of R = 4 runs by their evidence, whose log Z spread 0.7 nats and whose masses rise with log Z
    (a run that found more of a mode has the larger Z), 4 data sets, 4,000 replicates: the mean of the
    reported variance against the actual variance of the estimate.  The jackknife's is 1.07 (Efron-Stein:
    at least 1 in expectation, up to the Monte Carlo error of 4,000 replicates, about 0.03); the delta
    method's R / (R - 1) sum w^2 (x - xbar)^2 would say 0.52 (computed here, the error the stopping rule
    used to trust)."""
    rng = np.random.default_rng(5)
    K, R = 4, 4
    ds = np.repeat(np.arange(K), R)
    est, jack, delta = [], [], []
    for _ in range(4000):
        u = rng.standard_normal(K * R)
        x = np.clip(0.5 + 0.08 * u + 0.04 * rng.standard_normal(K * R), 0, 1)
        w = analysis.run_weights(0.7 * u, ds)
        est.append(np.mean([w[ds == k] @ x[ds == k] for k in range(K)]))
        jack.append(analysis.runs_mcse(x[:, None], ds, w)[0] ** 2)
        delta.append(sum(R / (R - 1) * np.sum(w[ds == k] ** 2 * (x[ds == k] - w[ds == k] @ x[ds == k]) ** 2)
                         for k in range(K)) / K**2)
    actual = np.var(est)
    assert 0.92 < np.mean(jack) / actual < 1.25, np.mean(jack) / actual
    assert np.mean(delta) / actual < 0.7


def test_pooling_by_evidence_recovers_a_mode_that_few_runs_find():
    """Runs as SMC's unbiased estimates: mode A holds Z_A = 1, mode B Z_B = 3 (true mass of B 0.75); a run
    finds B with probability pi = 0.1 and then reports Z_r = Z_A + Z_B / pi with B's share of it (so that
    E[Z_r] = Z_A + Z_B and E[Z_r mass_B,r] = Z_B), else Z_r = Z_A and mass_B,r = 0.  Pooled by evidence the
    runs give 0.75 within 4 of their reported Monte Carlo errors (the reported errors are right: over 200
    replicates the z-scores have sd within 20 % of 1); the plain mean of the runs gives about pi times
    B's share, 0.097, and log Z by the mean of Z is right where the mean of log Z is not."""
    rng = np.random.default_rng(1)
    # N = 100 draws per run: a run's mass is then within 0.02 of its share, far inside the runs' spread (0 or 0.97),
    # which is what the errors and the pooling are about (N = 1000: z-scores as well calibrated, at 10 times the cost)
    Z_A, Z_B, pi, R, N = 1.0, 3.0, 0.1, 400, 100
    zs = []
    for rep in range(200):
        found = rng.random(R) < pi
        z = np.where(found, Z_A + Z_B / pi, Z_A)
        share = np.where(found, Z_B / pi / z, 0.0)
        labels = (rng.random((R, N)) < share[:, None]).astype(int)                  # 1: mode B
        pm = analysis.phase_masses(labels, ("A", "B"), np.zeros(R, int), np.log(z))
        zs.append((pm.mass[1] - Z_B / (Z_A + Z_B)) / pm.mcse_runs[1])
        if rep == 0:
            assert abs(zs[0]) < 4
            plain = analysis.phase_masses(labels, ("A", "B"), np.zeros(R, int))
            assert abs(plain.mass[1] - 0.097) < 0.03
            fe = evidence.free_energies(np.log(z), np.zeros(R, int), pm)
            assert abs(fe.log_evidence[0] - np.log(Z_A + Z_B)) < 4 * fe.free_energy_mcse
            assert np.mean(np.log(z)) < np.log(Z_A + Z_B) - 0.8
    assert 0.8 < np.std(zs) < 1.2 and abs(np.mean(zs)) < 0.3, (np.mean(zs), np.std(zs))


def test_one_run_carrying_the_evidence_shows_in_the_error_of_log_z():
    """Eight runs that agree within 0.05 nats: log Z's error about their sd / sqrt(8); one of them 2.6 nats
    above the rest: it carries 0.66 of Z, the effective runs fall to 2.2 and the error of log Z is 0.61
    nats, whatever the spread of the other seven (the convergence rule's log Z target refuses it)."""
    rng = np.random.default_rng(2)
    lz = -1563.0 + 0.05 * rng.standard_normal(8)
    ds = np.zeros(8, int)
    assert analysis.log_evidence_mcse(lz, ds) == pytest.approx(np.std(lz, ddof=1) / np.sqrt(8), rel=0.05)
    lz = np.full(8, -1563.0)
    lz[3] += 2.6
    w = analysis.run_weights(lz, ds)
    w3 = np.exp(2.6) / (np.exp(2.6) + 7)
    assert w[3] == pytest.approx(w3, rel=1e-12) and w.sum() == pytest.approx(1, rel=1e-12)
    assert analysis.effective_runs(lz, ds)[0] == pytest.approx(1 / (w3**2 + 7 * ((1 - w3) / 7) ** 2), rel=1e-12)
    assert 2.1 < analysis.effective_runs(lz, ds)[0] < 2.3
    by_hand = np.sqrt(8 / 7 * ((w3 - 1 / 8) ** 2 + 7 * ((1 - w3) / 7 - 1 / 8) ** 2))
    assert analysis.log_evidence_mcse(lz, ds) == pytest.approx(by_hand, rel=1e-12) and 0.58 < by_hand < 0.64
    lz[5] = np.nan                                                               # NaN in, NaN out
    assert np.isnan(analysis.run_weights(lz, ds)).all() and np.isnan(analysis.log_evidence_mcse(lz, ds))


def test_free_energy_slopes_recover_lambda():
    """F_alpha = n beta L_alpha + lambda_alpha log(n beta) + c_k exactly: the slope of F_alpha - n beta L_min
    against log(n beta) is lambda_alpha on every data set; with noise, its mean and standard error."""
    nb = np.array([1e3, 3e3, 1e4, 3e4, 1e5])
    lam = np.array([2.3, 2.85])
    L = np.array([[1.40, 1.4001], [1.42, 1.4203], [1.41, 1.4102]])                  # (K, P)
    c = np.array([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]])
    F = nb[:, None, None] * L + lam * np.log(nb)[:, None, None] + c                  # (B, K, P)
    out = evidence.free_energy_slopes(nb, F, np.broadcast_to(L, F.shape))
    slope, se = np.array([e.lambda_ for e in out.lambdas]), np.array([e.se for e in out.lambdas])
    np.testing.assert_allclose(slope, lam, rtol=1e-9)
    np.testing.assert_allclose(se, 0.0, atol=1e-9)
    np.testing.assert_allclose(out.excess, lam * np.log(nb)[:, None, None] + c, rtol=1e-9)
    for e, want in zip(out.lambdas, lam):                  # each phase's estimate: its data sets' slopes, the window
        np.testing.assert_allclose(e.details.per_dataset, want, rtol=1e-9)
        assert e.window == (1e3, 1e5) and e.m is None and e.m_reason and e.method == "phase_free_energy_slope"
    noise = np.random.default_rng(0).normal(0, 0.2, F.shape)
    out = evidence.free_energy_slopes(nb, F + noise, np.broadcast_to(L, F.shape))
    slope, se = np.array([e.lambda_ for e in out.lambdas]), np.array([e.se for e in out.lambdas])
    assert np.all(np.abs(slope - lam) < 4 * se) and np.all(se > 0)
    # each data set's slope is the least-squares slope of G against log(n beta), as numpy's polyfit has it
    G = out.excess
    by_hand = np.polyfit(np.log(nb), G.reshape(len(nb), -1), 1)[0].reshape(3, 2)
    np.testing.assert_allclose(np.stack([e.details.per_dataset for e in out.lambdas], 1), by_hand, rtol=1e-9)
    # a data set with a phase's F infinite (no particles there) makes that phase's slope NaN, not the others'
    F[2, 1, 0] = np.inf
    out = evidence.free_energy_slopes(nb, F, np.broadcast_to(L, F.shape))
    assert np.isnan(out.lambdas[0].lambda_) and np.isnan(out.lambdas[0].details.per_dataset[1])
    assert np.isfinite(out.lambdas[0].details.per_dataset[[0, 2]]).all() and out.lambdas[1].lambda_ == pytest.approx(lam[1])


def _point(a, b, n_beta=100.0, dropped=()):
    """A sweep point's Dataset with only what the sweep's grids, the lead and the crossover read: its trial filter
    and the masses of phases a and b on each trial (a, b: (K,), NaN at the trials the filter dropped)."""
    import xarray as xr

    from slt_relu.posterior.point import PointMasses, TrialFilter

    K = len(a)
    kept = ~np.isin(np.arange(K), dropped)
    trials = TrialFilter(np.ones(K), np.zeros(K), 1.5, bool(len(dropped)), kept, kept)
    per_trial = np.stack([a, b], -1)
    masses = PointMasses(("a", "b"), np.nanmean(per_trial, 0), np.full(2, 0.1), np.full(2, 0.01), per_trial)
    return xr.merge([trials.to_dataset(), masses.to_dataset(), xr.Dataset({"n": 100, "beta": 1.0, "n_beta": n_beta})])


def test_lead_by_hand():
    sweep = {"truth.v": [1.0, 2.0]}
    points = [_point([0.6, 0.7, 0.8], [0.3, 0.2, 0.1]), _point([0.4, 0.6, 0.5], [0.5, 0.4, 0.5])]
    ds = sweep_results.sweep_dataset(sweep, points, [{"truth.v": v} for v in sweep["truth.v"]])
    ds = sweep_results.with_crossover(ds, sweep, ("a", "b"), "truth.v")
    got = sweep_results.crossover_metrics(ds, sweep)["lead"]
    np.testing.assert_allclose(got["difference"], [0.5, 0.1 / 3], rtol=1e-12)        # (-0.1 + 0.2 + 0) / 3
    np.testing.assert_allclose(got["difference_se"][0], np.std([0.3, 0.5, 0.7], ddof=1) / np.sqrt(3))
    assert got["a_leads_at"] == [{"truth.v": 1.0}] and got["a_ever_leads"]        # 2.0: within two errors


def test_a_sweeps_dataset_is_labelled_by_its_axes_and_the_metrics_grids_derive_from_it(tmp_path):
    """Points in the sweep's order (the last key fastest) land at their coordinates; a trial the filter
    dropped is NaN in mass_per_trial and left out of the crossover; the file round-trips."""
    from slt_relu.netcdf import read_tree, write_tree

    sweep = {"posterior.beta": ["wbic", 0.5], "truth.v": [1.0, 2.0, 3.0]}
    points, values, per_trial = [], [], []
    for i, beta in enumerate(sweep["posterior.beta"]):
        for j, v in enumerate(sweep["truth.v"]):
            a = np.array([0.9 - 0.3 * j - 0.01 * i, 0.8 - 0.3 * j, 0.85 - 0.3 * j])
            dropped = (1,) if (i, j) == (1, 1) else ()
            if dropped:
                a = np.array([0.5, np.nan, 0.55])
            per_trial.append((a, 1 - a))
            points.append(_point(a, 1 - a, n_beta=10.0 * (i + 1), dropped=dropped))
            values.append({"posterior.beta": beta, "truth.v": v})
    ds = sweep_results.sweep_dataset(sweep, points, values)
    assert ds["mass"].dims == ("posterior.beta", "truth.v", "phase")
    assert ds["posterior.beta"].values.tolist() == ["wbic", "0.5"] and ds["truth.v"].values.tolist() == [1.0, 2.0, 3.0]
    assert ds["n_beta"].sel({"posterior.beta": "0.5", "truth.v": 3.0}) == 20.0
    np.testing.assert_array_equal(ds["mass_per_trial"].sel({"posterior.beta": "0.5", "truth.v": 2.0, "phase": "a"}),
                                  [0.5, np.nan, 0.55])
    np.testing.assert_array_equal(ds["dropped"].sel({"posterior.beta": "0.5", "truth.v": 2.0}), [False, True, False])
    ds = sweep_results.with_crossover(ds, sweep, ("a", "b"), "truth.v")
    got = sweep_results.grids(ds, sweep)
    assert got["mass"]["a"] == [[float(np.nanmean(per_trial[3 * i + j][0])) for j in range(3)] for i in range(2)]
    assert got["n_beta"] == [10.0, 20.0] and got["crossover_axis"] == "truth.v"
    # the crossover along v for each beta, by hand: the mean masses cross where a - b changes sign
    for i in range(2):
        diff = [np.nanmean(per_trial[3 * i + j][0]) - np.nanmean(per_trial[3 * i + j][1]) for j in range(3)]
        k = next(k for k in range(2) if diff[k] > 0 >= diff[k + 1])
        x = 1.0 + k + diff[k] / (diff[k] - diff[k + 1])
        assert got["crossover_v"][i] == pytest.approx(x, rel=1e-12)
    write_tree(ds, tmp_path / "results.nc")
    back = read_tree(tmp_path / "results.nc").to_dataset()
    assert sweep_results.grids(back, sweep) == got


def test_cross_table_rows_sum_to_the_rules_masses():
    from slt_relu.posterior.point import cross_table

    codes = np.array([[0, 0, 1, 2], [1, 1, 1, 2]])
    labels = np.array([["x", "y", "x", "x"], ["y", "y", "z", "x"]], object)
    table = cross_table(codes, ("p", "q", "r"), labels, np.array([0, 1]))
    assert table.phases == ("p", "q", "r") and table.labels == ("x", "y", "z")
    np.testing.assert_array_equal(table.mass, [[0.125, 0.125, 0.0], [0.125, 0.25, 0.125], [0.25, 0.0, 0.0]])
    np.testing.assert_array_equal(table.count, [[1, 1, 0], [1, 2, 1], [2, 0, 0]])
    mass = analysis.phase_masses(codes, ("p", "q", "r"), np.array([0, 1])).mass
    np.testing.assert_allclose(table.mass.sum(1), mass, rtol=1e-12)
    ds = table.to_dataset()
    assert ds["cross_table"].dims == ("phase", "label") and ds["label"].values.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(ds["cross_table"].values, table.mass)
    # independent SMC runs on one data set: each run's fraction weighted by its evidence, Z_r / sum Z
    lz = np.log([1.0, 3.0])
    table = cross_table(codes, ("p", "q", "r"), labels, np.array([0, 0]), lz)
    np.testing.assert_allclose(table.mass[1], [0.25 * 0.25, 0.75 * 0.5, 0.75 * 0.25], rtol=1e-12)


def _smc_diagnostics(ess_min, accept_prob_min, final_lambda_min):
    return evidence.SMCDiagnostics(np.array([3, 3]), ess_min, 0.7, accept_prob_min, final_lambda_min, 1000)


def test_smc_warnings_name_what_is_wrong():
    labels = np.zeros((2, 100), int)
    labels[0, :10] = 1                                   # phase b: 10 particles in run 0, none in run 1
    pm = analysis.phase_masses(labels, ("a", "b"), np.array([0, 0]))
    d = _smc_diagnostics(ess_min=0.1, accept_prob_min=0.1, final_lambda_min=0.5)
    out = evidence.smc_warnings(d, "t = 1", pm, 100, np.array([-5.0, -7.0]), np.array([0, 0]), 0.5)
    text = "\n".join(out)
    for phrase in ("ESS collapsed to 0.10", "acceptance fell to 0.10", "stopped at lambda = 0.5",
                   "the mass of b rests on fewer than 20 of the 100 particles", "differ by 2.00 nats"):
        assert phrase in text, (phrase, out)
    fine = _smc_diagnostics(ess_min=0.5, accept_prob_min=0.7, final_lambda_min=1.0)
    even = analysis.phase_masses(np.tile(np.arange(100) % 2, (2, 1)), ("a", "b"), np.array([0, 0]))
    assert evidence.smc_warnings(fine, "t = 1", even, 100, np.array([-5.0, -5.1]), np.array([0, 0]), 0.5) == []


def test_thin_classify_phase_masses_are_counted_on_the_particles_classified():
    """classify_phase labels every k-th particle: a mass of 0.03 is 30 of 1,000 particles but 3 of 100."""
    labels = np.zeros((2, 100), int)
    labels[:, :3] = 1
    pm = analysis.phase_masses(labels, ("a", "b"), np.array([0, 0]))
    assert evidence.thin_phase_warnings(pm, 1000, "t = 1") == []
    (msg,) = evidence.thin_phase_warnings(pm, 100, "t = 1", "classify_phase")
    assert msg == "t = 1: the classify_phase mass of b rests on fewer than 20 of the 100 particles it is measured on in a run"


def _half_defined(t):
    """U(z; t) = |z|^2 / 2 + t S(z) with S = z_0^2 / 2 where z_0 > 1 and NaN elsewhere (a model undefined
    on most of the prior's mass)."""
    return lambda z: 0.5 * jnp.sum(z**2) + t * jnp.where(z[0] > 1.0, 0.5 * z[0] ** 2, jnp.nan)


def _defined(t):
    return lambda z: 0.5 * jnp.sum(z**2) + t * 0.5 * z[0] ** 2


def test_a_collapsing_run_is_flagged_and_a_healthy_one_holds_the_target_ess():
    """The adaptive schedule picks each stage's step so that the incremental weights' ESS equals the target
    (bisection to 1e-4): a healthy run's smallest stage ESS is the target.  Particles whose potential is NaN
    lose all weight at every lambda, so no step reaches the target: the schedule stalls short of lambda = 1
    and the run is flagged (real runs, not constructed statistics)."""
    from slt_relu.sampling.smc import SMCSettings, run_smc

    s = SMCSettings(num_particles=256, num_mcmc_steps=2, num_leapfrog=4, max_stages=20)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    z0 = jax.random.normal(jax.random.PRNGKey(1), (2, 256, 2))
    t_max = (jnp.full(2, 20.0),)
    pm = analysis.phase_masses(np.zeros((2, 256), int), ("a",), np.array([0, 1]))
    fine = run_smc(keys, _defined, z0, t_max, s)
    d = evidence.smc_diagnostics(fine.info, fine.grad_evals)
    assert abs(d.ess_min - s.target_ess) < 0.02 and d.final_lambda_min == 1.0
    assert evidence.smc_warnings(d, "x", pm, 256, fine.log_evidence, np.array([0, 1]), s.target_ess) == []
    stalled = run_smc(keys, _half_defined, z0, t_max, s)
    d = evidence.smc_diagnostics(stalled.info, stalled.grad_evals)
    out = evidence.smc_warnings(d, "x", pm, 256, stalled.log_evidence, np.array([0, 1]), s.target_ess)
    assert d.final_lambda_min < 1.0 and any("stopped at lambda" in w for w in out), out
