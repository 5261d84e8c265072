"""Deep fully-connected ReLU networks as pytrees (Sattelberg et al. 2020; Grigsby et al. 2023).

    h_0 = x,   h_l = relu(W_l h_{l-1} + b_l)  (l = 1..L-1),   f(x) = W_L h_{L-1} + b_L

``MLP(layers)`` holds ``Dense(w, b)`` layers with ``w: (n_l, n_{l-1})`` and ``b: (n_l,)``; the
architecture is ``widths = (n_0, n_1, ..., n_L)`` (n_0 inputs, n_L outputs) and the depth is
L, the number of weight layers (Grigsby et al.: (5, 5, 5, 5, 1) has depth 4).  A TwoLayer
is the MLP with widths (n_in, d, 1): ``from_two_layer``.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .network import TwoLayer, check_count, check_finite, check_number, check_params

__all__ = ["Dense", "MLP", "activation_patterns", "check_mlp", "check_widths", "dual_points", "flatten_mlp",
           "from_two_layer", "init_mlp", "local_affine_maps", "mlp_forward", "num_mlp_params", "preactivations",
           "train_classifier", "train_mlp", "unflatten_mlp"]


class Dense(NamedTuple):
    """One layer: w (n_out, n_in), b (n_out,)."""

    w: jax.Array
    b: jax.Array


class MLP(NamedTuple):
    """A deep ReLU network: a tuple of Dense layers; ReLU after every layer but the last.

        h_0 = x,   h_l = relu(W_l h_{l-1} + b_l)  (l = 1..L-1),   f(x) = W_L h_{L-1} + b_L

    The architecture is ``widths = (n_0, n_1, ..., n_L)`` and the depth is L, the number of
    weight layers.

    Attributes:
        layers: L ``Dense(w, b)`` layers, w (n_l, n_{l-1}), b (n_l,).

    References:
        Sattelberg et al. 2020; Grigsby et al. 2023.
    """

    layers: tuple

    @property
    def widths(self) -> tuple[int, ...]:
        return (self.layers[0].w.shape[-1],) + tuple(layer.w.shape[-2] for layer in self.layers)

    @property
    def depth(self) -> int:
        return len(self.layers)

    @property
    def num_hidden(self) -> int:
        return sum(self.widths[1:-1])


def check_widths(widths: Sequence[int], name: str = "widths") -> tuple[int, ...]:
    """Layer widths (n_in, hidden..., n_out) as a tuple of ints; ValueError naming ``name`` unless there are at
    least two positive integers.

    Args:
        widths: the layer widths.
        name: the argument's name in the error.

    Returns:
        The widths as plain ints.
    """
    widths = tuple(widths)
    if len(widths) < 2 or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1
                                  for n in widths):
        raise ValueError(f"{name}: expected at least two positive integers (n_in, ..., n_out), got {list(widths)}")
    return tuple(int(n) for n in widths)


def check_mlp(params) -> MLP:
    """Raise a clear error unless params is an MLP whose layer shapes chain."""
    if not isinstance(params, MLP):
        raise TypeError(f"params: expected slt_relu.MLP, got {type(params).__name__}")
    if not params.layers:
        raise ValueError("params: an MLP needs at least one layer")
    prev = None
    for k, layer in enumerate(params.layers):
        if not isinstance(layer, Dense) or np.ndim(layer.w) != 2 or np.shape(layer.b) != np.shape(layer.w)[:1]:
            raise ValueError(f"params.layers[{k}]: expected Dense(w (n_out, n_in), b (n_out,)), got shapes "
                             f"{np.shape(getattr(layer, 'w', None))}, {np.shape(getattr(layer, 'b', None))}")
        if prev is not None and np.shape(layer.w)[1] != prev:
            raise ValueError(f"params.layers[{k}].w: expected {prev} inputs (layer {k - 1} has {prev} outputs), "
                             f"got shape {np.shape(layer.w)}")
        prev = np.shape(layer.w)[0]
    return params


def init_mlp(key: jax.Array, widths: Sequence[int], bias_std: float = 0.0, dtype=None) -> MLP:
    """He initialisation of an MLP.

        w_l ~ N(0, 2 / n_{l-1}) entrywise,  b_l ~ N(0, bias_std^2)

    Args:
        key: a PRNG key.
        widths: (n_0, n_1, ..., n_L), at least two positive integers.
        bias_std: the biases' standard deviation, >= 0 (default 0).
        dtype: the leaves' dtype (default: JAX's default float).

    Returns:
        MLP with L layers, w_l (n_l, n_{l-1}), b_l (n_l,).
    """
    widths = check_widths(widths)
    check_number(bias_std, "bias_std", nonnegative=True)
    dtype = jnp.dtype(dtype or jnp.zeros(()).dtype)
    return _init_mlp(key, widths, jnp.asarray(bias_std, dtype), dtype)


@partial(jax.jit, static_argnums=(1, 3))
def _init_mlp(key, widths, bias_std, dtype):
    keys = jax.random.split(key, 2 * (len(widths) - 1))
    layers = []
    for k, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
        w = jax.random.normal(keys[2 * k], (n_out, n_in), dtype) * np.sqrt(2.0 / n_in).astype(dtype)
        b = jax.random.normal(keys[2 * k + 1], (n_out,), dtype) * bias_std
        layers.append(Dense(w, b))
    return MLP(tuple(layers))


def from_two_layer(params: TwoLayer) -> MLP:
    """The TwoLayer f = c + sum_i q_i relu(<w_i, x> + b_i) as the MLP with widths (n_in, d, 1)."""
    check_params(params)
    return MLP((Dense(params.w, params.b), Dense(params.q[None, :], params.c[None])))


def mlp_forward(params: MLP, x: jax.Array) -> jax.Array:
    """The MLP's output.

        f(x) = W_L h_{L-1} + b_L,  h_l = relu(W_l h_{l-1} + b_l),  h_0 = x

    Args:
        params: MLP with widths (n_0, ..., n_L).
        x: (..., n_0) inputs.

    Returns:
        (..., n_L) f(x).
    """
    x = jnp.asarray(x)
    if x.shape[-1:] != (params.widths[0],):
        raise ValueError(f"x: expected a last axis of n_in = {params.widths[0]}, got shape {x.shape}")
    h = x
    for layer in params.layers[:-1]:
        h = jax.nn.relu(h @ layer.w.T + layer.b)
    return h @ params.layers[-1].w.T + params.layers[-1].b


def preactivations(params: MLP, x: jax.Array) -> list[jax.Array]:
    """Pre-activations z_l = W_l h_{l-1} + b_l of the hidden layers: list of (..., n_l), l = 1..L-1."""
    h, out = jnp.asarray(x), []
    for layer in params.layers[:-1]:
        z = h @ layer.w.T + layer.b
        out.append(z)
        h = jax.nn.relu(z)
    return out


def activation_patterns(params: MLP, x: jax.Array) -> jax.Array:
    """Activation pattern z_l > 0 of every hidden neuron, concatenated over layers: (..., num_hidden) bool."""
    check_mlp(params)
    zs = preactivations(params, x)
    return jnp.concatenate([z > 0 for z in zs], axis=-1) if zs else jnp.zeros(jnp.shape(x)[:-1] + (0,), bool)


def _local_affine(params: MLP, x: jax.Array):
    """(W (n_L, n_0), b (n_L,)) of the affine map that agrees with f around one point x (n_0,)."""
    W = jnp.eye(params.widths[0], dtype=params.layers[0].w.dtype)
    c = jnp.zeros(params.widths[0], params.layers[0].w.dtype)
    h = x
    for layer in params.layers[:-1]:
        z = layer.w @ h + layer.b
        mask = (z > 0).astype(z.dtype)
        W = mask[:, None] * (layer.w @ W)
        c = mask * (layer.w @ c + layer.b)
        h = jax.nn.relu(z)
    last = params.layers[-1]
    return last.w @ W, last.w @ c + last.b


def local_affine_maps(params: MLP, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sattelberg et al.'s local affine maps: for each point x, the (W, b) with f(y) = W y + b for y in
    the activation region of x: W (..., n_L, n_0) is the Jacobian D_L ... (W_L D_{L-1} W_{L-1} ... D_1 W_1,
    D_l = diag(z_l > 0)) and b (..., n_L) the matching offset.  Jitted and vmapped over x."""
    check_mlp(params)
    x = jnp.asarray(x)
    if x.shape[-1:] != (params.widths[0],):
        raise ValueError(f"x: expected a last axis of n_in = {params.widths[0]}, got shape {x.shape}")
    flat = x.reshape(-1, x.shape[-1])
    W, b = _local_affine_batch(params, flat)
    return W.reshape(x.shape[:-1] + W.shape[1:]), b.reshape(x.shape[:-1] + b.shape[1:])


