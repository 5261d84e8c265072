"""R-hat, bulk ESS and MCSE against closed forms (Vehtari et al. 2021; AR(1) chains)."""
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


def test_average_ranks_and_rank_normalize_by_hand():
    np.testing.assert_array_equal(dg.average_ranks([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
    z = dg.rank_normalize(np.array([[0.0, 10.0], [5.0, 100.0]]))
    # ranks 1, 3, 2, 4 of N = 4 -> Phi^{-1}((r - 3/8) / 4.25)
    from statistics import NormalDist

    want = [[NormalDist().inv_cdf((r - 0.375) / 4.25) for r in row] for row in [[1, 3], [2, 4]]]
    np.testing.assert_allclose(z, want, rtol=1e-12)


def test_gelman_rubin_by_hand():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]])
    W = np.var([0, 1, 2, 3], ddof=1)                       # both chains: 5/3
    B_over_S = np.var([1.5, 2.5], ddof=1)                  # 0.5
    assert dg.gelman_rubin(x) == pytest.approx(np.sqrt((3 / 4 * W + B_over_S) / W))
    assert dg.gelman_rubin(np.ones((3, 10))) == 1.0


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


def _oracle_cases():
    rng = np.random.default_rng(7)
    drifting = rng.normal(size=(4, 600))
    drifting[1, 300:] += 0.8                               # one chain whose halves disagree
    return {
        "iid": rng.normal(size=(4, 500)),
        "ar1": ar1(rng, 0.9, 4, 500),
        "antithetic": ar1(rng, -0.7, 4, 400),
        "shifted": rng.normal(size=(4, 500)) + 0.5 * np.arange(4)[:, None],
        "drifting": drifting,
        "odd draws, 8 chains": ar1(rng, 0.5, 8, 301),
    }


@pytest.mark.parametrize("case", list(_oracle_cases()))
def test_diagnostics_equal_arviz_stats(case):
    """The oracle: arviz-stats's rank-normalised split R-hat, bulk and tail ESS, ESS, MCSE of the mean and
    nested R-hat (superchains of two chains) on the same arrays, to 1e-6."""
    azs = pytest.importorskip("arviz_stats")
    x = _oracle_cases()[case]
    superchains = np.arange(len(x)) // 2
    pairs = {
        "rhat": (dg.rhat(x), azs.rhat(x, method="rank")),
        "ess_bulk": (dg.ess_bulk(x), azs.ess(x, method="bulk")),
        "ess_tail": (dg.ess_tail(x), azs.ess(x, method="tail", prob=0.05)),
        "ess": (dg.ess(x), azs.ess(x, method="identity")),
        "mcse_mean": (dg.mcse_mean(x), azs.mcse(x, method="mean")),
        "rhat_nested": (dg.rhat_nested(x, superchains), azs.rhat_nested(x, superchain_ids=superchains)),
    }
    for name, (ours, theirs) in pairs.items():
        assert ours == pytest.approx(float(theirs), rel=1e-6), name


def test_nested_rhat_by_hand_and_what_it_sees():
    """nR-hat = sqrt(1 + B_nu / W_nu) (Margossian et al. 2024, eqs. 6-8) of the rank-normalised split chains
    (each chain's halves in its superchain), checked against the formula written out; many short chains of
    one posterior give nR-hat near 1, superchains stuck in different places do not."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(8, 40))
    ids = np.repeat(np.arange(4), 2)
    z = dg.rank_normalize(dg.split_chains(x))
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
