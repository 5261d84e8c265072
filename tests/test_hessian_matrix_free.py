"""Matrix-free Hessian analysis (slt_relu.hessian): Hessian-vector products, Lanczos's top eigenvalues,
Hutchinson's trace and stochastic Lanczos quadrature, each against an independent computation: the dense
``hessian()`` and NumPy's eigh on a small ReLU MLP's loss, and closed forms on quadratic losses
0.5 w^T A w with A = Q diag(lams) Q^T of known spectrum.  float64 throughout (tests/conftest.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.hessian import (density_on_grid, hessian, hessian_vector_product, spectral_density,
                              top_eigenvalues, trace)


def quadratic(w, A):
    """L(w) = 0.5 w^T A w: its Hessian is A, at every w (module level: hashable, one compiled program)."""
    return 0.5 * w @ (A @ w)


def with_spectrum(lams, seed):
    """A = Q diag(lams) Q^T, Q Haar-random (QR of a Gaussian matrix, signs fixed), and Q."""
    G = np.random.default_rng(seed).standard_normal((len(lams), len(lams)))
    Q, R = np.linalg.qr(G)
    Q = Q * np.sign(np.diag(R))
    return (Q * np.asarray(lams)) @ Q.T, Q


def quadratic_point(A):
    """A point (its value is irrelevant to the Hessian) and the data of the quadratic loss."""
    return jnp.linspace(-1.0, 1.0, A.shape[0]), jnp.asarray(A)


@pytest.fixture(scope="module")
def mlp_problem():
    """A random ReLU MLP (3, 8, 6, 1), D = 93, its Gaussian loss on 40 points, and the dense Hessian."""
    model = S.models.mlp((3, 8, 6, 1))
    params = model.init(jax.random.PRNGKey(1))
    x = jax.random.normal(jax.random.PRNGKey(2), (40, 3))
    data = (x, jnp.sin(x[:, 0]))
    loss = S.GaussianLoss(model, 0.5)
    H = np.asarray(hessian(loss, params, data))
    return loss, params, data, H


def test_hvp_is_the_dense_hessian_times_v_jitted_and_vmapped(mlp_problem):
    loss, params, data, H = mlp_problem
    hvp = hessian_vector_product(loss, params, data)
    V = np.random.default_rng(0).standard_normal((5, H.shape[0]))
    # float64, two autodiff routes to the same second derivatives (jvp of grad vs jacfwd of jacrev):
    # they differ by rounding, ~1e-15 of |H| |v|; 1e-11 leaves room for D = 93 terms per entry
    atol = 1e-11 * np.linalg.norm(H, 2) * np.linalg.norm(V[0])
    np.testing.assert_allclose(hvp(V[0]), H @ V[0], rtol=0, atol=atol)
    np.testing.assert_allclose(jax.jit(hvp)(V[1]), H @ V[1], rtol=0, atol=atol)
    np.testing.assert_allclose(jax.vmap(hvp)(V), V @ H, rtol=0, atol=atol)


def test_top_eigenvalues_and_vectors_match_dense_eigh_on_an_mlp(mlp_problem):
    loss, params, data, H = mlp_problem
    lam, U = np.linalg.eigh(H)
    lam, U = lam[::-1], U[:, ::-1]
    scale = lam[0]
    values, vectors = top_eigenvalues(loss, params, data, 4, jax.random.PRNGKey(0), return_vectors=True)
    assert values.shape == (4,) and vectors.shape == (4, H.shape[0])
    # top four of this Hessian: 946, 205, 179, 141, next 84 -- relative gaps >= 0.04 of the spread, so with
    # m = 2k + 20 = 28 full-reorthogonalised steps the Kaniel-Paige bound puts the Ritz errors below 1e-20
    # of |H|; what remains is float64 rounding over D = 93 (measured 3e-16); 1e-10 leaves room for any BLAS
    np.testing.assert_allclose(values, lam[:4], rtol=0, atol=1e-10 * scale)
    # Ritz vectors: errors ~ rounding |H| / gap ~ 1e-14 at these gaps; unit rows
    np.testing.assert_allclose(np.abs(np.sum(vectors * U[:, :4].T, axis=1)), 1.0, atol=1e-8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-12)


def test_m_equal_to_d_gives_the_whole_spectrum_to_rounding(mlp_problem):
    loss, params, data, H = mlp_problem
    D = H.shape[0]
    # k = D: m = D steps, V an orthonormal basis of R^D, T similar to H: eigh of H to float64 rounding (1e-10 of
    # |H|: eigenvalues of two similar 93 x 93 matrices, each computed with ~D eps |H| error)
    values = top_eigenvalues(loss, params, data, D, jax.random.key(3))
    np.testing.assert_allclose(values, np.linalg.eigvalsh(H)[::-1], rtol=0, atol=1e-10 * np.abs(values).max())


def test_top_eigenvalues_of_a_quadratic_with_known_spectrum():
    rest = np.random.default_rng(1).uniform(-1.0, 1.0, 56)
    lams = np.concatenate([[10.0, 8.0, 6.0, 5.0], rest])
    A, Q = with_spectrum(lams, seed=2)
    w, data = quadratic_point(A)
    values, vectors = top_eigenvalues(quadratic, w, data, 3, jax.random.PRNGKey(4), return_vectors=True)
    # closed form: 10, 8, 6; gaps of 1 or more against a spread of 11 make Lanczos (m = 26) converge to
    # rounding (Kaniel-Paige bound < 1e-15), so 1e-11 of |A| is float64 rounding with room
    np.testing.assert_allclose(values, [10.0, 8.0, 6.0], rtol=0, atol=1e-11 * 10)
    np.testing.assert_allclose(np.abs(np.sum(vectors * Q[:, :3].T, axis=1)), 1.0, atol=1e-9)


def test_multiple_eigenvalues_need_the_restart_and_m_equal_to_d_finds_them_all():
    """A Krylov space from one vector sees each eigenvalue once: without restarting at beta = 0, k = D could not
    return multiplicities.  Closed form: the multiset lams, sorted descending."""
    lams = np.repeat([3.0, 1.0, 0.0, -2.0], [5, 10, 3, 7])
    A, _ = with_spectrum(lams, seed=5)
    w, data = quadratic_point(A)
    values = top_eigenvalues(quadratic, w, data, lams.size, jax.random.PRNGKey(6))
    # float64 rounding of 25 x 25 eigenproblems of norm 3 (Q built in float64): 1e-11 of |A|
    np.testing.assert_allclose(values, np.sort(lams)[::-1], rtol=0, atol=1e-11 * 3)


def test_a_krylov_space_that_closes_at_once_restarts_instead_of_dividing_by_zero():
    """By hand: A = c I (every v an eigenvector, beta_1 = 0 exactly) and A = 0 (H v = 0).  Every eigenvalue is c;
    a probe's first node is c with weight 1, the restarts' nodes weigh 0."""
    for c in (2.5, 0.0):
        w, data = quadratic_point(c * np.eye(7))
        values = top_eigenvalues(quadratic, w, data, 7, jax.random.PRNGKey(21))
        # alpha = c |v|^2 with |v| = 1 to rounding: float64 rounding of c, 1e-14 of it
        np.testing.assert_allclose(values, np.full(7, c), rtol=1e-14, atol=0)
        nodes, weights = spectral_density(quadratic, w, data, jax.random.PRNGKey(22), num_probes=2, num_steps=4)
        np.testing.assert_allclose(nodes, np.full((2, 4), c), rtol=1e-14, atol=0)
        np.testing.assert_allclose(np.sort(weights, axis=1), [[0, 0, 0, 1]] * 2, atol=1e-15)   # rounding


def test_float32_parameters_keep_float32_tolerances():
    """diag(1, ..., 7) in float32, m = D: the eigenvalues 7, ..., 1 to float32 rounding (1e-5 of |A|: a few
    eps32 = 1.2e-7 per step over 7 steps, with room)."""
    w = jnp.ones(7, jnp.float32)
    A = jnp.asarray(np.diag(np.arange(1.0, 8.0)), jnp.float32)
    values = top_eigenvalues(quadratic, w, A, 7, jax.random.key(23))
    assert values.dtype == np.float32
    np.testing.assert_allclose(values, np.arange(7.0, 0.0, -1.0), rtol=0, atol=1e-5 * 7)


def test_hutchinson_trace_of_a_quadratic_within_monte_carlo_error():
    lams = np.random.default_rng(7).uniform(-1.0, 3.0, 50)
    A, _ = with_spectrum(lams, seed=8)
    w, data = quadratic_point(A)
    n = 200
    estimate, se = trace(quadratic, w, data, jax.random.PRNGKey(9), num_samples=n)
    # Monte Carlo: 4 standard errors, a false alarm with probability ~6e-5 (normal approximation, N = 200)
    assert se > 0
    assert abs(estimate - lams.sum()) < 4 * se, (estimate, lams.sum(), se)
    # the standard error against its closed form, Var(v^T A v) = 2 sum_(i != j) A_ij^2 for Rademacher v: the
    # sample sd of 200 draws is within a factor 1.5 of the true one far beyond 4 sigma (its relative sd ~ 0.05-0.1)
    exact_se = np.sqrt(2 * (np.sum(A ** 2) - np.sum(np.diag(A) ** 2)) / n)
    assert 1 / 1.5 < se / exact_se < 1.5, (se, exact_se)


def test_hutchinson_is_exact_on_a_diagonal_hessian():
    """Rademacher v: v^T A v = sum_i A_ii v_i^2 = tr A for every probe (a hand check): the spread is rounding."""
    a = np.random.default_rng(10).uniform(-2.0, 5.0, 30)
    w, data = quadratic_point(np.diag(a))
    estimate, se = trace(quadratic, w, data, jax.random.key(11), num_samples=16)
    # float64 sums of 30 terms of size <= 5: rounding ~1e-14 of the trace's scale
    assert abs(estimate - a.sum()) < 1e-12 * np.abs(a).sum()
    assert se < 1e-12 * np.abs(a).sum()


def test_hutchinson_trace_of_an_mlp_hessian(mlp_problem):
    loss, params, data, H = mlp_problem
    estimate, se = trace(loss, params, data, jax.random.PRNGKey(12), num_samples=100)
    # Monte Carlo against the dense trace: 4 standard errors (~6e-5 false alarms)
    assert se > 0 and abs(estimate - np.trace(H)) < 4 * se, (estimate, np.trace(H), se)


def test_slq_moments_are_exact_on_a_diagonal_hessian():
    """Gauss quadrature with m nodes integrates polynomials of degree < 2m exactly, and for diagonal A and a
    Rademacher probe z, z^T A^p z = tr(A^p): every probe's D sum_j w_j theta_j^p is tr(A^p)."""
    a = np.random.default_rng(13).uniform(-1.0, 2.0, 24)
    w, data = quadratic_point(np.diag(a))
    nodes, weights = spectral_density(quadratic, w, data, jax.random.PRNGKey(14), num_probes=4, num_steps=6)
    assert nodes.shape == weights.shape == (4, 6)
    # rounding of float64 sums (1e-12 relative leaves room for the 6 x 6 eigenproblems)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(weights >= 0) and np.all(np.diff(nodes, axis=1) >= 0)
    for p in (1, 2, 3):
        np.testing.assert_allclose(a.size * np.sum(weights * nodes ** p, axis=1), np.sum(a ** p), rtol=1e-10)


