import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.loss import coordinate_slice, loss_slice, population_losses
import slt_relu.loss


def k_example_3_4(w1, w2):
    """DSLT3 Example 3.4's four cases."""
    if w1 >= 0 and w2 >= 0:
        return (w1 + w2 - 1) ** 2
    if w1 <= 0 and w2 >= 0:
        return w1**2 + (w2 - 1) ** 2
    if w1 >= 0 and w2 <= 0:
        return (w1 - 1) ** 2 + w2**2
    return (w1 + w2) ** 2 + 1


def test_example_3_4_four_case_formula():
    ex = S.truths.get("dslt3_example_3_4")
    assert ex.inputs == S.UniformBox(math.sqrt(6.0), 1) and abs(ex.sigma**2 - 0.5) < 1e-15
    pts = np.random.default_rng(1).uniform(-2, 2, size=(200, 2))
    pts = np.concatenate([pts, [[0, 1], [1, 0], [0.5, 0.5], [0, 0], [-1, -1]]])
    K = jax.vmap(lambda th: S.population_loss(ex.model.embed(th), ex.truth, ex.inputs, ex.sigma))(pts)
    want = np.array([k_example_3_4(*p) for p in pts])
    assert np.max(np.abs(np.asarray(K) - want)) < 1e-10


def test_example_3_2_valley():
    for theta0 in (0.0, 0.2, 1.0):
        ex = S.truths.get("dslt3_example_3_2", theta0=theta0)
        pts = np.random.default_rng(2).uniform(-2, 2, size=(100, 2))
        K = jax.vmap(lambda th: S.population_loss(ex.model.embed(th), ex.truth, ex.inputs, ex.sigma))(pts)
        w, q = pts[:, 0], pts[:, 1]
        want = np.where(w >= 0, (w * q - theta0) ** 2, (w * q) ** 2 + theta0**2)
        assert np.max(np.abs(np.asarray(K) - want)) < 1e-10


def test_k_zero_at_truth_and_positive_elsewhere(key):
    t = S.truths.m_symmetric(3)
    box = S.UniformBox(1.0, 2)
    assert float(S.population_loss(t, t, box)) == 0.0
    assert float(S.population_loss(S.init_params(key, 3, 2), t, box)) > 1e-3


@pytest.mark.parametrize("n_in,dist", [(1, S.Gaussian(1.0, 1)), (2, S.UniformBox(1.0, 2)), (2, S.Gaussian(1.0, 2))])
def test_k_invariant_under_permutation_and_rescaling(key, n_in, dist):
    k1, k2, k3 = jax.random.split(key, 3)
    p = S.init_params(k1, 4, n_in)
    t = S.init_params(k2, 3, n_in)
    lam = jnp.exp(jax.random.normal(k3, (4,)))
    perm = jnp.array([2, 0, 3, 1])
    moved = S.TwoLayer(lam[:, None] * p.w, lam * p.b, p.q / lam, p.c)
    moved = S.TwoLayer(moved.w[perm], moved.b[perm], moved.q[perm], moved.c)
    a, b = S.population_loss(p, t, dist), S.population_loss(moved, t, dist)
    assert abs(float(a - b)) < 1e-9 * float(a)


def test_empirical_loss_formula_and_limit(key):
    t = S.truths.m_symmetric(3)
    box = S.UniformBox(1.0, 2)
    sigma = 0.7
    x, y = S.sample_dataset(key, t, box, 200_000, sigma)
    p = S.init_params(jax.random.PRNGKey(5), 3, 2, scale=0.5)
    manual = np.mean((np.asarray(y) - np.asarray(S.forward(p, x))) ** 2) / (2 * sigma**2) + math.log(sigma * math.sqrt(2 * math.pi))
    assert abs(float(S.empirical_loss(p, x, y, sigma)) - manual) < 1e-12
    # L_n(w) - L_n(w0) -> K(w) as n grows: the difference has standard deviation ~ sqrt(2K/n)/sigma-ish.
    diff = float(S.empirical_loss(p, x, y, sigma) - S.empirical_loss(t, x, y, sigma))
    K = float(S.population_loss(p, t, box, sigma))
    assert abs(diff - K) < 0.03 * K + 0.01


