"""R-hat, bulk ESS and MCSE (arviz-stats's numbers through slt_relu.diagnostics) against closed forms (Vehtari et al.
2021; AR(1) chains), by hand, and on NaN and constant draws."""
import warnings

import numpy as np
import pytest

from slt_relu import diagnostics as dg


def ar1(rng, rho, chains, draws):
    x = np.zeros((chains, draws))
    x[:, 0] = rng.normal(size=chains)
    eps = rng.normal(size=(chains, draws)) * np.sqrt(1 - rho**2)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + eps[:, t]
    return x


def test_gelman_rubin_by_hand():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]])
    W = np.var([0, 1, 2, 3], ddof=1)                       # both chains: 5/3
    B_over_S = np.var([1.5, 2.5], ddof=1)                  # 0.5
    assert dg.gelman_rubin(x) == pytest.approx(np.sqrt((3 / 4 * W + B_over_S) / W))
    assert np.isnan(dg.gelman_rubin(np.ones((3, 10))))                 # W = B = 0: undefined, as ArviZ's
    assert dg.gelman_rubin(np.arange(3.0)[:, None] + np.zeros((3, 10))) == np.inf   # W = 0 < B


def test_iid_gaussian_rhat_one_and_ess_near_draws():
    x = np.random.default_rng(0).normal(size=(4, 1000))
    assert abs(dg.rhat(x) - 1) < 0.01
    assert 0.85 * 4000 < dg.ess_bulk(x) < 1.15 * 4000
    assert dg.mcse_mean(x) == pytest.approx(np.std(x) / np.sqrt(4000), rel=0.1)


def test_ar1_ess_matches_closed_form():
    rho = 0.8
    x = ar1(np.random.default_rng(1), rho, 4, 5000)
    want = x.size * (1 - rho) / (1 + rho)                  # integrated autocorrelation time (1+rho)/(1-rho)
    assert dg.ess(x) == pytest.approx(want, rel=0.2)
    assert dg.ess_bulk(x) == pytest.approx(want, rel=0.2)
    assert dg.mcse_mean(x) == pytest.approx(1 / np.sqrt(want), rel=0.15)


def test_rhat_flags_disagreeing_and_drifting_chains():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 500))
    x[0] += 1.0
    assert dg.rhat(x) > 1.1
    drift = rng.normal(size=(1, 1000))
    drift[0, 500:] += 1.0                                  # one chain whose halves disagree: split R-hat sees it
    assert dg.rhat(drift) > 1.1
    scale = rng.normal(size=(4, 500))
    scale[0] *= 3.0                                        # same mean, different spread: the folded R-hat sees it
    assert dg.rhat(scale) > 1.05


def test_grouped_takes_the_worst_group_and_never_pools():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(2, 500))
    b = rng.normal(size=(2, 500)) + 10.0                   # another data set, another posterior
    x = np.concatenate([a, b])
    groups = np.array([0, 0, 1, 1])
    assert dg.grouped(dg.rhat, x, groups) < 1.02           # pooled, R-hat would be huge
    assert dg.rhat(x) > 1.5                                # rank-normalised, so bounded, yet far above 1
    assert dg.grouped(dg.ess_bulk, x, groups, worst=min) == pytest.approx(min(dg.ess_bulk(a), dg.ess_bulk(b)))


def test_bad_shapes():
    with pytest.raises(ValueError, match="x: expected draws of shape"):
        dg.rhat(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="at least 4 draws"):
        dg.ess(np.zeros((2, 3)))


