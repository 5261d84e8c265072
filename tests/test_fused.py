"""The fused two-layer likelihood (slt_relu.fused) against autodiff of the plain formula, an independent
computation: value, gradient (reverse and forward mode), Hessian, derivatives in the data and sigma, under
vmap and jit; and the flop count by hand."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.fused import two_layer_nll, two_layer_nll_flops
from slt_relu.loss import gaussian_nll
from slt_relu.network import TwoLayer, forward

# float64 sums of n <= 2e4 O(1) terms: rounding ~ n eps ~ 4e-12 relative at worst, conditioning O(1)
RTOL64 = 1e-10


def plain(params, x_cols, y, sigma=1.0):
    """L_n through the matrix forward pass, differentiated by JAX's autodiff: the reference."""
    return gaussian_nll(y - forward(params, x_cols.T), sigma)


def problem(n, d=3, n_in=2, seed=0, dtype=jnp.float64):
    k = jax.random.split(jax.random.PRNGKey(seed), 6)
    params = TwoLayer(jax.random.normal(k[0], (d, n_in), dtype), jax.random.normal(k[1], (d,), dtype),
                      jax.random.normal(k[2], (d,), dtype), jax.random.normal(k[3], (), dtype))
    return params, jax.random.normal(k[4], (n_in, n), dtype), jax.random.normal(k[5], (n,), dtype)


def close(a, b, rtol=RTOL64):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=rtol * float(np.max(np.abs(v)) + 1))


@pytest.mark.parametrize("n", [1, 7, 5000])
@pytest.mark.parametrize("sigma", [1.0, 0.7])
def test_value_and_gradient_match_autodiff(n, sigma):
    params, x, y = problem(n, seed=n)
    close(two_layer_nll(params, x, y, sigma), plain(params, x, y, sigma))
    close(jax.grad(two_layer_nll)(params, x, y, sigma), jax.grad(plain)(params, x, y, sigma))


def test_forward_mode_hessian_and_data_derivatives_match_autodiff():
    params, x, y = problem(611, d=2, n_in=3)
    tangent = jax.tree.map(jnp.ones_like, params)
    close(jax.jvp(lambda p: two_layer_nll(p, x, y, 0.8), (params,), (tangent,)),
          jax.jvp(lambda p: plain(p, x, y, 0.8), (params,), (tangent,)))
    close(jax.hessian(two_layer_nll)(params, x, y, 0.8), jax.hessian(plain)(params, x, y, 0.8))
    # derivatives in the data and in sigma go through the plain formula inside the custom JVP
    close(jax.grad(two_layer_nll, (1, 2, 3))(params, x, y, 0.8), jax.grad(plain, (1, 2, 3))(params, x, y, 0.8))


def test_vmapped_and_jitted_in_float32():
    """A batch of particles on one data set, float32: the sums' rounding in float32 (n = 2e4 terms, ~1e-5
    relative, summed in different orders) bounds the difference."""
    params, x, y = problem(20_000, d=2, n_in=2, dtype=jnp.float32)
    batch = jax.tree.map(lambda a: a + 0.1 * jnp.arange(8.0, dtype=a.dtype).reshape((8,) + (1,) * a.ndim), params)
    fused = jax.jit(jax.vmap(jax.value_and_grad(two_layer_nll), (0, None, None)))(batch, x, y)
    ref = jax.vmap(jax.value_and_grad(plain), (0, None, None))(batch, x, y)
    assert fused[0].dtype == jnp.float32
    close(fused, ref, rtol=2e-4)


def test_inputs_that_do_not_fit_the_network_are_refused():
    """x_cols with more or fewer rows than n_in, or y of another length: a ValueError naming them, never a number
    from the rows that happen to be there."""
    params, x, y = problem(50, d=2, n_in=2)
    for bad_x, bad_y in ((jnp.concatenate([x, x[:1]]), y), (x[:1], y), (x, y[:-1])):
        with pytest.raises(ValueError, match="x_cols, y: expected shapes"):
            two_layer_nll(params, bad_x, bad_y)
        with pytest.raises(ValueError, match="x_cols, y: expected shapes"):
            jax.grad(two_layer_nll)(params, bad_x, bad_y)
    loss = S.models.gaussian_loss(S.models.two_layer(2, 2))
    with pytest.raises(ValueError, match="expected a last axis of n_in = 2"):      # the model's own forward pass
        loss(params, (jnp.concatenate([x, x[:1]]).T, y))


def test_derivative_in_sigma_with_integer_data():
    """Integer data stay closed over when only sigma moves (the plain formula's derivative)."""
    params, x, y = problem(40, d=2, n_in=2)
    xi, yi = jnp.round(3 * x).astype(jnp.int32), jnp.round(3 * y).astype(jnp.int32)
    close(jax.grad(two_layer_nll, 3)(params, xi, yi, 0.9), jax.grad(plain, 3)(params, xi, yi, 0.9))
    close(jax.grad(two_layer_nll)(params, xi, yi, 0.9), jax.grad(plain)(params, xi, yi, 0.9))


def test_relu_kink_has_autodiffs_zero_derivative():
    """A data point exactly on node 0's kink (a = 0): relu'(0) = 0, as jax.nn.relu's autodiff has it."""
    params = TwoLayer(jnp.array([[1.0, 0.0]]), jnp.array([0.0]), jnp.array([2.0]), jnp.array(0.5))
    x, y = jnp.array([[0.0, 1.0], [3.0, 4.0]]), jnp.array([1.0, -1.0])
    close(jax.grad(two_layer_nll)(params, x, y), jax.grad(plain)(params, x, y))


def test_public_losses_use_it():
    """The two-layer model's GaussianLoss and the Restriction's loss give the plain formula's value and gradient."""
    params, x, y = problem(300, d=2, n_in=2)
    model = S.models.two_layer(2, 2)
    loss = S.models.gaussian_loss(model, 0.9)
    close(jax.value_and_grad(loss)(params, (x.T, y)), jax.value_and_grad(lambda p: plain(p, x, y, 0.9))(params))
    close(loss(params, (x.T, y)), jnp.mean(loss.per_sample(params, (x.T, y))))
    close(jax.grad(S.loss.two_layer_loss)(params, (x.T, y), 0.9), jax.grad(plain)(params, x, y, 0.9))


def test_flop_count_by_hand():
    """d = n_in = 2, counted term by term: a_i = b_i + w_i1 x_1 + w_i2 x_2 (2 multiply-adds) for 2 nodes 8;
    relu 2; f = c + q_1 h_1 + q_2 h_2 4; r = f - y 1; r . r 2; the masks 2; the dots m_i . x_j (4),
    m_i . 1 (2), r . h_i (2), r . 1 (1), 2 each, 18: 37."""
    assert two_layer_nll_flops(2, 2) == 8 + 2 + 4 + 1 + 2 + 2 + 18
    assert two_layer_nll_flops(3, 1) == 3 * 2 + 3 + 6 + 1 + 2 + 3 + 2 * (3 + 3 + 3 + 1)