def test_jit_vmap_and_loop_agree(key):
    t = S.truths.m_symmetric(3)
    box = S.UniformBox(1.0, 2)
    batch = jax.vmap(lambda k: S.init_params(k, 3, 2))(jax.random.split(key, 5))
    vm = jax.vmap(S.population_loss, (0, None, None, None))(batch, t, box, 1.0)
    loop = [slt_relu.loss._population_loss(jax.tree.map(lambda a: a[i], batch), t, box, 1.0) for i in range(5)]
    np.testing.assert_allclose(vm, loop, rtol=1e-12)
    np.testing.assert_allclose(population_losses(batch, t, box, 1.0), loop, rtol=1e-12)
    with pytest.raises(ValueError, match="params: expected a batch with one leading axis"):
        population_losses(t, t, box)
    with pytest.raises(ValueError, match="sigma"):
        population_losses(batch, t, box, -1.0)
    x, y = S.sample_dataset(key, t, box, 50, 1.0)
    vl = jax.vmap(S.empirical_loss, (0, None, None, None))(batch, x, y, 1.0)
    np.testing.assert_allclose(vl, [S.empirical_loss(jax.tree.map(lambda a: a[i], batch), x, y, 1.0) for i in range(5)])


def test_slices_one_batched_call():
    ex = S.truths.get("dslt3_example_3_4")
    fn = lambda p: S.population_loss(p, ex.truth, ex.inputs, ex.sigma)
    xs, ys = np.linspace(-1, 2, 7), np.linspace(-1, 2, 5)
    Z = coordinate_slice(fn, ex.model.base, ["w[0,0]", "w[1,0]"], xs, ys)
    want = np.array([[k_example_3_4(a, b) for b in ys] for a in xs])
    assert Z.shape == (7, 5) and np.max(np.abs(np.asarray(Z) - want)) < 1e-10
    # two directions through a point: along (1, -1) through (1/2, 1/2) K stays 0 inside W0
    center = ex.model.embed(jnp.array([0.5, 0.5]))
    u = np.zeros(7); u[0], u[1] = 1, -1
    v = np.zeros(7); v[0], v[1] = 1, 1
    Z2 = loss_slice(fn, center, u, v, np.linspace(-0.4, 0.4, 5), np.array([0.0, 0.1]))
    np.testing.assert_allclose(Z2[:, 0], 0.0, atol=1e-14)
    np.testing.assert_allclose(Z2[:, 1], 0.2**2, rtol=1e-10)
    with pytest.raises(ValueError, match="u: expected shape"):
        loss_slice(fn, center, np.zeros(3), v, xs, ys)


def test_a_second_slice_with_the_loss_in_args_compiles_nothing(compiles):
    """The landscape kind's hot path: a module-level loss with its data in ``args`` is compiled
    once; the values (another sigma, another truth of the same shapes) are dynamic."""
    ex = S.truths.get("dslt3_example_3_4")
    xs, ys = np.linspace(-1, 2, 7), np.linspace(-1, 2, 5)
    first = coordinate_slice(S.population_loss, ex.model.base, ["w[0,0]", "w[1,0]"], xs, ys,
                             args=(ex.truth, ex.inputs, ex.sigma))
    want = np.array([[k_example_3_4(a, b) for b in ys] for a in xs])
    assert np.max(np.abs(np.asarray(first) - want)) < 1e-10
    compiles()
    again = coordinate_slice(S.population_loss, ex.model.base, ["w[0,0]", "w[1,0]"], xs, ys,
                             args=(ex.truth, ex.inputs, 2 * ex.sigma))
    assert compiles() == 0
    np.testing.assert_allclose(np.asarray(again), want / 4, rtol=1e-12, atol=1e-15)   # K scales as 1/sigma^2


def test_float32_supported(key):
    t = S.truths.m_symmetric(3, dtype=jnp.float32)
    p = S.init_params(key, 3, 2, dtype=jnp.float32)
    k32 = S.population_loss(p, t, S.UniformBox(1.0, 2))
    assert k32.dtype == jnp.float32
    k64 = S.population_loss(jax.tree.map(lambda a: a.astype(jnp.float64), p), S.truths.m_symmetric(3), S.UniformBox(1.0, 2))
    assert abs(float(k32) - float(k64)) < 1e-4 * float(k64)


def test_bad_arguments_clear_errors(key):
    p = S.init_params(key, 3, 2)
    with pytest.raises(TypeError, match="params: expected slt_relu.TwoLayer"):
        S.population_loss({"w": 1}, p, S.UniformBox(1.0, 2))
    with pytest.raises(ValueError, match="truth: expected n_in = 2"):
        S.population_loss(p, S.init_params(key, 3, 1), S.UniformBox(1.0, 2))
    with pytest.raises(ValueError, match="inputs: expected n_in = 2"):
        S.population_loss(p, p, S.UniformBox(1.0, 1))
    with pytest.raises(TypeError, match="inputs: expected UniformBox, Gaussian or Quadrature"):
        S.population_loss(p, p, "box")
    with pytest.raises(ValueError, match="x, y: expected shapes"):
        S.empirical_loss(p, jnp.zeros((5, 2)), jnp.zeros(4))
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        S.sample_dataset(key, p, S.UniformBox(1.0, 2), 0)
