"""The exact blocked Gibbs sampler of deep linear networks (slt_relu.posterior.linear_gibbs): each layer's conditional
is the Gaussian the loss's Hessian and gradient define (autodiff, an independent computation), and the chains'
t E_t[L] matches closed forms (one layer: a Gaussian posterior) and a two-parameter quadrature within Monte Carlo
errors; bad arguments are refused in one line."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.posterior.linear_gibbs import layer_conditional, linear_gibbs_curve, linear_loss

jax.config.update("jax_enable_x64", True)


def _random_problem(widths, seed=0):
    rng = np.random.default_rng(seed)
    a, b = widths[0], widths[-1]
    X = rng.normal(size=(5 * a, a))
    Ws = tuple(jnp.asarray(rng.normal(size=(h1, h0))) for h0, h1 in zip(widths[:-1], widths[1:]))
    S, G, P0 = X.T @ X / len(X), rng.normal(size=(b, a)) / 3, rng.normal(size=(b, a))
    return Ws, tuple(map(jnp.asarray, (S, G, P0)))


@pytest.mark.parametrize("l", [0, 1, 2])
def test_each_layers_conditional_is_the_gaussian_of_the_losss_hessian_and_gradient(l):
    """-log p(W_l | rest) = t L + |W_l|^2 / (2 sigma^2) is quadratic in W_l: its precision is t Hess L + I / sigma^2
    and its mean solves precision @ mean = -t grad L(W_l = 0), both by autodiff here; the module's eigenbasis form
    must give the same operator and mean (rtol 1e-9: float64 eigendecompositions of 2-4 x 2-4 matrices)."""
    widths, t, sigma = (3, 4, 2, 2), 7.3, 0.8
    Ws, stats = _random_problem(widths)
    shape = Ws[l].shape

    def loss_of_layer(x):
        return linear_loss(Ws[:l] + (x.reshape(shape),) + Ws[l + 1:], stats)

    zero = jnp.zeros(math.prod(shape))
    precision = t * jax.hessian(loss_of_layer)(zero) + np.eye(zero.size) / sigma ** 2
    mean = np.linalg.solve(precision, -t * jax.grad(loss_of_layer)(zero)).reshape(shape)
    U, V, mean_tilde, prec_tilde = layer_conditional(Ws, l, t, stats, sigma)
    np.testing.assert_allclose(U @ mean_tilde @ V.T, mean, rtol=1e-9, atol=1e-12)
    X = np.random.default_rng(1).normal(size=shape)
    applied = U @ ((U.T @ X @ V) * prec_tilde) @ V.T
    np.testing.assert_allclose(applied, (precision @ X.ravel()).reshape(shape), rtol=1e-9, atol=1e-12)


def test_one_layer_gives_the_gaussian_posteriors_expected_loss():
    """L = 1 (widths (a, b)): the posterior of W given t is Gaussian, mean t P0 / (t + 1 / sigma^2), variance
    1 / (t + 1 / sigma^2) per entry, so E_t[K] = (|mean - P0|^2 + a b / (t + 1 / sigma^2)) / 2; each chain's mean over
    its sweeps (independent exact draws) within 4.5 standard errors of it at every t (6 temperatures)."""
    P0 = np.array([[0.5, -1.0, 0.3], [0.2, 0.0, 2.0]])
    sigma = 1.5
    curve = linear_gibbs_curve(jax.random.key(0), (3, 2), 1e3, decades=2.5, temperatures=6, chains=8, burn_in=0,
                               sweeps=100, prior_std=sigma, target=P0)
    t = curve.t[0]
    q = t + 1 / sigma ** 2
    exact = 0.5 * (np.sum(P0 ** 2) * (1 - t / q) ** 2 + 6 / q)
    mean, se = curve.mean_loss.mean(0), curve.mean_loss.std(0, ddof=1) / math.sqrt(8)
    assert np.all(np.abs(mean - exact) < 4.5 * se), (mean, exact, se)
    assert np.all(np.isnan(curve.free_energy)) and curve.grad_evals == 0


@pytest.mark.parametrize("with_data", [False, True])
def test_two_scalar_layers_match_the_quadrature(with_data):
    """widths (1, 1, 1): L(a, b) = S (ab - p0)^2 / 2 - G (ab - p0) (population: S = 1, G = 0), whose tempered
    posterior E_t[L] is a two-dimensional integral; the trapezoid rule on [-7, 7]^2 (801^2 points, the prior's
    tails beyond 7 sigma negligible) against 16 chains of 400 kept sweeps, within 4.5 standard errors at t = 3 and
    30 (the Gibbs chain's sweeps are correlated, so the errors are the chains' spread)."""
    p0, S, G = 0.6, (1.7 if with_data else 1.0), (0.25 if with_data else 0.0)
    run_data = (np.full((16, 1, 1), S), np.full((16, 1, 1), G), np.full((16, 1, 1), p0)) if with_data else None
    curve = linear_gibbs_curve(jax.random.key(3), (1, 1, 1), 30.0, decades=1.0, temperatures=2, chains=16,
                               burn_in=50, sweeps=400, target=None if with_data else [[p0]], run_data=run_data)
    x = np.linspace(-7, 7, 801)
    a, b = np.meshgrid(x, x, indexing="ij")
    loss = S * (a * b - p0) ** 2 / 2 - G * (a * b - p0)
    for g, t in enumerate(curve.t[0]):
        w = np.exp(-t * (loss - loss.min()) - (a ** 2 + b ** 2) / 2)
        exact = np.trapezoid(np.trapezoid(w * loss, x), x) / np.trapezoid(np.trapezoid(w, x), x)
        mean = curve.mean_loss[:, g].mean()
        se = curve.mean_loss[:, g].std(ddof=1) / 4
        assert abs(mean - exact) < 4.5 * se, (t, mean, exact, se)


@pytest.mark.parametrize("kwargs, match", [
    ({"widths": (3,)}, r"widths: expected \(H_0, ..., H_L\), L >= 1, integers in 1 .. 256"),
    ({"widths": (3, 0, 2)}, r"widths: expected"),
    ({"widths": (3, 300)}, r"widths: expected"),
    ({"decades": 8.0}, r"decades: expected a number in \(0, log10\(t_max\) = 8\)"),
    ({"chains": 1}, r"chains"),
    ({"burn_in": -1}, r"burn_in: expected a non-negative integer, got -1"),
    ({"target": np.zeros((3, 2))}, r"target: expected shape \(2, 3\) \(H_L, H_0\), got \(3, 2\)"),
    ({"run_data": (np.zeros((2, 3, 3)), np.zeros((2, 2, 3)), np.zeros((2, 2, 3)))},
     r"run_data: expected S \(4, 3, 3\), G and P0 \(4, 2, 3\) \(one data set per chain\)"),
    ({"run_data": (np.zeros((4, 3, 3)), np.zeros((4, 2, 3)), np.zeros((4, 2, 3))), "target": np.zeros((2, 3))},
     r"target, run_data: expected one of them"),
    ({"target": np.full((2, 3), np.nan)}, r"P0"),
])
def test_bad_arguments_are_refused_in_one_line(kwargs, match):
    args = {"widths": (3, 2, 2), "decades": 2.0, "chains": 4, "sweeps": 2, "burn_in": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        linear_gibbs_curve(jax.random.key(0), args.pop("widths"), 1e8, **args)


def test_one_layer_from_data_statistics_gives_its_gaussian_posteriors_expected_loss():
    """L = 1 with S not the identity: each row of W has precision t S + I / sigma^2 and the rows' mean
    M = t (P0 S + G) (t S + I / sigma^2)^(-1), so with D = M - P0 and Sigma the inverse precision
    E_t[L] = tr(D S D^T) / 2 + b tr(S Sigma) / 2 - tr(D G^T); the chains within 4.5 standard errors at every t (an
    orientation error in the eigenbases, U Z V where U Z V^T is meant, moves it)."""
    rng = np.random.default_rng(4)
    a, b, chains, sigma = 3, 2, 8, 1.3
    X = rng.normal(size=(40, a)) @ np.array([[1.0, 0.0, 0.0], [0.6, 0.5, 0.0], [0.0, -0.7, 1.4]])
    S, G, P0 = X.T @ X / 40, rng.normal(size=(b, a)) / 4, rng.normal(size=(b, a))
    run_data = tuple(np.broadcast_to(x, (chains,) + x.shape) for x in (S, G, P0))
    curve = linear_gibbs_curve(jax.random.key(1), (a, b), 100.0, decades=1.5, temperatures=4, chains=chains,
                               burn_in=0, sweeps=100, prior_std=sigma, run_data=run_data)
    for g, t in enumerate(curve.t[0]):
        cov = np.linalg.inv(t * S + np.eye(a) / sigma ** 2)
        D = t * (P0 @ S + G) @ cov - P0
        exact = 0.5 * np.trace(D @ S @ D.T) + 0.5 * b * np.trace(S @ cov) - np.trace(D @ G.T)
        mean, se = curve.mean_loss[:, g].mean(), curve.mean_loss[:, g].std(ddof=1) / math.sqrt(chains)
        assert abs(mean - exact) < 4.5 * se, (t, mean, exact, se)


def test_a_sweeps_first_layer_is_drawn_from_its_conditional():
    """One sweep from the same state under 4,000 keys: its first layer (drawn first, given the others) whitened by
    the conditional's autodiff precision and mean has covariance I within 0.12 (the sample covariance's entries
    have standard errors of about 0.016-0.022 at n = 4,000: 0.12 is about 5.5 of them) and mean 0 within 0.1; a
    non-square three-layer network, so that a transposed eigenbasis changes the draw's covariance."""
    widths, t, sigma = (3, 2, 4, 2), 5.0, 0.9
    Ws, stats = _random_problem(widths, seed=2)
    from slt_relu.posterior.linear_gibbs import gibbs_sweep

    draws = jax.vmap(lambda k: gibbs_sweep(k, Ws, t, stats, sigma)[0])(jax.random.split(jax.random.key(5), 4000))
    shape = Ws[0].shape

    def loss_of_layer(x):
        return linear_loss((x.reshape(shape),) + Ws[1:], stats)

    zero = jnp.zeros(math.prod(shape))
    precision = np.asarray(t * jax.hessian(loss_of_layer)(zero) + np.eye(zero.size) / sigma ** 2)
    mean = np.linalg.solve(precision, -t * np.asarray(jax.grad(loss_of_layer)(zero)))
    z = (np.asarray(draws).reshape(4000, -1) - mean) @ np.linalg.cholesky(precision)
    assert np.max(np.abs(z.mean(0))) < 0.1
    assert np.max(np.abs(np.cov(z.T) - np.eye(zero.size))) < 0.12