@jax.jit
def _local_affine_batch(params, x):
    return jax.vmap(_local_affine, (None, 0))(params, x)


def dual_points(params: MLP, x: jax.Array, output: int = 0) -> jax.Array:
    """Sattelberg's C_j: rows [w_{i,j}^T, b_{i,j}] of the local affine maps at the points x for output j:
    (..., n_0 + 1), points in the "dual space" (their eq. 5.3)."""
    n_out = params.widths[-1]
    if not 0 <= output < n_out:
        raise ValueError(f"output: expected an index in [0, {n_out}), got {output}")
    W, b = local_affine_maps(params, x)
    return jnp.concatenate([W[..., output, :], b[..., output, None]], axis=-1)


def train_mlp(key: jax.Array, widths: Sequence[int], x: jax.Array, y: jax.Array, steps: int,
              learning_rate: float, bias_std: float = 0.1) -> tuple[MLP, float]:
    """Full-batch Adam (optax) on mean_k (f(x_k)_0 - y_k)^2 from He initialisation (:func:`init_mlp`),
    ``steps`` steps in one compiled program (cached per architecture, steps and rate).
    x: (n, n_0), y: (n,); returns (params, final loss)."""
    widths = check_widths(widths)
    steps = check_count(steps, "steps", minimum=0)
    check_number(learning_rate, "learning_rate")
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 2 or x.shape[1] != widths[0] or x.shape[0] < 1:
        raise ValueError(f"x: expected shape (n, {widths[0]}) with n >= 1, got {x.shape}")
    if y.shape != x.shape[:1]:
        raise ValueError(f"y: expected shape ({x.shape[0]},) like x's rows, got {y.shape}")
    check_finite(x, "x")
    check_finite(y, "y")
    params, final = _train_mlp(widths, steps, float(learning_rate), init_mlp(key, widths, bias_std), x, y)
    return params, float(final)


