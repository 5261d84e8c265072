"""Sattelberg et al. (2020)'s analysis of the local affine maps of a ReLU classifier on a data set.

A ReLU MLP f: R^n -> R^o is affine on the activation region of each input x_i: f(y) = W_i y + b_i there
(:func:`slt_relu.mlp.local_affine_maps`).  Output j's map is a point of the "dual space" R^(n+1), the row
[w_{i,j}^T, b_{i,j}] of C_j (their eq. 5.3; :func:`slt_relu.mlp.dual_points`), built from the training points;
C~_j is built the same way from the test points.  Two analyses of section 5, for any data set:

- Clustering (section 5.1, Table 1): k-means (:func:`slt_relu.regions.kmeans`) on the rows of each C_j, j = 1..o;
  each test row of C~_j is replaced by its nearest centre c_{j,a}, the outputs are rebuilt from the centres,
  g_j(x) = c_{j,a_j(x)} . (x, 1), and x is classified by argmax_j g_j(x).  k = 1 is a single affine classifier
  (the mean of the local maps); with one centre per distinct map g = f.
- Maps between networks (section 5.2, Table 2): least squares M_j (n+1, n+1) minimising ||C_{j,A} M_j - C_{j,B}||
  (eq. 5.4, as :func:`slt_relu.regions.affine_map_between`, with a rank cut-off); network A's test maps sent
  through M_j, g_j(x) = (C~_{j,A} M_j)_x . (x, 1), classify by argmax_j g_j(x).

The paper's tables count correct test labels out of MNIST's 10,000; here accuracies are fractions of the points
given.  Its Table 2 reports accuracy only; the fit's relative error and R^2 are added here.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_count, check_finite, check_number
from .mlp import MLP, activation_patterns, check_mlp, local_affine_maps, mlp_forward
from .regions import distinct_patterns, kmeans

__all__ = ["ClusterAccuracy", "MapBetween", "cluster_accuracy", "map_between"]


def _check_points(params: MLP, x, name: str) -> np.ndarray:
    n_in = params.widths[0]
    a = np.asarray(x)
    if a.ndim != 2 or a.shape[1] != n_in or a.shape[0] < 1 or a.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected (p, {n_in}) real points with p >= 1, got shape {a.shape}")
    check_finite(a, name)
    return a


def _check_labels(y, p: int, n_out: int, name: str = "y") -> np.ndarray:
    a = np.asarray(y)
    if a.shape != (p,) or a.dtype.kind not in "iu" or a.min() < 0 or a.max() >= n_out:
        raise ValueError(f"{name}: expected ({p},) integer labels in [0, {n_out}) (one per point), got dtype "
                         f"{a.dtype}, shape {a.shape}")
    return a


def _classifier(params, name: str = "params") -> MLP:
    check_mlp(params)
    for k, layer in enumerate(params.layers):
        check_finite(layer.w, f"{name}.layers[{k}].w")
        check_finite(layer.b, f"{name}.layers[{k}].b")
    if params.widths[-1] < 2:
        raise ValueError(f"{name}: a classifier needs n_L >= 2 outputs, got widths {list(params.widths)}")
    return params


def _duals(params: MLP, x) -> jax.Array:
    """Every output's dual points at the points x (p, n): (o, p, n + 1), row j, i = [w_{i,j}^T, b_{i,j}]."""
    W, b = local_affine_maps(params, x)                         # (p, o, n), (p, o)
    return jnp.concatenate([W, b[..., None]], -1).transpose(1, 0, 2)


@jax.jit
def _rebuilt_logits(centres, duals, x):
    """Per output j: the centre nearest each point's dual point, evaluated at the point.
    centres (o, k, n+1), duals (o, p, n+1), x (p, n) -> (p, o)."""
    def one(c, d):
        nearest = jnp.argmin(jnp.sum((d[:, None, :] - c[None]) ** 2, -1), 1)
        return c[nearest]
    chosen = jax.vmap(one)(centres, duals)                       # (o, p, n+1)
    return jnp.einsum("opn,pn->po", chosen[..., :-1], x) + chosen[..., -1].T


class ClusterAccuracy(NamedTuple):
    """Sattelberg et al.'s Table 1 for one network: accuracy with k clustered local maps per output.

    Attributes:
        ks: (m,) the numbers of centres per output.
        accuracy: (m,) the fraction of the points x whose label is argmax_j g_j(x), g rebuilt from k centres.
        correct: (m,) the number of such points (the paper's Table 1 counts).
        network_accuracy: the network's own accuracy at x (the table's "Original" row).
        regions: the number of distinct activation patterns among the fitted points (each its own affine map).
    """

    ks: np.ndarray
    accuracy: np.ndarray
    correct: np.ndarray
    network_accuracy: float
    regions: int