def test_nested_rhat_by_hand_and_what_it_sees():
    """nR-hat = sqrt(1 + B_nu / W_nu) (Margossian et al. 2024, eqs. 6-8) of the rank-normalised split chains
    (each chain's halves in its superchain), checked against the formula written out; many short chains of
    one posterior give nR-hat near 1, superchains stuck in different places do not."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(8, 40))
    ids = np.repeat(np.arange(4), 2)
    from scipy.stats import norm, rankdata

    halves = np.concatenate([x[:, :20], x[:, 20:]])        # split chains
    z = norm.ppf((rankdata(halves).reshape(halves.shape) - 0.375) / (halves.size + 0.25))   # rank-normalised
    half_ids = np.concatenate([ids, ids])
    means, variances = z.mean(1), z.var(1, ddof=1)
    sup = [means[half_ids == k].mean() for k in range(4)]
    W = np.mean([means[half_ids == k].var(ddof=1) + variances[half_ids == k].mean() for k in range(4)])
    bulk = np.sqrt(1 + np.var(sup, ddof=1) / W)
    assert dg.rhat_nested(x, ids) >= bulk - 1e-12
    short = rng.normal(size=(256, 10))                     # 16 superchains of 16 chains, 10 draws each
    superchains = np.arange(256) // 16
    assert dg.rhat_nested(short, superchains) < 1.01      # about sqrt(1 + 1 / (16 x 10))
    stuck = short + 2.0 * (superchains % 2)[:, None]      # half the superchains in another mode
    assert dg.rhat_nested(stuck, superchains) > 1.2
    with pytest.raises(ValueError, match="superchains: expected at least two superchains of equal size"):
        dg.rhat_nested(x, [0, 0, 0, 1, 1, 1, 1, 1])


def _undefined_cases():
    rng = np.random.default_rng(9)
    one_nan = rng.normal(size=(4, 100))
    one_nan[1, 37] = np.nan
    odd_middle = rng.normal(size=(4, 101))
    odd_middle[2, 50] = np.nan                             # the middle draw split_chains drops
    return {"NaN in one chain": one_nan, "NaN in a dropped middle draw": odd_middle,
            "all NaN": np.full((4, 100), np.nan), "constant": np.full((4, 100), 0.3)}


def _ours(x):
    superchains = np.arange(len(x)) // 2
    return {"rhat": dg.rhat(x), "gelman_rubin": dg.gelman_rubin(x), "ess_bulk": dg.ess_bulk(x),
            "ess_tail": dg.ess_tail(x), "ess": dg.ess(x), "ess_mean": dg.ess_mean(x), "mcse_mean": dg.mcse_mean(x),
            "rhat_nested": dg.rhat_nested(x, superchains)}


@pytest.mark.parametrize("case", list(_undefined_cases()))
def test_nan_and_constant_draws_are_undefined_or_exact(case):
    """Draws holding a NaN (anywhere, also where splitting an odd chain drops the middle draw): every
    diagnostic NaN; constant draws: R-hat (classic, split and rank, nested) NaN (0 / 0), ESS the number of
    draws and MCSE 0 (up to rounding), without a warning."""
    x = _undefined_cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = _ours(x)
    for name, value in values.items():
        if case == "constant" and name.startswith("ess"):
            assert value == x.size, name
        elif case == "constant" and name == "mcse_mean":
            assert value == pytest.approx(0.0, abs=1e-15), name          # sd 0 up to rounding
        else:
            assert np.isnan(value), (name, value)


def test_grouped_is_nan_when_any_group_is_nan_wherever_it_is():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(4, 200))
    x[2, 5] = np.nan
    for groups in (np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0])):      # the NaN group last, then first
        assert np.isnan(dg.grouped(dg.rhat, x, groups))
        assert np.isnan(dg.grouped(dg.ess_bulk, x, groups, worst=min))


def test_ess_tail_prob_must_be_a_probability():
    with pytest.raises(ValueError, match="prob: expected a number in"):
        dg.ess_tail(np.zeros((2, 10)), prob=1.5)


def test_nan_diagnostics_warn_as_undefined():
    """A check written ``rhat > 1.05`` is False for NaN: the warnings say NaN / undefined instead of passing."""
    from slt_relu.posterior import evidence, masses as analysis

    nan = float("nan")
    chains = lambda rhat, ess, nested: analysis.ChainDiagnostics(rhat, ess, ess, 1.0, nested, *(None,) * 7, 100)
    out = analysis.sampler_warnings(chains(nan, nan, nan), "t = 1", 100, None)
    assert len(out) == 3 and all("NaN: undefined" in line for line in out), out
    assert analysis.sampler_warnings(chains(1.0, 400.0, 1.0), "t = 1", 100, None) == []
    loss = np.random.default_rng(11).normal(size=(4, 50))
    loss[0] = 2.0
    loss[1, 3] = np.nan
    diag = analysis.chain_diagnostics(loss, np.array([0, 0, 1, 1]), loss[..., None], None, np.ones(4))
    assert np.isnan(diag.rhat_loss) and np.isnan(diag.ess_bulk_loss)
    assert any("R-hat of L_n is NaN" in line for line in analysis.sampler_warnings(diag, "t", 200, None))
    pm = analysis.phase_masses(np.tile(np.arange(100) % 2, (2, 1)), ("a", "b"), np.array([0, 0]))
    smc = evidence.SMCDiagnostics(np.array([3, 3]), nan, 0.7, 0.7, 1.0, 1000)
    out = evidence.smc_warnings(smc, "t = 1", pm, 100, np.array([-5.0, -5.1]), np.array([0, 0]), 0.5)
    assert any("ESS of a stage's weights is NaN" in line for line in out), out


def test_chain_diagnostics_hold_the_samplers_statistics():
    """A point's chains' diagnostics: the sampler's statistics summed and averaged by hand; to_dataset holds every
    one that is not None, the step sizes along ``run``."""
    from slt_relu.posterior import masses
    from slt_relu.sampling import NUTSInfo

    rng = np.random.default_rng(0)
    loss = rng.normal(size=(4, 50))
    steps = np.full((4, 50), 7)
    steps[0, :5] = 1023
    info = NUTSInfo(num_steps=steps, tree_depth=None, accept_prob=np.full((4, 50), 0.8), diverging=steps == 1023,
                    energy=None, step_size=np.array([0.1, 0.2, 0.3, 0.4]), inverse_mass_matrix=None,
                    warmup_divergences=np.array([1, 0, 0, 2]))
    d = masses.chain_diagnostics(loss, np.array([0, 0, 1, 1]), loss[..., None], info, np.full(4, 100), max_steps=1023)
    assert (d.divergences, d.warmup_divergences, d.grad_evals) == (5, 3, 400)
    assert d.max_tree_depth_fraction == 5 / 200 and d.steps_per_draw_mean == pytest.approx((5 * 1023 + 195 * 7) / 200)
    assert d.symmetry_accept_mean is None and d.rhat_nested_loss is not None and d.accept_prob_mean == 0.8
    ds = d.to_dataset()
    assert set(ds.data_vars) == {k for k, v in d._asdict().items() if v is not None}
    assert ds["step_size"].dims == ("run",)
    for name, v in d._asdict().items():
        if v is not None:
            np.testing.assert_array_equal(ds[name].values, v, err_msg=name)
    bare = masses.chain_diagnostics(loss, np.arange(4), loss[..., None], None, np.full(4, 100))
    assert bare.rhat_nested_loss is None and bare.step_size is None and "divergences" not in bare.to_dataset()


def test_smc_diagnostics_read_only_the_stages_each_run_took():
    """Run 0 took 2 stages, run 1 three: the entries past a run's stages (0 in SMCInfo) are not read; to_dataset holds
    every diagnostic, the stages along ``run``."""
    from slt_relu.posterior import evidence
    from slt_relu.sampling import SMCInfo

    info = SMCInfo(num_stages=np.array([2, 3]), final_lambda=np.array([1.0, 0.5]), lambda_=None,
                   ess=np.array([[0.6, 0.4, 0.0], [0.5, 0.7, 0.9]]),
                   accept_prob=np.array([[0.8, 0.6, 0.0], [0.9, 0.3, 0.7]]), step_size=None,
                   symmetry_accept=np.array([[0.5, 0.5, 0.0], [0.2, 0.2, 0.2]]), log_evidence=None, mean_slope=None,
                   prior_mean_slope=None)
    d = evidence.smc_diagnostics(info, np.array([100, 200]), grad_evals_replaced=50.0)
    assert (d.ess_min, d.accept_prob_min, d.final_lambda_min) == (0.4, 0.3, 0.5)
    assert d.accept_prob_mean == pytest.approx(3.3 / 5) and d.symmetry_accept_mean == pytest.approx(1.6 / 5)
    assert d.grad_evals == 350 and d.grad_evals_replaced == 50
    ds = d.to_dataset()
    assert ds["stages"].dims == ("run",) and set(ds.data_vars) == set(d._fields)
    for name, v in d._asdict().items():
        np.testing.assert_array_equal(ds[name].values, v, err_msg=name)
    assert evidence.smc_diagnostics(info._replace(symmetry_accept=None), np.array([1, 2])).grad_evals_replaced is None


def test_llc_warns_when_the_loss_traces_give_a_nan_rhat():
    """A constant loss: every SGLD loss equals L(w*), split R-hat is 0 / 0 = NaN, and the estimate says so."""
    import jax
    import jax.numpy as jnp

    from slt_relu.posterior.llc import LLCSettings, estimate_llc

    flat = lambda w, d: 0.0 * jnp.sum(w) + jnp.mean(d)
    est = estimate_llc(jax.random.PRNGKey(0), flat, jnp.ones(2), jnp.zeros(5),
                       LLCSettings(num_chains=2, num_steps=40, num_burnin=8, step_size=1e-3))
    assert np.isnan(est.details.rhat)
    assert any("split R-hat of the loss traces is NaN" in w for w in est.warnings), est.warnings


def test_one_chain_rhat_from_its_halves():
    """arviz-stats leaves R-hat of one chain undefined; here it is the split R-hat of its two halves (Stan's),
    checked against the formula written out on the rank-normalised halves (scipy's ranks); it sees a chain
    whose second half moved."""
    from scipy.stats import norm, rankdata

    rng = np.random.default_rng(11)
    x = rng.normal(size=(1, 400))
    halves = np.concatenate([x[:, :200], x[:, 200:]])

    def gr(z):
        W = z.var(1, ddof=1).mean()
        return np.sqrt((199 / 200 * W + z.mean(1).var(ddof=1)) / W)

    def rn(v):
        return norm.ppf((rankdata(v).reshape(v.shape) - 0.375) / (v.size + 0.25))

    want = max(gr(rn(halves)), gr(rn(np.abs(halves - np.median(halves)))))
    assert dg.rhat(x) == pytest.approx(want, rel=1e-12)
    x[0, 200:] += 1.0
    assert dg.rhat(x) > 1.1
