"""The toy model of superposition: forward map, data, losses (the exact population loss against
quadrature and Monte Carlo), derivatives, symmetries and the Fisher information."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from slt_relu.tms import (TMSParams, empirical_loss, fisher_information, fisher_rank, flat_empirical_loss,
                          flat_population_loss, forward, from_flat, make_params,
                          num_params, permute_features, permute_inputs, population_loss, reflection, rotate, rotation,
                          rotation_generator, sample_inputs, to_flat)
from slt_relu.tms.fisher import weighted_jacobian
from slt_relu.models.tms import coordinate_names, squared_errors, term
from tms_reference import quadrature_fisher, quadrature_loss


def random_params(seed, c=5, scale=1.0, bias_scale=0.4):
    kW, kb = jax.random.split(jax.random.PRNGKey(seed))
    return TMSParams(scale * jax.random.normal(kW, (2, c)), bias_scale * jax.random.normal(kb, (c,)))


def special_params():
    """G_ji = 0 between columns 0, 1 (orthogonal) and with the zero column 2; a kink at mu = 0 (b_3 = 0);
    a kink at mu = 1 for output 4 at input 0 (G_40 + b_4 = 0); G_ji < 0 with b_j > 0."""
    W = np.array([[1.0, 0.0, 0.0, 0.6, -0.7], [0.0, 1.2, 0.0, 0.5, 0.3]])
    b = np.array([-0.2, 0.3, -0.1, 0.0, 0.0])
    b[4] = -(W[:, 4] @ W[:, 0])                      # pre-activation of output 4 at mu e_0 is 0 at mu = 1
    return TMSParams(jnp.asarray(W), jnp.asarray(b))


# ------------------------------------------------------------------ forward, data, flat order


def test_forward_and_empirical_loss_by_hand():
    """c = 2, W = I, b = (0, -0.5): x = (0.5, 0) -> f = (0.5, 0), error 0; x = (0, 1) -> f = (0, 0.5), error 0.25."""
    p = make_params(jnp.eye(2), [0.0, -0.5])
    x = jnp.array([[0.5, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(forward(p, x), [[0.5, 0.0], [0.0, 0.5]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(squared_errors(p, x), [0.0, 0.25], atol=1e-15)
    assert float(empirical_loss(p, x)) == pytest.approx(0.125, rel=1e-15)


def test_sample_inputs_are_one_hot_with_uniform_magnitudes():
    x = np.asarray(sample_inputs(jax.random.key(0), 20000, 4))
    assert x.shape == (20000, 4)
    assert np.all(np.count_nonzero(x, axis=1) == 1) and x.min() >= 0 and x.max() <= 1
    counts = np.count_nonzero(x, axis=0)
    # each feature ~ Binomial(20000, 1/4): sd 61; 5 sd
    assert np.all(np.abs(counts - 5000) < 5 * 61)
    mu = x.sum(1)
    # U[0, 1]: mean 1/2 (sd 1/sqrt(12 n) = 0.002), E mu^2 = 1/3 (sd 0.0021); 5 sd
    assert abs(mu.mean() - 0.5) < 0.01 and abs((mu ** 2).mean() - 1 / 3) < 0.011


def test_flat_order_is_documented_and_matches_ravel_pytree():
    p = random_params(0, c=3)
    flat = to_flat(p)
    assert flat.shape == (num_params(3),) == (9,)
    np.testing.assert_array_equal(flat, jnp.concatenate([p.W[0], p.W[1], p.b]))
    np.testing.assert_array_equal(ravel_pytree(p)[0], flat)         # the samplers' flat coordinates
    back = from_flat(flat, 3)
    np.testing.assert_array_equal(back.W, p.W) and np.testing.assert_array_equal(back.b, p.b)
    assert coordinate_names(2) == ["W[0,0]", "W[0,1]", "W[1,0]", "W[1,1]", "b[0]", "b[1]"]
    # the flat losses of smc_free_energy_curve are the same functions
    x = sample_inputs(jax.random.key(0), 50, 3)
    assert float(flat_empirical_loss(flat, x)) == float(empirical_loss(p, x))
    assert float(flat_population_loss(flat)) == float(population_loss(p))


def test_bad_inputs_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="^W: expected shape"):
        make_params(jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match="^b: expected shape"):
        make_params(jnp.zeros((2, 3)), jnp.zeros(4))
    with pytest.raises(ValueError, match="^W: expected finite"):
        make_params(jnp.full((2, 3), jnp.nan), 0.0)
    with pytest.raises(ValueError, match="^flat: expected shape"):
        from_flat(jnp.zeros(8), 3)
    with pytest.raises(ValueError, match="^x: expected a last axis"):
        forward(random_params(0, c=3), jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match="^n: expected a positive integer"):
        sample_inputs(jax.random.key(0), 0, 3)
    with pytest.raises(TypeError, match="^params: expected slt_relu.tms.TMSParams"):
        fisher_rank((jnp.zeros((2, 3)), jnp.zeros(3)))


# ------------------------------------------------------------------ the exact population loss


def test_term_by_hand():
    """T(a, b, t) = int_0^1 (t mu - relu(a mu + b))^2: a = 1, b = 0, t = 1 -> 0; a = 0, b = 0.5, t = 0 -> 1/4;
    a = 2, b = -1, t = 0 -> int_{1/2}^1 (2 mu - 1)^2 = 1/6; a = 0, b = -1, t = 1 -> 1/3."""
    got = term(jnp.array([1.0, 0.0, 2.0, 0.0]), jnp.array([0.0, 0.5, -1.0, -1.0]), jnp.array([1.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(got, [0.0, 0.25, 1 / 6, 1 / 3], rtol=1e-14, atol=1e-16)


@pytest.mark.parametrize("seed", range(4))
def test_population_loss_matches_quadrature_on_the_pieces(seed):
    """Gauss-Legendre on the pieces between kinks is exact for the piecewise quadratic integrand, so the two
    agree to rounding: 1e-12 relative (float64, sums of ~c^2 terms of size ~1)."""
    p = random_params(seed, c=3 + seed)
    assert float(population_loss(p)) == pytest.approx(quadrature_loss(p.W, p.b), rel=1e-12)


def test_population_loss_matches_quadrature_at_zero_slopes_and_end_kinks():
    p = special_params()
    G = np.asarray(p.W.T @ p.W)
    assert G[0, 1] == 0 and np.all(G[2] == 0) and float(p.b[3]) == 0 and G[4, 0] + float(p.b[4]) == 0
    assert float(population_loss(p)) == pytest.approx(quadrature_loss(p.W, p.b), rel=1e-12)
    # and jitted, vmapped over a batch of parameters
    batch = jax.tree.map(lambda *a: jnp.stack(a), p, random_params(1))
    want = [quadrature_loss(p.W, p.b), quadrature_loss(random_params(1).W, random_params(1).b)]
    np.testing.assert_allclose(jax.jit(jax.vmap(population_loss))(batch), want, rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_population_loss_matches_monte_carlo(seed):
    """L against the mean of ||x - f(x)||^2 over n = 400,000 inputs: within 5 standard errors
    (a false alarm with probability 6e-7 per comparison)."""
    p = random_params(seed + 10, c=5)
    errors = np.asarray(squared_errors(p, sample_inputs(jax.random.key(seed), 400_000, 5)))
    se = errors.std(ddof=1) / np.sqrt(errors.size)
    assert abs(float(population_loss(p)) - errors.mean()) < 5 * se


def _central_gradient(fn, x, h=1e-6):
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (fn(x + e) - fn(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize("which", ["random", "special"])
def test_gradient_is_finite_and_matches_finite_differences_of_the_quadrature(which):
    """jax.grad of the closed form against central differences (h = 1e-6) of the independent quadrature:
    truncation h^2 |L'''| ~ 1e-12, rounding eps / h ~ 1e-10; 1e-7 absolute.  At the special point the loss is
    C^1, not C^2 (kinks at mu = 0 and 1), which central differences still resolve to O(h)."""
    p = random_params(3, c=4) if which == "random" else special_params()
    c = p.b.shape[0]
    g = np.asarray(jax.jit(jax.grad(lambda w: population_loss(from_flat(w, c))))(to_flat(p)))
    assert np.all(np.isfinite(g))
    fd = _central_gradient(lambda w: quadrature_loss(w[:2 * c].reshape(2, c), w[2 * c:]), to_flat(p))
    np.testing.assert_allclose(g, fd, atol=1e-7)


def test_hessian_is_finite_at_zero_slopes_and_matches_finite_differences_where_smooth():
    """The double-where trick: no NaN in jax.hessian at G_ji = 0 (zero and orthogonal columns).  At a smooth
    random point the Hessian agrees with second differences of the independent quadrature (h = 1e-4:
    truncation ~h^2, rounding ~eps / h^2 = 2e-8; 1e-5 absolute)."""
    H_special = jax.jit(jax.hessian(lambda w: population_loss(from_flat(w, 5))))(to_flat(special_params()))
    assert np.all(np.isfinite(np.asarray(H_special)))
    p = random_params(5, c=3)
    H = np.asarray(jax.jit(jax.hessian(lambda w: population_loss(from_flat(w, 3))))(to_flat(p)))
    Lq = lambda w: quadrature_loss(w[:6].reshape(2, 3), w[6:])
    w0, h = np.asarray(to_flat(p), np.float64), 1e-4
    fd = np.zeros((9, 9))
    for i in range(9):
        for j in range(9):
            ei, ej = np.eye(9)[i] * h, np.eye(9)[j] * h
            fd[i, j] = (Lq(w0 + ei + ej) - Lq(w0 + ei - ej) - Lq(w0 - ei + ej) + Lq(w0 - ei - ej)) / (4 * h * h)
    np.testing.assert_allclose(H, fd, atol=1e-5)


def test_tiny_slopes_give_finite_derivatives():
    """|G_ji| far below tiny^(1/4) with a kink nominally inside (0, 1): treated as no kink, derivatives finite."""
    ab = jnp.array([[1e-200, -5e-201], [1e-200, -5e-201], [0.0, 0.3], [0.0, -0.3]])
    t = jnp.array([0.0, 1.0, 1.0, 0.0])
    T = lambda ab, t: term(ab[0], ab[1], t)
    g = jax.jit(jax.vmap(jax.grad(T)))(ab, t)
    H = jax.jit(jax.vmap(jax.hessian(T)))(ab, t)
    assert np.all(np.isfinite(np.asarray(g))) and np.all(np.isfinite(np.asarray(H)))


# ------------------------------------------------------------------ symmetries


@pytest.mark.parametrize("dtype, rtol", [(jnp.float64, 1e-12), (jnp.float32, 1e-5)])
def test_losses_are_invariant_under_rotations_reflections_and_permutations(dtype, rtol):
    """L(R W, b) = L(W, b) for R in O(2); L(W[:, p], b[p]) = L(W, b); L_n likewise, with the data permuted
    by the same p.  The Gram matrix changes by rounding only (a few eps |W|^2) and L is C^1 with O(1)
    derivatives: rtol 1e-12 in float64, 1e-5 in float32 (eps 1.2e-7)."""
    p = jax.tree.map(lambda a: a.astype(dtype), random_params(7, c=6))
    x = sample_inputs(jax.random.key(3), 500, 6, dtype=dtype)
    L, Ln = float(population_loss(p)), float(empirical_loss(p, x))
    perm = np.array([3, 0, 5, 1, 4, 2])
    for R in (rotation(0.7), rotation(-2.9), reflection(0.3), reflection(1.9) @ rotation(0.4)):
        q = rotate(p, R.astype(dtype))
        assert float(population_loss(q)) == pytest.approx(L, rel=rtol)
        assert float(empirical_loss(q, x)) == pytest.approx(Ln, rel=rtol)
    q = permute_features(p, perm)
    assert float(population_loss(q)) == pytest.approx(L, rel=rtol)
    assert float(empirical_loss(q, permute_inputs(x, perm))) == pytest.approx(Ln, rel=rtol)
    np.testing.assert_allclose(forward(q, permute_inputs(x, perm)), forward(p, x)[:, perm], rtol=rtol, atol=rtol)


def test_symmetry_operations_refuse_bad_arguments():
    p = random_params(0, c=3)
    with pytest.raises(ValueError, match="^R: expected an orthogonal matrix"):
        rotate(p, jnp.array([[1.0, 0.1], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="^R: expected an orthogonal"):
        rotate(p, jnp.eye(3))
    with pytest.raises(ValueError, match="^perm: expected a permutation of 0..2"):
        permute_features(p, [0, 0, 1])


# ------------------------------------------------------------------ the Fisher information


@pytest.mark.parametrize("which", ["random", "special"])
def test_fisher_information_matches_quadrature_of_jacobians(which):
    """The two-point rule on each (i, j) active interval against jax.jacfwd of forward at six Gauss-Legendre
    nodes inside each piece between all kinks of an input (both exact for the degree-2 integrand): 1e-12."""
    p = random_params(2, c=4) if which == "random" else special_params()
    F = np.asarray(fisher_information(p))
    np.testing.assert_allclose(F, quadrature_fisher(p), rtol=1e-12, atol=1e-13)
    A = weighted_jacobian(p)
    assert A.shape == (2 * p.b.size ** 2, 3 * p.b.size)


def test_fisher_null_direction_is_the_rotation_and_the_generic_rank_is_3c_minus_1():
    """f depends on W only through W^T W, so J v_rot = 0 for the rotation tangent v_rot: F v_rot = 0.  At
    generic parameters with every output active somewhere no other direction is null: rank 3c - 1."""
    p = TMSParams(random_params(4, c=4).W, jnp.full(4, 0.3))
    F = np.asarray(fisher_information(p))
    v = np.asarray(rotation_generator(p))
    assert np.linalg.norm(F @ v) <= 1e-13 * np.linalg.norm(F) * np.linalg.norm(v)
    assert fisher_rank(p) == 3 * 4 - 1