def cluster_accuracy(key: jax.Array, params: MLP, x, y, ks: Sequence[int], *, fit_x=None,
                     iters: int = 100) -> ClusterAccuracy:
    """The accuracy of a ReLU classifier whose local affine maps are clustered into k per output (Table 1).

    For each output j = 1..o, k-means (k-means++ seeding, ``iters`` Lloyd steps; :func:`slt_relu.regions.kmeans`,
    key ``split(fold_in(key, k), o)[j]``) on the rows of C_j, the dual points at ``fit_x`` (p_fit, n + 1), gives
    centres c_{j,1..k}.  Each point x_i of x is assigned, per output, the centre nearest its own dual point,
    a_j(i) = argmin_a ||C~_j[i] - c_{j,a}||, and classified by

        argmax_j g_j(x_i),   g_j(x_i) = c_{j,a_j(i)} . (x_i, 1).

    The paper fits on the training set and evaluates on the test set: ``fit_x = x_train``, ``x = x_test``.  With
    k = 1 the classifier is the single affine map (mean_i W_i, mean_i b_i) over fit_x; with k at least the
    number of distinct local maps among the points (fit_x = x) every point keeps its own map, g = f.

    Args:
        key: a PRNG key.
        params: the classifier, an MLP with widths (n, ..., o), o >= 2.
        x: (p, n) the points where accuracy is measured.
        y: (p,) their integer labels in [0, o).
        ks: the numbers of centres per output, each in 1..p_fit.
        fit_x: (p_fit, n) the points whose local maps are clustered (default: x).
        iters: Lloyd iterations of k-means, >= 0 (default 100).

    Returns:
        ClusterAccuracy(ks, accuracy, correct, network_accuracy, regions).

    References:
        Sattelberg, Cavalieri, Kirby, Peterson & Beveridge 2020, "Locally linear attributes of ReLU neural
        networks", section 5.1 and Table 1; Arthur & Vassilvitskii 2007 (k-means++).
    """
    params = _classifier(params)
    x = _check_points(params, x, "x")
    y = _check_labels(y, x.shape[0], params.widths[-1])
    fit = x if fit_x is None else _check_points(params, fit_x, "fit_x")
    iters = check_count(iters, "iters", minimum=0)
    ks_list = list(ks) if np.ndim(ks) else [ks]
    if not ks_list or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= fit.shape[0]
                          for k in ks_list):
        raise ValueError(f"ks: expected integers in [1, {fit.shape[0]}] (at most the {fit.shape[0]} fitted points), "
                         f"got {ks_list}")
    dtype = params.layers[0].w.dtype
    xj, fj = jnp.asarray(x, dtype), jnp.asarray(fit, dtype)
    C_fit, C_x = _duals(params, fj), _duals(params, xj)
    n_out = params.widths[-1]
    correct = []
    for k in ks_list:
        keys = jax.random.split(jax.random.fold_in(key, int(k)), n_out)
        centres = jnp.stack([kmeans(keys[j], C_fit[j], int(k), iters).centres for j in range(n_out)])
        pred = np.asarray(jnp.argmax(_rebuilt_logits(centres, C_x, xj), -1))
        correct.append(int(np.sum(pred == y)))
    own = np.asarray(jnp.argmax(mlp_forward(params, xj), -1))
    correct = np.array(correct)
    return ClusterAccuracy(np.array(ks_list, int), correct / x.shape[0], correct, float(np.mean(own == y)),
                           distinct_patterns(np.asarray(activation_patterns(params, fj)))[0])


class MapBetween(NamedTuple):
    """Sattelberg et al.'s Table 2 for one ordered pair of networks (A to B).

    Attributes:
        maps: (o, n+1, n+1) M_j, the least-squares map of A's dual points onto B's for output j (from fit_x).
        fit_error: (o,) ||C_{j,A} M_j - C_{j,B}||_F / ||C_{j,B}||_F at fit_x.
        relative_error: (o,) the same at x.
        r2: (o,) 1 - ||C~_{j,A} M_j - C~_{j,B}||_F^2 / ||C~_{j,B} - mean||_F^2 at x (the mean over points).
        accuracy: the fraction of x classified right by argmax_j g_j, g from A's maps through M (NaN without y).
        target_accuracy: network B's own accuracy at x (the table's diagonal; NaN without y).
    """

    maps: np.ndarray
    fit_error: np.ndarray
    relative_error: np.ndarray
    r2: np.ndarray
    accuracy: float
    target_accuracy: float


