"""The local posterior's observables (slt_relu.posterior.observables) against closed forms.

The reference posterior is conjugate: Bayesian linear regression y_k = <x_k, w> + sigma eps_k with a
N(0, s0^2 I) prior, tempered at beta, whose posterior is N(mu, Sigma),

    Lambda = I / s0^2 + beta X^T X / sigma^2,   Sigma = Lambda^-1,   mu = Sigma beta X^T y / sigma^2,

drawn exactly with jax.random.  The per-sample loss ell_k(w) = (y_k - <x_k, w>)^2 / (2 sigma^2) + const
is quadratic in u = w - mu ~ N(0, Sigma): with r_k = y_k - <x_k, mu> and s_kl = x_k^T Sigma x_l,
Gaussian quadratic-form moments (odd moments vanish, Cov((a.u)^2, (b.u)^2) = 2 (a^T Sigma b)^2) give

    Cov(ell_k, ell_l) = (4 r_k r_l s_kl + 2 s_kl^2) / (4 sigma^4).

The susceptibility's exact value differentiates the closed-form posterior mean of the reweighted
posterior (X^T X -> X^T X + eps X_A^T X_A, X^T y -> X^T y + eps X_A^T y_A) by central differences.

Tolerances: estimates within K = 6 jackknife standard errors: the se has C - 1 = 31 degrees of freedom,
the t quantile for a two-sided false alarm of 1e-4 spread over ~40 comparisons is 5.75.  The standard
errors' calibration: over R independent repetitions, mean(se^2) / var(estimate) within 0.3 of 1 (its
sampling sd ~0.075 at R = 400, C = 8: a 4-sd band).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from slt_relu.network import from_flat, init_params, to_flat
from slt_relu.posterior.observables import bayesian_influence, per_sample_losses, susceptibility

K = 6.0
SIGMA, S0, BETA = 0.8, 1.0, 0.5


class Conjugate:
    """The tempered conjugate linear-regression posterior of a small fixed data set."""

    def __init__(self, n=5, d=2, seed=0):
        rng = np.random.default_rng(seed)
        self.X = rng.normal(size=(n, d))
        self.y = self.X @ np.array([0.7, -0.4][:d]) + SIGMA * rng.normal(size=n)
        self.n, self.d = n, d
        self.mu, self.Sigma = self.posterior(0.0, np.zeros(n, bool))

    def posterior(self, eps, in_a):
        """(mu, Sigma) with the samples in_a (n,) bool counted 1 + eps times."""
        wt = 1.0 + eps * in_a
        Lam = np.eye(self.d) / S0**2 + BETA * (self.X.T * wt) @ self.X / SIGMA**2
        Sigma = np.linalg.inv(Lam)
        return Sigma @ (BETA * (self.X.T * wt) @ self.y / SIGMA**2), Sigma

    def draws(self, key, C, S):
        z = np.asarray(jax.random.normal(key, (C, S, self.d), jnp.float64))
        return self.mu + z @ np.linalg.cholesky(self.Sigma).T

    def losses(self, w):
        """(C, S, n) ell_k at draws w (C, S, d)."""
        return (self.y - w @ self.X.T) ** 2 / (2 * SIGMA**2) + math.log(SIGMA * math.sqrt(2 * math.pi))

    def loss_cov(self):
        r = self.y - self.X @ self.mu
        s = self.X @ self.Sigma @ self.X.T
        return (4 * np.outer(r, r) * s + 2 * s**2) / (4 * SIGMA**4)

    def threshold(self):
        return self.mu[0] + 0.3 * math.sqrt(self.Sigma[0, 0])

    def observables(self, w):
        """(C, S, 2): w_0 and the indicator 1[w_0 > mu_0 + 0.3 sd] (a phase-like 0/1 observable)."""
        return np.stack([w[..., 0], (w[..., 0] > self.threshold()).astype(float)], -1)

    def exact_chi(self, groups, h=1e-5):
        """(G, 2) d/d eps of E[w_0] and P(w_0 > c) under reweighting of each group, central differences."""
        c = self.threshold()

        def means(eps, in_a):
            mu, Sigma = self.posterior(eps, in_a)
            return np.array([mu[0], norm.sf((c - mu[0]) / math.sqrt(Sigma[0, 0]))])
        return np.array([(means(h, groups == g) - means(-h, groups == g)) / (2 * h) for g in np.unique(groups)])


GROUPS = np.array([0, 1, 1, 2, 2])


@pytest.fixture(scope="module")
def model():
    return Conjugate()


@pytest.fixture(scope="module")
def draws(model):
    return model.draws(jax.random.PRNGKey(1), 32, 250)


def test_influence_matches_gaussian_quadratic_form_moments(model, draws):
    L = model.losses(draws)
    ds = bayesian_influence(L)
    exact = model.loss_cov()
    z = (ds.cov.values - exact) / ds.cov_se.values
    assert np.abs(z).max() < K, z
    sd = np.sqrt(np.diag(exact))
    exact_corr = exact / np.outer(sd, sd)
    off = ~np.eye(model.n, dtype=bool)
    zc = (ds.corr.values - exact_corr)[off] / ds.corr_se.values[off]
    assert np.abs(zc).max() < K, zc
    np.testing.assert_allclose(np.diag(ds.corr.values), 1.0, rtol=1e-12)
    # the errors are a few per cent of the values here: the test can fail
    assert np.median(ds.cov_se.values / np.abs(exact)) < 0.1


def test_susceptibility_matches_the_reweighted_closed_form(model, draws):
    L = model.losses(draws)
    n_beta = model.n * BETA
    ds = susceptibility(model.observables(draws), L, GROUPS, n_beta, observable_names=["w0", "indicator"])
    exact = model.exact_chi(GROUPS)
    z = (ds.chi.values - exact) / ds.chi_se.values
    assert np.abs(z).max() < K, z
    assert np.all(np.abs(exact) > 3 * ds.chi_se.values)          # every value is resolved: a real check
    # over a partition the groups add up to the whole data's response, -n beta Cov(O, L_n)
    whole = susceptibility(model.observables(draws), L, np.zeros(model.n, int), n_beta)
    np.testing.assert_allclose(ds.chi.sum("group").values, whole.chi.values[0], rtol=1e-10)
    # and a one-sample group's chi is -beta Cov(O, ell_k), the influence's column for O = ell_l
    single = susceptibility(L[..., 4], L, np.arange(model.n), n_beta)
    inf = bayesian_influence(L, index_b=[4])
    np.testing.assert_allclose(single.chi.values, -BETA * inf.cov.values[:, 0], rtol=1e-10)


def test_standard_errors_are_calibrated_over_repetitions(model):
    """mean(se^2) / var(estimate) over R = 400 independent repetitions of C = 8 chains x 40 draws."""
    R, C, S = 400, 8, 40
    keys = jax.random.split(jax.random.PRNGKey(7), R)
    cov, cov_se, corr, corr_se, chi, chi_se = ([] for _ in range(6))
    for k in keys:
        w = model.draws(k, C, S)
        L = model.losses(w)
        b = bayesian_influence(L, index_a=[0], index_b=[1, 3])
        cov.append(b.cov.values[0])
        cov_se.append(b.cov_se.values[0])
        corr.append(b.corr.values[0])
        corr_se.append(b.corr_se.values[0])
        s = susceptibility(model.observables(w)[..., 1], L, GROUPS, model.n * BETA)
        chi.append(s.chi.values)
        chi_se.append(s.chi_se.values)
    for est, se in ((cov, cov_se), (corr, corr_se), (chi, chi_se)):
        ratio = np.mean(np.square(se), 0) / np.var(est, 0, ddof=1)
        assert np.all(np.abs(ratio - 1) < 0.3), ratio
    z = (np.array(chi) - model.exact_chi(GROUPS)[:, 1]) / np.array(chi_se)
    assert abs(np.mean(z)) < 0.25 and 0.8 < np.std(z) < 1.4          # t_7 z-scores: sd sqrt(7/5) = 1.18


def test_shapes_dims_and_index_sets():
    rng = np.random.default_rng(0)
    L = rng.normal(size=(3, 20, 7))
    ds = bayesian_influence(L, index_a=[1, 4], index_b=np.arange(7))
    assert ds.cov.dims == ("sample_a", "sample_b") and ds.cov.shape == (2, 7)
    assert set(ds.data_vars) == {"cov", "cov_se", "corr", "corr_se"}
    assert ds.sample_a.values.tolist() == [1, 4] and ds.attrs["chains"] == 3
    full = bayesian_influence(L)
    np.testing.assert_allclose(full.cov.values[[1, 4]], ds.cov.values, rtol=1e-12)
    np.testing.assert_allclose(full.corr_se.values[[1, 4]], ds.corr_se.values, rtol=1e-12)
    np.testing.assert_allclose(full.cov.values, full.cov.values.T, rtol=1e-12)
    # pooled plug-in covariance, equal chain weights by default
    np.testing.assert_allclose(full.cov.values, np.cov(L.reshape(-1, 7).T, bias=True), rtol=1e-10)
    np.testing.assert_allclose(bayesian_influence(L, weights=[2, 2, 2]).cov.values, full.cov.values, rtol=1e-12)
    o = rng.normal(size=(3, 20, 2))
    s = susceptibility(o, L, np.array(list("aabbbcc")), 10.0, observable_names=["x", "y"])
    assert s.chi.dims == ("group", "observable") and s.chi.shape == (3, 2)
    assert s.group.values.tolist() == ["a", "b", "c"] and s.group_size.values.tolist() == [2, 3, 2]
    assert s.observable.values.tolist() == ["x", "y"]
    s1 = susceptibility(o[..., 0], L, np.arange(7) % 2, 10.0)
    assert s1.chi.dims == ("group",) and s1.observable_mean.shape == ()
    one = bayesian_influence(L[:1])
    assert np.isnan(one.cov_se.values).all() and np.isfinite(one.cov.values).all()


def test_weighted_chains_match_the_jackknife_by_hand():
    rng = np.random.default_rng(3)
    L = rng.normal(size=(4, 30, 3)) + np.arange(4)[:, None, None] * 0.3
    wts = np.array([0.1, 0.2, 0.3, 0.4])
    ds = bayesian_influence(L, weights=wts)

    def cov(Lc, wc):
        wc = wc / wc.sum()
        mu = np.einsum("c,cn->n", wc, Lc.mean(1))
        Z = Lc - mu
        return np.einsum("c,csa,csb->ab", wc, Z, Z) / Lc.shape[1]

    theta = cov(L, wts)
    np.testing.assert_allclose(ds.cov.values, theta, rtol=1e-12)
    loo = [cov(np.delete(L, c, 0), np.delete(wts, c)) for c in range(4)]
    se = np.sqrt(3 / 4 * sum((loo[c] - np.mean(loo, 0)) ** 2 for c in range(4)))
    np.testing.assert_allclose(ds.cov_se.values, se, rtol=1e-10)


def test_nan_in_nan_out():
    rng = np.random.default_rng(1)
    L = rng.normal(size=(4, 10, 5))
    L[2, 3, 1] = np.nan
    ds = bayesian_influence(L)
    for v in ("cov", "cov_se", "corr", "corr_se"):
        bad = np.isnan(ds[v].values)
        assert bad[1].all() and bad[:, 1].all()
        assert not np.delete(np.delete(bad, 1, 0), 1, 1).any()
    assert np.isnan(bayesian_influence(rng.normal(size=(4, 10, 5)), weights=[1, np.nan, 1, 1]).cov.values).all()
    o = rng.normal(size=(4, 10, 2))
    o[0, 0, 1] = np.nan
    s = susceptibility(o, L, np.array([0, 1, 1, 2, 2]), 5.0)
    chi = s.chi.values
    assert np.isnan(chi[:, 1]).all()                          # the NaN observable
    assert np.isnan(chi[1, 0]) and np.isfinite(chi[[0, 2], 0]).all()   # the group holding the NaN loss
    assert np.isnan(s.chi_se.values[1, 0]) and np.isfinite(s.chi_se.values[[0, 2], 0]).all()


@pytest.mark.parametrize("call,match", [
    (lambda L: bayesian_influence(L[0]), "losses"),
    (lambda L: bayesian_influence(L[:, :1]), "losses"),
    (lambda L: bayesian_influence(L.astype(complex)), "losses"),
    (lambda L: bayesian_influence(L, index_a=[0, 9]), "index_a"),
    (lambda L: bayesian_influence(L, index_b=[[0]]), "index_b"),
    (lambda L: bayesian_influence(L, index_b=[0.5]), "index_b"),
    (lambda L: bayesian_influence(L, weights=[1, 1]), "weights"),
    (lambda L: bayesian_influence(L, weights=[1, -1, 1]), "weights"),
    (lambda L: bayesian_influence(L, weights=[0, 0, 0]), "weights"),
    (lambda L: susceptibility(np.zeros((3, 9)), L, np.zeros(5), 1.0), "observable"),
    (lambda L: susceptibility(np.zeros((3, 10, 2, 2)), L, np.zeros(5), 1.0), "observable"),
    (lambda L: susceptibility(np.zeros((3, 10)), L, np.zeros(4), 1.0), "groups"),
    (lambda L: susceptibility(np.zeros((3, 10)), L, np.zeros(5), -1.0), "n_beta"),
    (lambda L: susceptibility(np.zeros((3, 10)), L, np.zeros(5), [1.0, 2.0]), "n_beta"),
    (lambda L: susceptibility(np.zeros((3, 10, 2)), L, np.zeros(5), 1.0, observable_names=["a"]),
     "observable_names"),
])
def test_bad_input_is_refused_in_one_line(call, match):
    L = np.zeros((3, 10, 5))
    with pytest.raises(ValueError, match=f"^{match}: ") as err:
        call(L)
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------------------
# per-sample losses of the two-layer network


def test_per_sample_losses_average_to_the_empirical_loss():
    from slt_relu import empirical_loss

    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    batch = jax.vmap(lambda k: init_params(k, 3, 2))(keys)
    params = jax.tree.map(lambda a: a.reshape((2, 3) + a.shape[1:]), batch)        # (C, S) = (2, 3)
    x = jax.random.uniform(jax.random.PRNGKey(1), (40, 2), minval=-1, maxval=1)
    y = jnp.sin(3 * x[:, 0]) + 0.1 * x[:, 1]
    ell = per_sample_losses(params, x, y, sigma=0.7)
    assert ell.shape == (2, 3, 40)
    want = np.array([[empirical_loss(jax.tree.map(lambda a: a[c, s], params), x, y, 0.7) for s in range(3)]
                     for c in range(2)])
    np.testing.assert_allclose(ell.mean(-1), want, rtol=1e-12)
    flat = jax.vmap(jax.vmap(to_flat))(params)
    np.testing.assert_allclose(per_sample_losses(flat, x, y, sigma=0.7, chunk=1), ell, rtol=1e-12)
    one = per_sample_losses(jax.tree.map(lambda a: a[0, 0], params), x, y, sigma=0.7)
    np.testing.assert_allclose(one, ell[0, 0], rtol=1e-12)
    nan = per_sample_losses(flat.at[1, 2, 0].set(jnp.nan), x, y, sigma=0.7)
    assert np.isnan(nan[1, 2]).all() and np.isfinite(np.delete(nan.reshape(6, 40), 5, 0)).all()


@pytest.mark.parametrize("kwargs,match", [
    ({"x": np.zeros((5, 3))}, "params"),
    ({"x": np.zeros(5)}, "x"),
    ({"y": np.full(5, np.nan)}, "y"),
    ({"y": np.zeros(4)}, "y"),
    ({"sigma": 0.0}, "sigma"),
    ({"chunk": 0}, "chunk"),
    ({"params": np.zeros((2, 8))}, "params"),
    ({"params": np.zeros((2, 9), int)}, "params"),
])
def test_per_sample_losses_refuse_bad_input(kwargs, match):
    args = {"params": np.zeros((2, 9)), "x": np.zeros((5, 2)), "y": np.zeros(5), **kwargs}
    with pytest.raises(ValueError, match=f"^{match}: ") as err:
        per_sample_losses(args.pop("params"), args.pop("x"), args.pop("y"), **args)
    assert "\n" not in str(err.value)


def test_fed_like_a_samplers_draws():
    """Draws shaped like PosteriorSamples.params (C, S) of DSLT4 PT1's model: the per-sample losses average to
    the L_n of the tempered target that sample_posterior samples (its ``losses_at``; running a sampler here would
    compile for 20 s), and both observables take them."""
    from slt_relu import truths
    from slt_relu.posterior import tempered_target

    ex = truths.get("dslt4_pt1", t=1.2)
    x = jax.random.uniform(jax.random.PRNGKey(0), (30, 2), minval=-1, maxval=1)
    y = jnp.sin(2 * x[:, 1])
    flat = to_flat(ex.truth) + 0.3 * jax.random.normal(jax.random.PRNGKey(1), (2, 8, 9))     # (C, S, D)
    params = jax.vmap(jax.vmap(lambda f: from_flat(f, 2, 2)))(flat)
    ell = per_sample_losses(params, x, y)
    assert ell.shape == (2, 8, 30)
    stored = tempered_target(ex.model).losses_at(flat, (x, y))       # N(0, 1) priors: z is the flat parameter
    np.testing.assert_allclose(ell.mean(-1), stored, rtol=1e-10)
    assert bayesian_influence(ell, index_a=[0, 1]).cov.shape == (2, 30)
    s = susceptibility(np.asarray(params.c), ell, np.arange(30) % 3, 10.0)
    assert s.chi.shape == (3,) and np.isfinite(s.chi.values).all()