def test_draws_satisfy_the_per_layer_integration_by_parts_identity():
    """An exact identity of the target, independent of any closed form: with U = t K + |W|^2 / (2 sigma^2) and
    K = |W_L ... W_1|^2 / 2 (zero truth) homogeneous of degree 2 in each layer, integration by parts gives
    E[W_l . grad_(W_l) U] = D_l, i.e. E[2 t K + |W_l|^2 / sigma^2] = D_l (the layer's parameter count) for every
    layer.  Four chains of 1,500 sweeps (the first 500 dropped) on a 5-5-5-5 network at t = 1e3: each layer's
    chain means within 4.5 standard errors (their spread) of D_l = 25.  A sampler off its target in how it
    shares the scale between layers fails it."""
    from slt_relu.posterior.linear_gibbs import gibbs_sweep

    widths, t, sigma, chains = (5, 5, 5, 5), 1e3, 0.7, 4
    stats = (jnp.eye(5), jnp.zeros((5, 5)), jnp.zeros((5, 5)))

    def chain(key):
        k0, k1 = jax.random.split(key)
        Ws = tuple(sigma * jax.random.normal(k, (5, 5)) for k in jax.random.split(k0, 3))

        def step(W, k):
            W = gibbs_sweep(k, W, t, stats, sigma)
            return W, jnp.stack([2 * t * linear_loss(W, stats) + jnp.sum(w ** 2) / sigma ** 2 for w in W])

        return jax.lax.scan(step, Ws, jax.random.split(k1, 1500))[1][500:].mean(0)

    per_chain = np.asarray(jax.jit(lambda keys: jax.lax.map(chain, keys))(jax.random.split(jax.random.key(6), chains)))
    mean, se = per_chain.mean(0), per_chain.std(0, ddof=1) / math.sqrt(chains)
    assert np.all(np.abs(mean - 25) < 4.5 * se), (mean, se)


def test_a_t_max_past_float64s_resolution_is_refused():
    """Past t = 1e14 a conditional's mean in a flat direction is t times a rounding error (at 1e16 a chain of a
    rank-1 DLN read t E_t[K] = 3e80): refused in one line naming the bound."""
    with pytest.raises(ValueError, match=r"t_max: expected at most 1e\+14 \(beyond it float64's rounding"):
        linear_gibbs_curve(jax.random.key(0), (3, 2, 2), 1e16, decades=2.0, chains=2, sweeps=1, burn_in=0)