def map_between(params_a: MLP, params_b: MLP, x, y=None, *, fit_x=None, rtol: float | None = None) -> MapBetween:
    """The least-squares maps between two networks' local affine maps, output by output (Table 2).

    For each output j, with C_{j,A}, C_{j,B} (p_fit, n + 1) the dual points of A and B at ``fit_x``
    (rows [w_{i,j}^T, b_{i,j}]),

        M_j = argmin_M ||C_{j,A} M - C_{j,B}||_F                    (eq. 5.4; NumPy's lstsq, float64)

    the minimum-norm solution, singular values of C_{j,A} below rtol * s_max taken as zero.  C_{j,A} often has rank
    r < n + 1: w_{i,j} lies in the span of the first layer's rows that are active at some point of fit_x, so
    r <= n_1 + 1.  M_j is then unique only on that row space; from a network to itself it is the orthogonal
    projector onto it, which fixes every dual point (the identity when r = n + 1).  The default rtol,
    max(p_fit, n + 1) * eps(A's dtype), is NumPy's rank rule at the precision the dual points were computed in:
    without it the rounding (~1e-8 s_max in float32) along the missing directions is inverted into huge entries of
    M_j, which blow up at any point of x where a first-layer neuron that is off on all of fit_x is on.  At x,
    network A's dual points are mapped, g_j(x_i) = (C~_{j,A} M_j)[i] . (x_i, 1), and x_i is classified by
    argmax_j g_j(x_i).  The paper fits on the training set and evaluates on the test set: ``fit_x = x_train``,
    ``x = x_test``.  Its least-squares model is eq. 5.4 as written: no intercept in the dual space.

    Args:
        params_a: network A (the source), an MLP with widths (n, ..., o).
        params_b: network B (the target), widths (n, ..., o): the same n and o, any hidden layers.
        x: (p, n) the points where the maps are evaluated.
        y: (p,) integer labels in [0, o) for the accuracies (default None: NaN accuracies).
        fit_x: (p_fit, n) the points whose dual points fit M (default: x).
        rtol: >= 0, the relative cut-off of C_{j,A}'s singular values (default max(p_fit, n + 1) * eps(dtype)).

    Returns:
        MapBetween(maps, fit_error, relative_error, r2, accuracy, target_accuracy).

    References:
        Sattelberg et al. 2020, section 5.2 and Table 2; McNeely-White et al. 2020 (affine maps between the
        feature vectors of networks).
    """
    params_a, params_b = _classifier(params_a, "params_a"), _classifier(params_b, "params_b")
    ends_a, ends_b = (params_a.widths[0], params_a.widths[-1]), (params_b.widths[0], params_b.widths[-1])
    if ends_a != ends_b:
        raise ValueError(f"params_b: expected the inputs and outputs (n, o) = {ends_a} of params_a, got widths "
                         f"{list(params_b.widths)}")
    x = _check_points(params_a, x, "x")
    y = None if y is None else _check_labels(y, x.shape[0], ends_a[1])
    fit = x if fit_x is None else _check_points(params_a, fit_x, "fit_x")
    if rtol is None:
        rtol = max(fit.shape[0], fit.shape[1] + 1) * float(jnp.finfo(params_a.layers[0].w.dtype).eps)
    rtol = float(check_number(rtol, "rtol", nonnegative=True))
    duals = {}
    for name, params in (("a", params_a), ("b", params_b)):
        dtype = params.layers[0].w.dtype
        duals[name] = (np.asarray(_duals(params, jnp.asarray(fit, dtype)), np.float64),
                       np.asarray(_duals(params, jnp.asarray(x, dtype)), np.float64))
    (fa, xa), (fb, xb) = duals["a"], duals["b"]
    maps = np.stack([np.linalg.lstsq(fa[j], fb[j], rcond=rtol)[0] for j in range(fa.shape[0])])
    fit_error = _relative(np.einsum("opn,onm->opm", fa, maps), fb)
    mapped = np.einsum("opn,onm->opm", xa, maps)                  # (o, p, n+1): A's maps at x, through M_j
    residual = np.linalg.norm(mapped - xb, axis=(1, 2))
    spread = np.linalg.norm(xb - xb.mean(1, keepdims=True), axis=(1, 2))
    r2 = np.array([1 - (r / s) ** 2 if s > 0 else (1.0 if r == 0 else -np.inf) for r, s in zip(residual, spread)])
    accuracy = target = np.nan
    if y is not None:
        x64 = np.asarray(x, np.float64)
        logits = np.einsum("opn,pn->po", mapped[..., :-1], x64) + mapped[..., -1].T
        accuracy = float(np.mean(np.argmax(logits, 1) == y))
        own = np.asarray(mlp_forward(params_b, jnp.asarray(x, params_b.layers[0].w.dtype)))
        target = float(np.mean(np.argmax(own, 1) == y))
    return MapBetween(maps, fit_error, _relative(mapped, xb), r2, accuracy, target)


def _relative(mapped: np.ndarray, target: np.ndarray) -> np.ndarray:
    """||mapped_j - target_j||_F / ||target_j||_F per output j: (o, p, n+1) twice -> (o,)."""
    return np.linalg.norm(mapped - target, axis=(1, 2)) / np.maximum(np.linalg.norm(target, axis=(1, 2)), 1e-300)
