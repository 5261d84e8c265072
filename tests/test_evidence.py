"""Free energies, their slopes, who leads, cross-tables and SMC warnings: the pure functions of
slt_relu.evidence and slt_relu.analysis against hand computations."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu import analysis, evidence


def test_free_energies_by_hand():
    """Two data sets x two runs, two phases: F = -log mean_r Z_r per data set, F_alpha = F - log mass_alpha,
    so mass_alpha = exp(F - F_alpha); errors across data sets and from the runs kept apart."""
    log_z = np.array([-10.0, -10.2, -12.0, -11.6])
    dataset = np.array([0, 0, 1, 1])
    labels = np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]])   # 4 particles per run
    pm = analysis.phase_masses(labels, ("a", "b"), dataset)
    fe = evidence.free_energies(log_z, dataset, pm)
    F = -np.array([np.log(np.mean(np.exp([-10.0, -10.2]))), np.log(np.mean(np.exp([-12.0, -11.6])))])
    np.testing.assert_allclose(fe.free_energy, F, rtol=1e-12)
    np.testing.assert_allclose(fe.log_evidence, -F, rtol=1e-12)
    mass = np.array([[0.625, 0.375], [0.125, 0.875]])                               # per data set
    np.testing.assert_allclose(fe.phase_free_energy, F[:, None] - np.log(mass), rtol=1e-12)
    np.testing.assert_allclose(np.exp(fe.free_energy[:, None] - fe.phase_free_energy), mass, rtol=1e-12)
    assert fe.free_energy_mean == pytest.approx(F.mean())
    assert fe.free_energy_se == pytest.approx(F.std(ddof=1) / np.sqrt(2))
    # Monte Carlo error from the runs: sqrt(sum_k var_k / R_k) / K with the runs' own -log Z
    assert fe.free_energy_mcse == pytest.approx(np.sqrt(np.var([10.0, 10.2], ddof=1) / 2
                                                        + np.var([12.0, 11.6], ddof=1) / 2) / 2)
    np.testing.assert_allclose(fe.relative_mean, -np.log(mass.mean(0)), rtol=1e-12)
    # a phase without particles has F_alpha = inf
    empty = analysis.phase_masses(np.zeros((4, 4), int), ("a", "b"), dataset)
    assert np.isinf(evidence.free_energies(log_z, dataset, empty).phase_free_energy[:, 1]).all()


def test_free_energy_slopes_recover_lambda():
    """F_alpha = n beta L_alpha + lambda_alpha log(n beta) + c_k exactly: the slope of F_alpha - n beta L_min
    against log(n beta) is lambda_alpha on every data set; with noise, its mean and standard error."""
    nb = np.array([1e3, 3e3, 1e4, 3e4, 1e5])
    lam = np.array([2.3, 2.85])
    L = np.array([[1.40, 1.4001], [1.42, 1.4203], [1.41, 1.4102]])                  # (K, P)
    c = np.array([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]])
    F = nb[:, None, None] * L + lam * np.log(nb)[:, None, None] + c                  # (B, K, P)
    slope, se, G = evidence.free_energy_slopes(nb, F, np.broadcast_to(L, F.shape))
    np.testing.assert_allclose(slope, lam, rtol=1e-9)
    np.testing.assert_allclose(se, 0.0, atol=1e-9)
    np.testing.assert_allclose(G, lam * np.log(nb)[:, None, None] + c, rtol=1e-9)
    noise = np.random.default_rng(0).normal(0, 0.2, F.shape)
    slope, se, _ = evidence.free_energy_slopes(nb, F + noise, np.broadcast_to(L, F.shape))
    assert np.all(np.abs(slope - lam) < 4 * se) and np.all(se > 0)


def test_lead_by_hand():
    sweep = {"truth.v": [1.0, 2.0]}
    rows = [{"values": {"truth.v": 1.0}, "mass_per_trial": {"a": [0.6, 0.7, 0.8], "b": [0.3, 0.2, 0.1]}},
            {"values": {"truth.v": 2.0}, "mass_per_trial": {"a": [0.4, 0.6, 0.5], "b": [0.5, 0.4, 0.5]}}]
    got = analysis.lead(sweep, rows, "a", "b")
    np.testing.assert_allclose(got["difference"], [0.5, 0.1 / 3], rtol=1e-12)        # (-0.1 + 0.2 + 0) / 3
    np.testing.assert_allclose(got["difference_se"][0], np.std([0.3, 0.5, 0.7], ddof=1) / np.sqrt(3))
    assert got["a_leads_at"] == [{"truth.v": 1.0}] and got["a_ever_leads"]        # 2.0: within two errors


def test_cross_table_rows_sum_to_the_rules_masses():
    codes = np.array([[0, 0, 1, 2], [1, 1, 1, 2]])
    labels = np.array([["x", "y", "x", "x"], ["y", "y", "z", "x"]], object)
    table = analysis.cross_table(codes, ("p", "q", "r"), labels, np.array([0, 1]))
    assert table == {"p": {"x": 0.125, "y": 0.125}, "q": {"x": 0.125, "y": 0.25, "z": 0.125}, "r": {"x": 0.25}}
    mass = analysis.phase_masses(codes, ("p", "q", "r"), np.array([0, 1])).mass
    np.testing.assert_allclose([sum(table[nm].values()) for nm in "pqr"], mass)


def test_smc_warnings_name_what_is_wrong():
    labels = np.zeros((2, 100), int)
    labels[0, :10] = 1                                   # phase b: 10 particles in run 0, none in run 1
    pm = analysis.phase_masses(labels, ("a", "b"), np.array([0, 0]))
    d = {"ess_min": 0.1, "accept_prob_min": 0.1, "final_lambda_min": 0.5}
    out = evidence.smc_warnings(d, "t = 1", pm, 100, np.array([-5.0, -7.0]), np.array([0, 0]), 0.5)
    text = "\n".join(out)
    for phrase in ("ESS collapsed to 0.10", "acceptance fell to 0.10", "stopped at lambda = 0.5",
                   "the mass of b rests on fewer than 20 of the 100 particles", "differ by 2.00 nats"):
        assert phrase in text, (phrase, out)
    fine = {"ess_min": 0.5, "accept_prob_min": 0.7, "final_lambda_min": 1.0}
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
    from slt_relu.smc import SMCSettings, run_smc

    s = SMCSettings(num_particles=256, num_mcmc_steps=2, num_leapfrog=4, max_stages=20)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    z0 = jax.random.normal(jax.random.PRNGKey(1), (2, 256, 2))
    t_max = (jnp.full(2, 20.0),)
    pm = analysis.phase_masses(np.zeros((2, 256), int), ("a",), np.array([0, 1]))
    fine = run_smc(keys, _defined, z0, t_max, s)
    d = evidence.smc_diagnostics(fine.stats, fine.grad_evals)
    assert abs(d["ess_min"] - s.target_ess) < 0.02 and d["final_lambda_min"] == 1.0
    assert evidence.smc_warnings(d, "x", pm, 256, fine.log_evidence, np.array([0, 1]), s.target_ess) == []
    stalled = run_smc(keys, _half_defined, z0, t_max, s)
    d = evidence.smc_diagnostics(stalled.stats, stalled.grad_evals)
    out = evidence.smc_warnings(d, "x", pm, 256, stalled.log_evidence, np.array([0, 1]), s.target_ess)
    assert d["final_lambda_min"] < 1.0 and any("stopped at lambda" in w for w in out), out