def test_slq_moments_estimate_traces_of_powers_within_monte_carlo_error():
    lams = np.random.default_rng(15).uniform(-1.0, 3.0, 50)
    A, _ = with_spectrum(lams, seed=16)
    w, data = quadratic_point(A)
    nodes, weights = spectral_density(quadratic, w, data, jax.random.PRNGKey(17), num_probes=40, num_steps=10)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=0, atol=1e-12)      # float64 rounding
    for p in (1, 2):
        per_probe = A.shape[0] * np.sum(weights * nodes ** p, axis=1)                # each z^T A^p z (Gauss rule)
        se = per_probe.std(ddof=1) / np.sqrt(per_probe.size)
        # Monte Carlo: 4 standard errors over 40 probes (~6e-5 false alarms, normal approximation)
        assert se > 0 and abs(per_probe.mean() - np.sum(lams ** p)) < 4 * se, (p, per_probe.mean(), se)


def test_slq_nodes_are_the_distinct_eigenvalues_once_the_steps_cover_them():
    """A with 5 distinct eigenvalues: the Krylov space of a probe closes after 5 steps, so its nodes of positive
    weight are exactly those eigenvalues, node lambda_i weighing |P_i v|^2, whose mean is mult_i / D."""
    distinct, mult = np.array([-1.5, 0.0, 0.5, 2.0, 4.0]), np.array([6, 10, 8, 9, 7])
    A, _ = with_spectrum(np.repeat(distinct, mult), seed=18)
    w, data = quadratic_point(A)
    nodes, weights = spectral_density(quadratic, w, data, jax.random.PRNGKey(19), num_probes=30, num_steps=8)
    # float64 rounding of a 40 x 40 problem of norm 4: 1e-9 separates "the same eigenvalue" from the gaps (>= 0.5)
    near = np.abs(nodes[..., None] - distinct) < 1e-9                     # (P, m, 5)
    heavy = weights > 1e-9
    assert np.all(near.any(axis=-1)[heavy])                               # every weighted node is an eigenvalue
    assert np.all((near & heavy[..., None]).any(axis=1))                  # and every eigenvalue is a weighted node
    mass = np.sum(weights[..., None] * near, axis=1)                      # (P, 5): |P_i v|^2
    np.testing.assert_allclose(mass.sum(axis=1), 1.0, atol=1e-9)          # the restarts' nodes weigh nothing
    se = mass.std(axis=0, ddof=1) / np.sqrt(mass.shape[0])
    # Monte Carlo: 4 standard errors per eigenvalue (5 checks, ~3e-4 false alarms in all at most)
    assert np.all(np.abs(mass.mean(axis=0) - mult / mult.sum()) < 4 * se), (mass.mean(axis=0), se)


