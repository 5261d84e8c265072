"""Loss landscapes of any model: directions and slices.

Every function takes any parameter pytree ``params`` and any ``loss_fn(params, data) -> scalar`` (the convention
of :mod:`slt_relu.hessian` and :func:`slt_relu.estimate_llc`; loss_fn is a static argument of the compiled
programs: a hashable function, such as a module-level one or :class:`slt_relu.models.GaussianLoss`, reuses them).
A *direction* is a pytree of params' structure and leaf shapes; inside, both are flat (D,) vectors
(:func:`slt_relu.pytree.unravel_fn`).

- :func:`random_direction`: d ~ N(0, I), filter-normalised (Li et al. 2018): each filter r of a weight (a slice
  along ``filter_axis``, its output unit) becomes d_r norm(w_r) / norm(d_r), so that slices of networks of
  different scales compare; biases (leaves of fewer than two axes) get zero.
- :func:`hessian_directions`: the top-k Hessian eigenvectors (Lanczos: :func:`slt_relu.hessian.top_eigenvalues`).
- :func:`scaling_direction`: a node's scaling generator v_i (DSLT3 Appendix 1), the tangent at alpha = 1 of the
  orbit alpha -> (alpha w_i, alpha b_i, q_i / alpha) (:func:`scaling_orbit`).  L is constant on the orbit; on
  the line params + t v_i node i's output is multiplied by (1 + t)(1 - t) = 1 - t^2, flat to first order only.
- :func:`segment`, :func:`bezier_curve` (mode connectivity: Garipov et al. 2018; Draxler et al. 2018): the
  straight path (1 - t) a + t b and the quadratic Bezier curve

      phi_theta(t) = (1 - t)^2 a + 2 t (1 - t) theta + t^2 b,    t in [0, 1],

  its control point theta fitted by Adam (optax) on E_{t ~ U[0, 1]} L(phi_theta(t)), a fresh t per sample.

Losses, each one compiled program (``jax.lax.map`` over chunks of points, vmapped inside a chunk):

    slice_1d:  out[i]    = L(params + t_i u)              (T,)
    slice_2d:  out[i, j] = L(params + s_i u + t_j v)      (S, T)
    curve_losses: L(phi_theta(t_i)) (T,);   path_losses: L at each point of a path (T,)

``chunk`` points go together; the default, min(16, LOSSES_CHUNK_POINTS // (n + D))
(:data:`slt_relu.posterior.target.LOSSES_CHUNK_POINTS`, n the data's leading axis), bounds a chunk's memory
whatever the grid's size, and keeps a chunk's intermediates in cache (docs/benchmarks.md: 8 points a chunk ran
5x faster than 625 on a small network, 1 faster than 45 on a 1e5-parameter one).

References: H. Li, Z. Xu, G. Taylor, C. Studer, T. Goldstein, Visualizing the loss landscape of neural nets,
NeurIPS 2018 (arXiv:1712.09913); T. Garipov, P. Izmailov, D. Podoprikhin, D. Vetrov, A. G. Wilson, Loss
surfaces, mode connectivity, and fast ensembling of DNNs, NeurIPS 2018 (arXiv:1802.10026); F. Draxler,
K. Veschgini, M. Salmhofer, F. Hamprecht, Essentially no barriers in neural network energy landscape, ICML 2018
(arXiv:1803.00885); DSLT3 (the scaling symmetry).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_count, check_finite, check_number
from .hessian import top_eigenvalues
from .network import TwoLayer, check_params, from_flat, scaling_generators
from .posterior.target import LOSSES_CHUNK_POINTS
from .pytree import unravel_fn
from .symmetry import rescale

__all__ = ["bezier_curve", "bezier_points", "curve_losses", "hessian_directions", "path_losses", "random_direction",
           "scaling_direction", "scaling_orbit", "segment", "slice_1d", "slice_2d"]

NORMALIZATIONS = ("filter", "layer", None)


def _flat_params(params, name: str = "params"):
    """(flat (D,), unravel) of a pytree of finite floating-point arrays with D >= 1; else ValueError naming it."""
    check_finite(params, name)
    flat, unravel = unravel_fn(params)
    if not jnp.issubdtype(flat.dtype, jnp.floating) or flat.size == 0:
        got = f"{flat.dtype} arrays" if flat.size else "no numbers"
        raise ValueError(f"{name}: expected a pytree of floating-point arrays (D >= 1 numbers), got {got}")
    return flat, unravel


def _flat_like(tree, unravel, dtype, name: str) -> jax.Array:
    """The flat (D,) vector of a pytree of params' structure and leaf shapes, finite; else ValueError naming it."""
    leaves, treedef = jax.tree.flatten(tree)
    if treedef != unravel.treedef:
        raise ValueError(f"{name}: expected a pytree of params' structure {unravel.treedef}, got {treedef}")
    shapes = tuple(np.shape(a) for a in leaves)
    if shapes != tuple(unravel.shapes):
        raise ValueError(f"{name}: expected leaves of params' shapes {list(unravel.shapes)}, got {list(shapes)}")
    check_finite(tree, name)
    return unravel.ravel(tree).astype(dtype)


