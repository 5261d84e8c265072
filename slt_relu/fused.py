"""Fused likelihoods: the two-layer network's L_n(w) with its gradient in one pass over the data.

    L_n(w)   = (1/n) sum_k r_k^2 / (2 sigma^2) + log(sigma sqrt(2 pi)),   r_k = f(x_k; w) - y_k,
    f(x; w)  = c + sum_i q_i relu(a_ik),                                   a_ik = <w_i, x_k> + b_i,

    dL/dw_ij = q_i s_ij,   s_ij = (1/(n sigma^2)) sum_k r_k 1[a_ik > 0] x_kj   (and x_k0 = 1 for b_i),
    dL/dq_i  = (1/(n sigma^2)) sum_k r_k relu(a_ik),
    dL/dc    = (1/(n sigma^2)) sum_k r_k.

Reverse-mode autodiff of the forward pass writes a_ik, the mask and r_k for every data point and reads
them back; the samplers evaluate this gradient billions of times (DSLT4's sweeps), one particle at a time
under ``vmap``.  :func:`two_layer_nll` computes the loss and the d (n_in + 2) + 1 sums above together,
each as a dot product over the data (XLA's vectorised dot; under ``vmap`` a batch of particles reads the
data once), and gives JAX the gradient through a custom JVP: forward and reverse mode, ``vmap``, ``jit``
and second derivatives (the Hessian; relu'' = 0 away from the kinks, as autodiff has it) see the same
function.  ``benchmarks/bench_likelihood.py`` measures gradients per second against ``jax.vmap(jax.grad(L))``
and the machine's peak (splitting the data into cache-sized blocks in a loop was measured slower, 0.3 x at
n = 1e4, and is not done).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from .network import TwoLayer, forward_columns

__all__ = ["two_layer_nll", "two_layer_nll_flops"]


def two_layer_nll_flops(width: int, n_in: int) -> int:
    """Floating-point operations per data point of one value and gradient of :func:`two_layer_nll`, as
    it executes them (a multiply-add counts 2): the pre-activations 2 d n_in, relu d, the output 2 d and
    r 1, r^2 2, the masked residuals d, the sums (dot products) 2 (d n_in + 2 d + 1):
    4 d n_in + 8 d + 5, for d = n_in = 2, 37."""
    return 4 * width * n_in + 8 * width + 5


def _nll(params: TwoLayer, x_cols, y, sigma):
    """L_n by the plain formula (the reference the custom JVP's data and sigma tangents go through)."""
    f = forward_columns(params, x_cols)
    return jnp.mean((y - f) ** 2) / (2.0 * sigma ** 2) + jnp.log(sigma * jnp.sqrt(2.0 * jnp.pi))


def _data_sums(params: TwoLayer, x_cols, y):
    """Over the data: (sum_k r_k^2, TwoLayer of the raw gradient sums before the q_i and
    1/(n sigma^2) factors: sum r 1[a > 0] x (d, n_in), sum r 1[a > 0] (d,), sum r relu(a) (d,), sum r)."""
    d, n_in = params.w.shape
    pre = [params.b[i] + sum(params.w[i, j] * x_cols[j] for j in range(n_in)) for i in range(d)]
    hidden = [jax.nn.relu(a) for a in pre]
    r = params.c + sum(params.q[i] * hidden[i] for i in range(d)) - y
    masked = [jnp.where(pre[i] > 0, r, 0.0) for i in range(d)]
    ones = jnp.ones_like(r)
    return jnp.dot(r, r), TwoLayer(jnp.stack([jnp.stack([jnp.dot(masked[i], x_cols[j]) for j in range(n_in)])
                                              for i in range(d)]),
                                   jnp.stack([jnp.dot(m, ones) for m in masked]),
                                   jnp.stack([jnp.dot(r, h) for h in hidden]), jnp.dot(r, ones))


def _value_and_grad(params: TwoLayer, x_cols, y, sigma):
    """(L_n, dL_n/dparams as a TwoLayer)."""
    n_in = params.w.shape[-1]
    if jnp.ndim(x_cols) != 2 or jnp.shape(x_cols)[0] != n_in or jnp.shape(y) != jnp.shape(x_cols)[1:]:
        raise ValueError(f"x_cols, y: expected shapes (n_in, n) with n_in = {n_in} like the parameters and (n,), got "
                         f"{jnp.shape(x_cols)} and {jnp.shape(y)}")
    sq, raw = _data_sums(params, x_cols, y)
    scale = 1.0 / (y.shape[0] * sigma ** 2)
    value = 0.5 * scale * sq + jnp.log(sigma * jnp.sqrt(2.0 * jnp.pi))
    grad = TwoLayer(scale * params.q[:, None] * raw.w, scale * params.q * raw.b, scale * raw.q, scale * raw.c)
    return value, grad


@jax.custom_jvp
def two_layer_nll(params: TwoLayer, x_cols: jax.Array, y: jax.Array, sigma=1.0) -> jax.Array:
    """L_n(w) of the two-layer network on data with the inputs as columns, its gradient fused (module
    docstring): the same number as ``gaussian_nll(y - forward_columns(params, x_cols), sigma)``.

    Shapes are checked when traced (a ValueError naming them); values are not (the public losses check them).

    Args:
        params: one TwoLayer (w (d, n_in), b (d,), q (d,), c ()).
        x_cols: (n_in, n) inputs as columns.
        y: (n,) outputs.
        sigma: the noise standard deviation, > 0.

    Returns:
        () L_n(w).
    """
    return _value_and_grad(params, x_cols, y, sigma)[0]


def _is_zero(tangent) -> bool:
    return all(isinstance(t, SymbolicZero) for t in jax.tree.leaves(tangent, is_leaf=lambda t: isinstance(t, SymbolicZero)))


def _two_layer_nll_jvp(primals, tangents):
    params, x_cols, y, sigma = primals
    d_params, d_x, d_y, d_sigma = tangents
    value, grad = _value_and_grad(params, x_cols, y, sigma)
    tangent = jnp.zeros_like(value)
    for g, t in zip(jax.tree.leaves(grad), jax.tree.leaves(d_params, is_leaf=lambda t: isinstance(t, SymbolicZero))):
        if not isinstance(t, SymbolicZero):
            tangent = tangent + jnp.sum(g * t)
    moving = [i for i, t in enumerate((d_x, d_y, d_sigma)) if not _is_zero(t)]
    if moving:
        # a derivative in the data or in sigma (rare): through the plain formula, as autodiff has it; the
        # arguments that do not move stay closed over (integer data among them)
        data = [x_cols, y, sigma]

        def plain(*args):
            for i, a in zip(moving, args):
                data[i] = a
            return _nll(params, *data)
        tangent = tangent + jax.jvp(plain, tuple(data[i] for i in moving),
                                    tuple((d_x, d_y, d_sigma)[i] for i in moving))[1]
    return value, tangent


two_layer_nll.defjvp(_two_layer_nll_jvp, symbolic_zeros=True)