def test_density_on_grid_is_a_smoothed_probability_density():
    nodes = np.array([[-1.0, 0.5, 2.0], [0.0, 1.0, 3.0]])
    weights = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    sigma = 0.1
    grid = np.linspace(-3.0, 5.0, 4001)                  # spacing sigma / 50, 20 sigma beyond the nodes
    phi = density_on_grid(nodes, weights, grid, sigma)
    # the trapezoid rule on a smooth, rapidly decaying integrand at spacing sigma / 50: error far below 1e-10
    assert abs(np.trapezoid(phi, grid) - 1.0) < 1e-10
    assert abs(np.trapezoid(grid * phi, grid) - np.mean(np.sum(weights * nodes, axis=1))) < 1e-10
    # by hand: one node at 0 of weight 1 is the normal density N(0, sigma^2)
    one = density_on_grid([0.0], [1.0], grid, sigma)
    np.testing.assert_allclose(one, np.exp(-0.5 * (grid / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi)), rtol=1e-14)


def test_spectral_density_of_an_mlp_hessian_matches_its_trace(mlp_problem):
    loss, params, data, H = mlp_problem
    nodes, weights = spectral_density(loss, params, data, jax.random.PRNGKey(20), num_probes=20, num_steps=15)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=0, atol=1e-12)      # float64 rounding
    lam = np.linalg.eigvalsh(H)
    # Ritz values lie inside the spectrum's hull (Cauchy interlacing), up to float64 rounding of |H|
    assert np.all(nodes >= lam[0] - 1e-10 * np.abs(lam).max()) and np.all(nodes <= lam[-1] + 1e-10 * np.abs(lam).max())
    per_probe = H.shape[0] * np.sum(weights * nodes, axis=1)
    se = per_probe.std(ddof=1) / np.sqrt(per_probe.size)
    assert abs(per_probe.mean() - np.trace(H)) < 4 * se                # Monte Carlo: 4 standard errors