def _grid(values, name: str, dtype) -> jax.Array:
    """A non-empty 1-D array of finite real numbers in dtype; else ValueError naming it."""
    a = np.asarray(values)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iuf":
        got = f"shape {a.shape}" if a.dtype.kind in "iuf" else f"{a.dtype} values"
        raise ValueError(f"{name}: expected a non-empty 1-D array of finite numbers, got {got}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: expected finite numbers, got {np.count_nonzero(~np.isfinite(a))} NaN or infinite")
    return jnp.asarray(a, dtype)


def _loss(loss_fn, params, data):
    """loss_fn if it is a function whose value at (params, data) is a scalar; else TypeError / ValueError."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a function loss_fn(params, data), got {type(loss_fn).__name__}")
    shape = jax.eval_shape(lambda p, d: loss_fn(p, d), params, data).shape
    if shape != ():
        raise ValueError(f"loss_fn: expected a scalar loss_fn(params, data), got shape {shape}")
    return loss_fn


def _key(key):
    from .sampling import check_keys
    return jax.random.wrap_key_data(check_keys(key, "key", batch_ndim=0))


def _chunk(chunk, data, D: int, points: int) -> int:
    """chunk, checked, or the default min(16, LOSSES_CHUNK_POINTS // (n + D)); at most the number of points."""
    if chunk is None:
        n = max((int(np.shape(a)[0]) for a in jax.tree.leaves(data) if np.ndim(a) >= 1), default=1)
        chunk = max(1, min(16, LOSSES_CHUNK_POINTS // (n + D)))
    return min(check_count(chunk, "chunk"), points)


def _two_layer(params, name: str = "params") -> TwoLayer:
    check_params(params)
    if np.ndim(params.w) != 2:
        raise ValueError(f"{name}: expected one network (w of shape (d, n_in)), got w of shape {np.shape(params.w)}")
    check_finite(params, name)
    return params


def _node(node, d: int) -> int:
    if isinstance(node, (bool, np.bool_)) or not isinstance(node, (int, np.integer)) or not 0 <= node < d:
        raise ValueError(f"node: expected an integer in [0, {d}), got {node!r}")
    return int(node)


def _rescaled(d, p, axis):
    """d with each slice along axis (a filter) rescaled to the norm of p's: d_r norm(p_r) / norm(d_r)."""
    dm, pm = jnp.moveaxis(d, axis, 0), jnp.moveaxis(p, axis, 0)
    dn = jnp.linalg.norm(dm.reshape(dm.shape[0], -1), axis=1)
    pn = jnp.linalg.norm(pm.reshape(pm.shape[0], -1), axis=1)
    scale = (pn / jnp.where(dn > 0, dn, 1)).reshape((-1,) + (1,) * (dm.ndim - 1))
    return jnp.moveaxis(dm * scale, 0, axis)


@partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _direction(key, leaves, weights, normalize, ignore_bias, filter_axis):
    out = []
    for k, p, weight in zip(jax.random.split(key, len(leaves)), leaves, weights):
        d = jax.random.normal(k, p.shape, p.dtype)
        if normalize is None:
            out.append(d)
        elif not weight and ignore_bias:
            out.append(jnp.zeros_like(p))
        elif normalize == "filter" and p.ndim >= 2:
            out.append(_rescaled(d, p, filter_axis))
        else:                                                 # the leaf as one filter
            out.append(_rescaled(d.reshape(1, -1), p.reshape(1, -1), 0).reshape(p.shape))
    return out


def random_direction(key, params, *, normalize: str | None = "filter", ignore_bias: bool = True,
                     filter_axis: int = 0):
    """A Gaussian direction d ~ N(0, I) shaped like params, normalised as Li et al. 2018 (Section 4).

        "filter":  d_r <- d_r norm(w_r) / norm(d_r)   for every filter r (a slice along filter_axis) of a weight
        "layer":   d_l <- d_l norm(w_l) / norm(d_l)   for every weight leaf l;   None: d, raw

    A weight is a leaf of two or more axes (``filter_axis=0``: rows, the output units of ``w (n_out, n_in)`` in
    :class:`slt_relu.mlp.MLP` and ``TwoLayer``; -1 for Flax's ``kernel (n_in, n_out)``), and a ``TwoLayer``'s q
    (its output layer's one filter).  Other leaves (biases) are zero with ``ignore_bias`` (Li et al.'s
    default), else normalised as one filter.

    Args:
        key: a PRNG key.
        params: the point, a parameter pytree of floating-point arrays.
        normalize: "filter", "layer" or None.
        ignore_bias: zero the directions of biases (leaves of fewer than two axes).
        filter_axis: the axis of a weight leaf along which its filters lie (0: rows).

    Returns:
        a direction, a pytree of params' structure, leaf shapes and dtypes.
    """
    key = _key(key)
    _flat_params(params)
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize: expected one of {list(NORMALIZATIONS)}, got {normalize!r}")
    if isinstance(filter_axis, (bool, np.bool_)) or not isinstance(filter_axis, (int, np.integer)):
        raise ValueError(f"filter_axis: expected an integer axis, got {filter_axis!r}")
    leaves, treedef = jax.tree.flatten(params)
    leaves = [jnp.asarray(p) for p in leaves]
    weights = [p.ndim >= 2 for p in leaves]
    if isinstance(params, TwoLayer):
        weights[2] = True                                     # q: the (1, d) output layer
    if normalize == "filter" and any(p.ndim >= 2 and not -p.ndim <= filter_axis < p.ndim for p in leaves):
        raise ValueError(f"filter_axis: expected an axis of every weight leaf, got {filter_axis}")
    out = _direction(key, leaves, tuple(weights), normalize, bool(ignore_bias), int(filter_axis))
    return jax.tree.unflatten(treedef, out)


def hessian_directions(loss_fn: Callable, params, data, k: int, key, *, num_iters: int | None = None):
    """The Hessian's eigenvectors of the k largest eigenvalues at params, as directions (Lanczos's method:
    :func:`slt_relu.hessian.top_eigenvalues`; an eigenvector's sign is arbitrary).

        H v_j = lambda_j v_j,   lambda_1 >= ... >= lambda_k,   norm(v_j) = 1 (flat)

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable).
        params: the point, a parameter pytree.
        data: loss_fn's data (any pytree; None for a loss without data).
        k: how many, in [1, D].
        key: a PRNG key (Lanczos's starting vector).
        num_iters: Lanczos steps if more than 2k + 20 (:func:`slt_relu.hessian.top_eigenvalues`).

    Returns:
        (eigenvalues (k,) NumPy, [v_1, ..., v_k] a list of k directions shaped like params).
    """
    _, unravel = _flat_params(params)
    values, vectors = top_eigenvalues(_loss(loss_fn, params, data), params, data, k, key, num_iters=num_iters,
                                      return_vectors=True)
    return values, [unravel(jnp.asarray(v)) for v in vectors]


def scaling_direction(params, node: int, *, model=None):
    """The scaling generator of a hidden node as a direction (DSLT3 Appendix 1), d/d alpha at alpha = 1 of
    (alpha w_i, alpha b_i, q_i / alpha):

        v_i:  (w_i, b_i) in node i's (w, b) slots,  -q_i in its q slot,  zero elsewhere

    grad_w f . v_i = 0 where f is differentiable: L is flat to first order along params + t v_i, and constant
    along the orbit (:func:`scaling_orbit`), not along the line.

    Args:
        params: a ``TwoLayer`` (one network), or the parameters of ``model``.
        node: the hidden node i, in [0, d) (for a model, a row of ``model.scaling_generators(params)``).
        model: None for a ``TwoLayer``; else a :class:`slt_relu.models.Model` with scaling generators (an MLP's).

    Returns:
        v_i, a direction shaped like params (:func:`slt_relu.network.scaling_generators`' row).
    """
    if model is None:
        params = _two_layer(params)
        rows = scaling_generators(params)
        return from_flat(rows[_node(node, rows.shape[0])], params.width, params.n_in)
    from .models import check_model
    check_model(model)
    _flat_like(params, model.structure, jnp.result_type(*jax.tree.leaves(params)), "params")
    rows = model.scaling_generators(params)
    return model.unravel(rows[_node(node, rows.shape[0])])


def scaling_orbit(params: TwoLayer, node: int, alphas) -> TwoLayer:
    """The scaling orbit of a node of a two-layer network: (alpha w_i, alpha b_i, q_i / alpha) for each alpha.

    f, hence any loss of f, is the same at every point (relu(alpha z) = alpha relu(z), alpha > 0).

    Args:
        params: one ``TwoLayer``.
        node: the node i, in [0, d).
        alphas: (A,) positive factors.

    Returns:
        a ``TwoLayer`` with a leading axis A (:func:`path_losses` evaluates a loss along it): Petzka et al.'s
        rho_lambda (:func:`slt_relu.symmetry.rescale`) on one node.
    """
    params = _two_layer(params)
    i = _node(node, params.width)
    alphas = _grid(alphas, "alphas", params.w.dtype)
    check_number(alphas, "alphas", what="scaling factor")
    lambdas = jnp.ones((alphas.shape[0], params.width), params.w.dtype).at[:, i].set(alphas)
    return jax.vmap(rescale, (None, 0))(params, lambdas)


def segment(params_a, params_b):
    """The direction b - a from one solution to another: ``slice_1d(loss_fn, params_a, data, segment(a, b),
    ts)`` with ts in [0, 1] is L along the straight segment (1 - t) a + t b.

    Returns b - a, a direction shaped like params_a (params_b: of a's structure and shapes).
    """
    a, unravel = _flat_params(params_a, "params_a")
    b = _flat_like(params_b, unravel, a.dtype, "params_b")
    return unravel(b - a)


def _bezier_coefficients(ts):
    """(T, 3): (1 - t)^2, 2 t (1 - t), t^2 of each t, the weights of a, theta, b."""
    return jnp.stack([(1 - ts) ** 2, 2 * ts * (1 - ts), ts ** 2], axis=-1)


def _curve_args(params_a, theta, params_b):
    a, unravel = _flat_params(params_a, "params_a")
    basis = jnp.stack([a, _flat_like(theta, unravel, a.dtype, "theta"),
                       _flat_like(params_b, unravel, a.dtype, "params_b")])
    return basis, unravel


def bezier_points(params_a, theta, params_b, ts):
    """The points phi(t) = (1 - t)^2 a + 2 t (1 - t) theta + t^2 b, t in ts (T,), of the quadratic Bezier curve
    from params_a to params_b with control point theta (pytrees of a's structure): a pytree whose leaves have a
    leading axis T (phi(0) = a and phi(1) = b exactly)."""
    basis, unravel = _curve_args(params_a, theta, params_b)
    coeffs = _bezier_coefficients(_grid(ts, "ts", basis.dtype))
    return jax.vmap(lambda c: unravel(c @ basis))(coeffs)


@partial(jax.jit, static_argnums=(0, 1, 7, 8))
def _fit_bezier(loss_fn, unravel, a, b, theta0, data, key, num_steps, samples, learning_rate):
    import optax

    opt = optax.adam(learning_rate)
    basis = lambda theta: jnp.stack([a, theta, b])
    objective = lambda theta, ts: jnp.mean(jax.vmap(
        lambda c: loss_fn(unravel(c @ basis(theta)), data))(_bezier_coefficients(ts)))

    def step(carry, k):
        theta, state = carry
        grad = jax.grad(objective)(theta, jax.random.uniform(k, (samples,), a.dtype))
        updates, state = opt.update(grad, state, theta)
        return (optax.apply_updates(theta, updates), state), None

    (theta, _), _ = jax.lax.scan(step, (theta0, opt.init(theta0)), jax.random.split(key, num_steps))
    return theta


def bezier_curve(loss_fn: Callable, params_a, params_b, data, key, *, num_steps: int = 1000,
                 learning_rate: float = 1e-2, samples_per_step: int = 1, init=None, init_noise: float = 0.1):
    """The control point theta of a low-loss quadratic Bezier curve from a to b (Garipov et al. 2018).

        theta* = argmin_theta E_{t ~ U[0, 1]} L(phi_theta(t)),  phi_theta(t) = (1 - t)^2 a + 2 t (1 - t) theta + t^2 b

    by ``num_steps`` steps of Adam (optax) on the mean of L(phi_theta(t)) over ``samples_per_step`` fresh
    t ~ U[0, 1], one compiled ``lax.scan``, from ``init`` or the midpoint (a + b) / 2 plus Gaussian noise of
    norm about init_noise norm(b - a) (from the exact midpoint of a symmetric valley, such as a ring around a
    peak, the gradient never leaves the segment).

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable).
        params_a: a, a parameter pytree (a solution).
        params_b: b, of a's structure (another).
        data: loss_fn's data (any pytree; None for a loss without data).
        key: a PRNG key (the start's noise and the t's).
        num_steps: Adam's steps, >= 1.
        learning_rate: Adam's step size, > 0.
        samples_per_step: t's per step, >= 1.
        init: the starting control point (a's structure), or None.
        init_noise: the start's noise relative to norm(b - a) when init is None, >= 0.

    Returns:
        theta, a pytree of a's structure (:func:`curve_losses` and :func:`bezier_points` take it).
    """
    a, unravel = _flat_params(params_a, "params_a")
    b = _flat_like(params_b, unravel, a.dtype, "params_b")
    _loss(loss_fn, params_a, data)
    key = _key(key)
    steps, samples = check_count(num_steps, "num_steps"), check_count(samples_per_step, "samples_per_step")
    rate = float(check_number(learning_rate, "learning_rate", what="learning rate"))
    noise = float(check_number(init_noise, "init_noise", what="relative noise", nonnegative=True))
    init_key, fit_key = jax.random.split(key)
    if init is None:
        z = jax.random.normal(init_key, a.shape, a.dtype)
        theta0 = 0.5 * (a + b) + noise * jnp.linalg.norm(b - a) / np.sqrt(a.size) * z
    else:
        theta0 = _flat_like(init, unravel, a.dtype, "init")
    return unravel(_fit_bezier(loss_fn, unravel, a, b, theta0, data, fit_key, steps, samples, rate))


@partial(jax.jit, static_argnums=(0, 1, 5))
def _plane_losses(loss_fn, unravel, basis, coeffs, data, chunk):
    return jax.lax.map(lambda c: loss_fn(unravel(c @ basis), data), coeffs, batch_size=chunk)


@partial(jax.jit, static_argnums=(0, 1, 4))
def _point_losses(loss_fn, unravel, points, data, chunk):
    return jax.lax.map(lambda w: loss_fn(unravel(w), data), points, batch_size=chunk)


def _slice(loss_fn, params, data, directions: dict, grids: dict, chunk):
    """L(params + sum_k g_k d_k) over the product of the grids, shaped (len(g_1), ...)."""
    flat, unravel = _flat_params(params)
    basis = jnp.stack([flat] + [_flat_like(d, unravel, flat.dtype, name) for name, d in directions.items()])
    grids = [_grid(g, name, flat.dtype) for name, g in grids.items()]
    mesh = jnp.meshgrid(*grids, indexing="ij")
    coeffs = jnp.stack([jnp.ones(mesh[0].size, flat.dtype)] + [m.reshape(-1) for m in mesh], axis=-1)
    chunk = _chunk(chunk, data, flat.size, coeffs.shape[0])
    out = _plane_losses(_loss(loss_fn, params, data), unravel, basis, coeffs, data, chunk)
    return out.reshape(mesh[0].shape)


def slice_1d(loss_fn: Callable, params, data, direction, ts, *, chunk: int | None = None) -> jax.Array:
    """L along a line through params: out[i] = L(params + t_i u).

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable: the compiled program is reused).
        params: the centre, a parameter pytree.
        data: loss_fn's data (any pytree; None for a loss without data).
        direction: u, a direction shaped like params (finite).
        ts: (T,) offsets, finite.
        chunk: points evaluated together (memory; default from the module docstring's budget).

    Returns:
        (T,) the loss, in params' dtype.
    """
    return _slice(loss_fn, params, data, {"direction": direction}, {"ts": ts}, chunk)


def slice_2d(loss_fn: Callable, params, data, u, v, s, t, *, chunk: int | None = None) -> jax.Array:
    """L over a plane through params: out[i, j] = L(params + s_i u + t_j v).

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable: the compiled program is reused).
        params: the centre, a parameter pytree.
        data: loss_fn's data (any pytree; None for a loss without data).
        u: the first direction, shaped like params (finite).
        v: the second.
        s: (S,) offsets along u, finite.
        t: (T,) offsets along v, finite.
        chunk: points evaluated together (memory; default from the module docstring's budget).

    Returns:
        (S, T) the loss, in params' dtype.
    """
    return _slice(loss_fn, params, data, {"u": u, "v": v}, {"s": s, "t": t}, chunk)


def curve_losses(loss_fn: Callable, params_a, theta, params_b, data, ts, *, chunk: int | None = None) -> jax.Array:
    """L along the quadratic Bezier curve of control point theta: out[i] = L(phi_theta(t_i)).

    params_a (a), theta (:func:`bezier_curve`) and params_b (b) are pytrees of one structure; ts (T,) the curve's
    parameters (t in [0, 1] runs from a to b); loss_fn, data and chunk as :func:`slice_1d`'s.  Returns (T,).
    """
    basis, unravel = _curve_args(params_a, theta, params_b)
    coeffs = _bezier_coefficients(_grid(ts, "ts", basis.dtype))
    chunk = _chunk(chunk, data, basis.shape[1], coeffs.shape[0])
    return _plane_losses(_loss(loss_fn, params_a, data), unravel, basis, coeffs, data, chunk)


def path_losses(loss_fn: Callable, path, data, *, chunk: int | None = None) -> jax.Array:
    """L at every point of a path: path a pytree whose leaves have a leading axis T (:func:`scaling_orbit`,
    :func:`bezier_points`, a training trajectory), out[i] = L(path[i]).

    path's leaves are (T, ...), one common T >= 1; loss_fn, data and chunk as :func:`slice_1d`'s.  Returns (T,).
    """
    leaves = [jnp.asarray(a) for a in jax.tree.leaves(path)]
    sizes = {a.shape[0] if a.ndim else 0 for a in leaves}
    if len(sizes) != 1 or sizes == {0}:
        raise ValueError(f"path: expected leaves with one common leading axis T >= 1, got sizes {sorted(sizes)}")
    first, unravel = _flat_params(jax.tree.map(lambda a: a[0], path), "path")
    check_finite(path, "path")
    points = jnp.concatenate([a.reshape(a.shape[0], -1).astype(first.dtype) for a in leaves], axis=1)
    chunk = _chunk(chunk, data, first.size, points.shape[0])
    return _point_losses(_loss(loss_fn, unravel(first), data), unravel, points, data, chunk)