@partial(jax.jit, static_argnums=(0, 1, 2))
def _train_mlp(widths, steps, learning_rate, params, x, y):
    import optax

    opt = optax.adam(learning_rate)

    def loss(p):
        return jnp.mean((mlp_forward(p, x)[:, 0] - y) ** 2)

    def step(carry, _):
        p, state = carry
        grad = jax.grad(loss)(p)
        updates, state = opt.update(grad, state, p)
        return (optax.apply_updates(p, updates), state), None

    (p, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=steps)
    return p, loss(p)


def train_classifier(key: jax.Array, widths: Sequence[int], x: jax.Array, y: jax.Array, *, steps: int,
                     learning_rate: float, batch_size: int | None = None, bias_std: float = 0.0) -> tuple[MLP, float]:
    """Train a ReLU classifier: Adam (optax) on the softmax cross-entropy of its n_L outputs (the logits).

        L(theta) = -(1/B) sum_{k in batch} log softmax(f_theta(x_k))_{y_k},   prediction argmax_j f_theta(x)_j

    From He initialisation (:func:`init_mlp`), ``steps`` Adam steps in one compiled program (cached per
    architecture, steps, rate and batch size), each on B = batch_size rows drawn without replacement (a fresh
    draw each step), or on all n rows when batch_size is None.

    Args:
        key: a PRNG key (split into the initialisation's and the batches').
        widths: (n_0, ..., n_L), n_L >= 2 classes.
        x: (n, n_0) inputs, finite.
        y: (n,) integer labels in [0, n_L).
        steps: Adam steps, >= 0.
        learning_rate: Adam's step size, > 0.
        batch_size: rows per step, 1..n (default None: full batch).
        bias_std: the initial biases' standard deviation, >= 0 (default 0).

    Returns:
        (params, loss): the trained MLP and the final cross-entropy over all n rows.

    References:
        Sattelberg et al. 2020 (their MNIST networks: cross-entropy, stochastic gradients); Kingma & Ba 2015 (Adam).
    """
    widths = check_widths(widths)
    if widths[-1] < 2:
        raise ValueError(f"widths: a classifier needs n_L >= 2 outputs (classes), got {list(widths)}")
    steps = check_count(steps, "steps", minimum=0)
    check_number(learning_rate, "learning_rate")
    x, y = jnp.asarray(x), np.asarray(y)
    x = x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.zeros(()).dtype)
    if x.ndim != 2 or x.shape[1] != widths[0] or x.shape[0] < 1:
        raise ValueError(f"x: expected shape (n, {widths[0]}) with n >= 1, got {x.shape}")
    if y.shape != x.shape[:1] or y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= widths[-1]:
        raise ValueError(f"y: expected ({x.shape[0]},) integer labels in [0, {widths[-1]}), got dtype {y.dtype}, "
                         f"shape {y.shape}")
    check_finite(x, "x")
    batch = x.shape[0] if batch_size is None else check_count(batch_size, "batch_size")
    if batch > x.shape[0]:
        raise ValueError(f"batch_size: expected at most n = {x.shape[0]} rows, got {batch_size}")
    k_init, k_batch = jax.random.split(key)
    params, final = _train_classifier(widths, steps, float(learning_rate), None if batch_size is None else batch,
                                      init_mlp(k_init, widths, bias_std, x.dtype), x, jnp.asarray(y), k_batch)
    return params, float(final)


@partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _train_classifier(widths, steps, learning_rate, batch, params, x, y, key):
    import optax

    opt = optax.adam(learning_rate)

    def loss(p, xb, yb):
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(mlp_forward(p, xb), yb))

    def step(carry, k):
        p, state = carry
        rows = jnp.arange(x.shape[0]) if batch is None else jax.random.choice(k, x.shape[0], (batch,), replace=False)
        grad = jax.grad(loss)(p, x[rows], y[rows])
        updates, state = opt.update(grad, state, p)
        return (optax.apply_updates(p, updates), state), None

    (p, _), _ = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(key, steps))
    return p, loss(p, x, y)


def flatten_mlp(params: MLP) -> jax.Array:
    """All parameters in one vector: layer by layer, w row-major then b."""
    return jnp.concatenate([jnp.concatenate([layer.w.reshape(-1), layer.b]) for layer in params.layers])


def unflatten_mlp(flat: jax.Array, widths: Sequence[int]) -> MLP:
    """Inverse of flatten_mlp for the architecture widths."""
    widths = check_widths(widths)
    layers, k = [], 0
    for n_in, n_out in zip(widths[:-1], widths[1:]):
        w = flat[k:k + n_out * n_in].reshape(n_out, n_in)
        k += n_out * n_in
        layers.append(Dense(w, flat[k:k + n_out]))
        k += n_out
    if k != flat.shape[0]:
        raise ValueError(f"flat: expected {k} numbers for widths {list(widths)}, got {flat.shape[0]}")
    return MLP(tuple(layers))


def num_mlp_params(widths: Sequence[int]) -> int:
    """sum_l n_l (n_{l-1} + 1)."""
    widths = check_widths(widths)
    return sum(n_out * (n_in + 1) for n_in, n_out in zip(widths[:-1], widths[1:]))