W = jnp.ones(5)
A5 = jnp.eye(5)
KEY = jax.random.PRNGKey(0)
BAD = [
    (lambda: top_eigenvalues(quadratic, W, A5, 0, KEY), ValueError, r"^k: expected an integer in \[1, 5\]"),
    (lambda: top_eigenvalues(quadratic, W, A5, 6, KEY), ValueError, r"^k: expected an integer in \[1, 5\]"),
    (lambda: top_eigenvalues(quadratic, W, A5, 1.5, KEY), ValueError, r"^k: "),
    (lambda: top_eigenvalues(quadratic, W, A5, 2, KEY, num_iters=0), ValueError, r"^num_iters: "),
    (lambda: top_eigenvalues("loss", W, A5, 2, KEY), TypeError, r"^loss_fn: expected a function"),
    (lambda: top_eigenvalues(quadratic, W.at[2].set(jnp.nan), A5, 2, KEY), ValueError, r"^params: expected finite"),
    (lambda: top_eigenvalues(quadratic, W, A5, 2, 3), TypeError, r"^key: expected a PRNG key"),
    (lambda: top_eigenvalues(quadratic, jnp.ones(5, int), A5, 2, KEY), ValueError, r"^params: expected a pytree of"),
    (lambda: trace(None, W, A5, KEY), TypeError, r"^loss_fn: "),
    (lambda: trace(quadratic, {"a": W.at[0].set(jnp.inf)}, A5, KEY), ValueError, r"^params\['a'\]: expected finite"),
    (lambda: trace(quadratic, W, A5, KEY, num_samples=1), ValueError, r"^num_samples: "),
    (lambda: trace(quadratic, W, A5, jnp.zeros(3)), TypeError, r"^key: "),
    (lambda: spectral_density(quadratic, W, A5, KEY, num_steps=6), ValueError, r"^num_steps: expected an integer in"),
    (lambda: spectral_density(quadratic, W, A5, KEY, num_steps=0), ValueError, r"^num_steps: "),
    (lambda: spectral_density(quadratic, W, A5, KEY, num_probes=0), ValueError, r"^num_probes: "),
    (lambda: spectral_density(quadratic, W * jnp.nan, A5, KEY), ValueError, r"^params: "),
    (lambda: hessian_vector_product(1.0, W, A5), TypeError, r"^loss_fn: "),
    (lambda: hessian_vector_product(quadratic, W, A5)(jnp.ones(4)), ValueError, r"^v: expected a vector of shape \(5"),
    (lambda: density_on_grid([[0.0]], [[1.0]], [0.0], 0.0), ValueError, r"^sigma: "),
    (lambda: density_on_grid([[0.0, 1.0]], [[1.0]], [0.0], 0.1), ValueError, r"^weights: "),
    (lambda: density_on_grid([[0.0]], [[1.0]], [[0.0]], 0.1), ValueError, r"^grid: "),
]


@pytest.mark.parametrize("call,error,message", BAD)
def test_bad_input_is_one_line_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value)
