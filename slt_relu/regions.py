"""Linear regions, local affine maps and functional dimension of deep ReLU networks.

Sattelberg et al. (2020): an MLP is affine on each activation region (the set of inputs with one
activation pattern, a convex polytope); the local affine map (W_i, b_i) is a point of a "dual
space"; clustering those points (k-means) and rebuilding the outputs from the cluster centres;
the least-squares affine map M between two networks' dual points, min ||C_1 M - C_2||.

Grigsby, Lindsey & Rolnick (2023): the batch functional dimension at parameters theta and points
Z = {z_1..z_p} is rank d/dtheta (f_theta(z_1), .., f_theta(z_p)); it never exceeds
(number of parameters) - (number of hidden neurons) (one positive scaling per hidden neuron);
a network reaching the bound has no hidden symmetries (for enough generic points).

Region counts are of activation regions (Hanin & Rolnick 2019): along a segment exactly, by walking from breakpoint
to breakpoint; on any 2-D affine slice exactly, at any depth, by polygon subdivision (``exact_regions_2d``, as in
SplineCam, Humayun et al. 2023); on a 2-D box also by the line arrangement for one hidden layer (1 + lines crossing the
box + sum over crossing points of (lines through it - 1)), and as the distinct patterns on a grid (a lower bound).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .mlp import MLP, activation_patterns, check_mlp, check_widths, dual_points, flatten_mlp, mlp_forward, \
    num_mlp_params, unflatten_mlp
from .network import check_count, check_finite, check_number

__all__ = ["ClusteredMaps", "KMeans", "Regions2D", "SegmentRegions", "affine_map_between", "box_grid",
           "cluster_affine_maps", "count_linear_regions", "count_regions_box_exact", "count_regions_grid",
           "count_regions_segment", "distinct_patterns", "exact_regions_2d", "functional_dimension",
           "functional_dimension_bound", "kmeans", "parameter_jacobian", "regions_along_segment"]


def _check_finite_mlp(params: MLP) -> MLP:
    """ValueError naming the layer if a concrete weight or bias holds NaN or infinity."""
    for k, layer in enumerate(check_mlp(params).layers):
        check_finite(layer.w, f"params.layers[{k}].w")
        check_finite(layer.b, f"params.layers[{k}].b")
    return params


def _numpy_layers(params: MLP):
    _check_finite_mlp(params)
    return [(np.asarray(layer.w, np.float64), np.asarray(layer.b, np.float64)) for layer in params.layers]


class SegmentRegions(NamedTuple):
    """Activation regions along x(t) = start + t (end - start), t in [0, 1].

    count: number of maximal intervals with one activation pattern; breakpoints: (count - 1,) t values;
    patterns: (count, num_hidden) bool, the pattern on each interval.
    """

    count: int
    breakpoints: np.ndarray
    patterns: np.ndarray


def regions_along_segment(params: MLP, start, end) -> SegmentRegions:
    """Exact activation regions along a segment (every breakpoint found, none sampled).

    On the interval that starts at t every pre-activation is affine in t, z(s) = z0 + s z1, given
    the pattern just after t (a neuron with z(t) = 0 is on iff z1 > 0); the next breakpoint is the
    smallest root -z0/z1 > t over all hidden neurons.  Cost: O(regions x network size).
    """
    layers = _numpy_layers(params)
    a, e = np.asarray(start, np.float64), np.asarray(end, np.float64)
    n_in = layers[0][0].shape[1]
    if a.shape != (n_in,) or e.shape != (n_in,):
        raise ValueError(f"start, end: expected points of shape ({n_in},), got {a.shape} and {e.shape}")
    check_finite(a, "start")
    check_finite(e, "end")
    t, breaks, patterns = 0.0, [], []
    scale = 1e-12
    while True:
        h0, h1 = a, e - a
        pattern, nxt = [], 1.0
        for w, b in layers[:-1]:
            z0, z1 = w @ h0 + b, w @ h1
            zt = z0 + t * z1
            tol = scale * (np.abs(z0) + np.abs(z1) + 1)
            on = (zt > tol) | ((np.abs(zt) <= tol) & (z1 > 0))
            with np.errstate(divide="ignore", invalid="ignore"):
                roots = np.where(z1 != 0, -z0 / z1, np.inf)
            later = roots[roots > t + 1e-12]
            if later.size:
                nxt = min(nxt, float(later.min()))
            pattern.append(on)
            h0, h1 = np.where(on, z0, 0.0), np.where(on, z1, 0.0)
        pattern = np.concatenate(pattern) if pattern else np.zeros(0, bool)
        if not patterns or np.any(pattern != patterns[-1]):
            if patterns:
                breaks.append(t)
            patterns.append(pattern)
        if nxt >= 1.0:
            break
        t = nxt
    return SegmentRegions(len(patterns), np.array(breaks), np.array(patterns).reshape(len(patterns), -1))


def count_regions_segment(params: MLP, start, end) -> int:
    """Number of activation regions met along the segment [start, end] (exact)."""
    return regions_along_segment(params, start, end).count


def box_grid(half_width: float, resolution: int) -> np.ndarray:
    """The resolution x resolution grid on [-a, a]^2 as points (resolution^2, 2), x varying fastest;
    a > 0, resolution >= 2."""
    check_number(half_width, "half_width")
    resolution = check_count(resolution, "resolution", minimum=2)
    g = np.linspace(-half_width, half_width, resolution)
    return np.stack(np.meshgrid(g, g, indexing="xy"), -1).reshape(-1, 2)


def count_regions_grid(params: MLP, half_width: float, resolution: int) -> int:
    """Distinct activation patterns at the resolution x resolution grid on [-a, a]^2 (n_in = 2).

    Activation regions are convex, so this counts the regions that contain a grid point: a lower
    bound on the regions meeting the box that converges as the grid refines (regions thinner than
    the spacing are missed)."""
    _check_finite_mlp(params)
    if params.widths[0] != 2:
        raise ValueError(f"params: the grid count is for 2 inputs, got n_in = {params.widths[0]}")
    return distinct_patterns(np.asarray(_patterns_jit(params, jnp.asarray(box_grid(half_width, resolution)))))[0]


def distinct_patterns(patterns: np.ndarray) -> tuple[int, np.ndarray]:
    """Number of distinct rows of a (N, H) bool pattern array and the id of each row's pattern (N,)."""
    patterns = np.asarray(patterns).reshape(len(patterns), -1)
    if patterns.shape[1] == 0:
        return 1, np.zeros(len(patterns), int)
    unique, ids = np.unique(np.packbits(patterns, axis=1), axis=0, return_inverse=True)
    return int(unique.shape[0]), ids.reshape(-1)


@jax.jit
def _patterns_jit(params, x):
    return activation_patterns(params, x)


def count_regions_box_exact(params: MLP, half_width: float, tol: float = 1e-12) -> int:
    """Exact number of activation regions of a one-hidden-layer MLP (n_in = 2) inside (-a, a)^2.

    The regions are the cells of the arrangement of the neurons' lines <w_i, x> + b_i = 0 (identical
    lines counted once; neurons with w_i = 0 draw none): 1 + L + sum_p (k_p - 1), with L the lines
    that cross the open box and k_p the number of lines through each crossing point p inside it.
    """
    layers = _numpy_layers(params)
    if len(layers) != 2 or layers[0][0].shape[1] != 2:
        raise ValueError(f"params: the exact box count is for one hidden layer and 2 inputs, got widths "
                         f"{list(params.widths)}; use count_regions_grid")
    check_number(half_width, "half_width")
    check_number(tol, "tol", nonnegative=True)
    w, b = layers[0]
    a = float(half_width)
    corners = np.array([[-a, -a], [-a, a], [a, -a], [a, a]])
    lines = []
    for wi, bi in zip(w, b):
        norm = np.linalg.norm(wi)
        if norm <= tol:
            continue
        h = np.append(wi, bi) / norm
        vals = corners @ h[:2] + h[2]
        if not (vals.min() < -tol and vals.max() > tol):
            continue
        if any(min(np.linalg.norm(h - g), np.linalg.norm(h + g)) <= 1e-9 for g in lines):
            continue
        lines.append(h)
    points = []
    for i in range(len(lines)):
        for j in range(i + 1, len(lines)):
            A = np.array([lines[i][:2], lines[j][:2]])
            if abs(np.linalg.det(A)) <= 1e-12:
                continue
            p = np.linalg.solve(A, -np.array([lines[i][2], lines[j][2]]))
            if np.all(np.abs(p) < a - tol):
                points.append(p)
    total = 1 + len(lines)
    while points:                                    # group coincident crossings: k lines -> k(k-1)/2 pairs
        p = points.pop()
        same = [q for q in points if np.linalg.norm(q - p) <= 1e-9]
        points = [q for q in points if np.linalg.norm(q - p) > 1e-9]
        pairs = 1 + len(same)
        k = int(round((1 + np.sqrt(1 + 8 * pairs)) / 2))
        total += k - 1
    return total


def count_linear_regions(params: MLP, *, segment=None, half_width: float | None = None, resolution: int = 1000) -> int:
    """The number of activation regions along a segment or inside a 2-D box.

    Along ``segment = (start, end)``: exact.  Inside the box (-a, a)^2 for ``half_width = a``:
    exact for one hidden layer (``count_regions_box_exact``), else the distinct patterns on a
    resolution x resolution grid (``count_regions_grid``, a lower bound).  Pass exactly one of
    segment and half_width.

    Args:
        params: MLP.
        segment: (start, end), two points (n_0,).
        half_width: a, the box's half width (n_0 = 2).
        resolution: grid points per axis, >= 2 (box, two or more hidden layers).

    Returns:
        int: the number of activation regions.

    References:
        Hanin & Rolnick 2019 (activation regions); Sattelberg et al. 2020.
    """
    if (segment is None) == (half_width is None):
        raise ValueError("count_linear_regions: pass exactly one of segment=(start, end) or half_width=a")
    if segment is not None:
        if len(segment) != 2:
            raise ValueError(f"segment: expected (start, end), got {len(segment)} items")
        return count_regions_segment(params, *segment)
    check_mlp(params)
    check_count(resolution, "resolution", minimum=2)
    if params.depth == 2:
        return count_regions_box_exact(params, half_width)
    return count_regions_grid(params, half_width, resolution)


class Regions2D(NamedTuple):
    """The activation regions of an MLP on the square {origin + s u + t v : |s|, |t| <= a}, in (s, t).

    Attributes:
        count: the number of regions (pieces of positive area; their patterns are pairwise distinct).
        polygons: count (k_i, 2) float64 vertex arrays, convex and counter-clockwise.
        patterns: (count, num_hidden) bool, z > 0 of every hidden neuron (layers concatenated) on each region.
        maps: (A, c), A (count, n_out, 2) and c (count, n_out): f(origin + s u + t v) = A_i (s, t) + c_i on region i.
        zero_sets: per hidden layer, (m_l, 2, 2) segments (two (s, t) end points) where a neuron of the layer vanishes.
    """
    count: int
    polygons: tuple
    patterns: np.ndarray
    maps: tuple
    zero_sets: tuple


def _split(V, z, tol, along):
    """Convex V (k, 2) cut where affine z (k,) at V (|z| <= tol: 0) vanishes: ([z <= 0, z >= 0], cut) or ([V], None)."""
    side, nxt = np.sign(np.where(np.abs(z) <= tol, 0.0, z)), np.roll(np.arange(len(z)), -1)
    if not side.max() > 0 > side.min():
        return [V], None
    cross = side * side[nxt] < 0                                        # edge i -> i+1 crosses: add its crossing point
    points = np.hstack([V, V + np.divide(z, z - z[nxt], where=cross, out=0 * z)[:, None] * (V[nxt] - V)]).reshape(-1, 2)
    lo, hi, cut = (points[np.stack([keep, cross], 1).ravel()] for keep in (side <= 0, side >= 0, side == 0))
    return [lo, hi], cut[np.argsort(cut @ along)[[0, -1]]]


def exact_regions_2d(params: MLP, origin, u, v, half_width: float, *, max_regions: int = 1_000_000) -> Regions2D:
    """Exact activation regions of a deep ReLU MLP on the 2-D slice x(s, t) = origin + s u + t v, |s|, |t| <= a.

    Polygon subdivision (float64) from the square, M_0 = (u, v, origin): for l = 1..L-1, on each piece (convex, with
    h_{l-1} = M_{l-1} (s, t, 1)) z_l = Z (s, t, 1), Z = W_l M_{l-1} + (0, 0, b_l); cut it along each crossing line
    z_{l,j} = 0 (|z| <= 1e-10 |grad z| diam + rounding is 0: no slivers), then M_l = diag(z_l > 0) Z on each new piece.
    Pieces parted by a cut differ in its sign, and a pattern's region is convex: no region is counted twice.

    Args:
        params: MLP with widths (n_0, ..., n_L), finite.
        origin: (n_0,) the square's centre.
        u: (n_0,) the direction of s.
        v: (n_0,) the direction of t, not parallel to u.
        half_width: a > 0.
        max_regions: a bound on the pieces (ValueError beyond it): a huge network cannot exhaust memory.

    Returns:
        Regions2D(count, polygons, patterns, maps=(A, c), zero_sets) in the slice's (s, t) coordinates.

    References:
        Hanin & Rolnick 2019; Humayun et al. 2023 (SplineCam); Sattelberg et al. 2020.
    """
    layers, n, zero_sets = _numpy_layers(params), params.widths[0], []
    o, u, v = (np.asarray(x, np.float64) for x in (origin, u, v))
    for x, name in ((o, "origin"), (u, "u"), (v, "v")):
        if x.shape != (n,) or not np.all(np.isfinite(x)):
            raise ValueError(f"{name}: expected {n} finite numbers (shape (n_in,)), got {x.tolist()}")
    if not np.linalg.cond(np.stack([u / (np.linalg.norm(u) or 1), v / (np.linalg.norm(v) or 1)])) < 1e10:
        raise ValueError(f"u, v: expected two non-parallel directions, got u = {u.tolist()} and v = {v.tolist()}")
    a, max_regions = float(check_number(half_width, "half_width")), check_count(max_regions, "max_regions")
    pieces = [(a * np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]), np.stack([u, v, o], 1), np.zeros(0, bool))]
    for w, b in layers[:-1]:
        out, cuts = [], []
        for V, M, pattern in pieces:
            Z, R = w @ M + np.outer(b, [0, 0, 1]), np.abs(V).max()      # z_l = Z (s, t, 1) on this piece
            tol = 1e-10 * np.abs(Z[:, :2]).sum(1) * np.ptp(V, 0).max() + 1e-12 * (abs(w) @ abs(M) @ [R, R, 1] + abs(b))
            zv, parts = V @ Z[:, :2].T + Z[:, 2], [V]
            for j in np.flatnonzero(np.minimum(zv.max(0), -zv.min(0)) > tol):               # the lines crossing V
                done = [_split(Q, Q @ Z[j, :2] + Z[j, 2], tol[j], [-Z[j, 1], Z[j, 0]]) for Q in parts]
                parts = [P for halves, _ in done for P in halves]
                cuts += [c for _, c in done if c is not None]
                if len(out) + len(parts) > max_regions:
                    raise ValueError(f"max_regions: more than {max_regions} regions on this slice")
            out += [(Q, on[:, None] * Z, np.r_[pattern, on]) for Q in parts for on in [Z @ np.r_[Q.mean(0), 1] > 0]]
        pieces, zero_sets = out, zero_sets + [np.array(cuts).reshape(-1, 2, 2)]
    polygons, maps, patterns = zip(*pieces)
    F = layers[-1][0] @ np.array(maps) + np.outer(layers[-1][1], [0, 0, 1])                   # (count, n_out, 3)
    return Regions2D(len(pieces), polygons, np.array(patterns), (F[..., :2], F[..., 2]), tuple(zero_sets))


# ---------------------------------------------------------------- dual space: clustering and maps

class KMeans(NamedTuple):
    """centres (k, n), assignment (p,) int, inertia (sum of squared distances)."""

    centres: jax.Array
    assignment: jax.Array
    inertia: jax.Array


def kmeans(key: jax.Array, points: jax.Array, k: int, iters: int = 100) -> KMeans:
    """Lloyd's k-means with k-means++ seeding (Arthur & Vassilvitskii 2007), jitted; points (p, n).

    Written here (20 lines of JAX) rather than adding scikit-learn as a dependency; it runs on the
    accelerator with the rest and takes an explicit PRNG key.
    """
    points = jnp.asarray(points)
    check_count(iters, "iters", minimum=0)
    if points.ndim != 2 or not 1 <= k <= points.shape[0]:
        raise ValueError(f"k: expected 1 <= k <= {points.shape[0] if points.ndim == 2 else '?'} "
                         f"(points of shape (p, n)), got k = {k} and points {points.shape}")
    return _kmeans(key, points, k, iters)


def _kmeans_impl(key, points, k, iters):
    p = points.shape[0]
    keys = jax.random.split(key, k)
    first = points[jax.random.randint(keys[0], (), 0, p)]
    centres = jnp.zeros((k, points.shape[1]), points.dtype).at[0].set(first)
    d2 = jnp.sum((points - first) ** 2, -1)

    def seed(i, carry):
        centres, d2 = carry
        probs = jnp.where(jnp.sum(d2) > 0, d2 / jnp.sum(d2), jnp.full_like(d2, 1.0 / p))
        c = points[jax.random.choice(keys[i], p, p=probs)]
        return centres.at[i].set(c), jnp.minimum(d2, jnp.sum((points - c) ** 2, -1))

    centres, _ = jax.lax.fori_loop(1, k, seed, (centres, d2))

    def assign(centres):
        dist = jnp.sum((points[:, None, :] - centres[None]) ** 2, -1)
        return jnp.argmin(dist, 1), jnp.min(dist, 1)

    def step(_, centres):
        lab, _ = assign(centres)
        onehot = jax.nn.one_hot(lab, k, dtype=points.dtype)
        counts = onehot.sum(0)
        sums = onehot.T @ points
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], centres)

    centres = jax.lax.fori_loop(0, iters, step, centres)
    lab, dist = assign(centres)
    return KMeans(centres, lab, jnp.sum(dist))


_kmeans = jax.jit(_kmeans_impl, static_argnums=(2, 3))


class ClusteredMaps(NamedTuple):
    """Sattelberg's section 5.1: k-means on the dual points C (p, n_0 + 1) of one output.

    rebuilt: (p,) outputs from the assigned centres, c_{a(i)} . (x_i, 1); exact: (p,) f(x_i);
    rms_error: sqrt(mean (rebuilt - exact)^2); sign_agreement: fraction with the same sign (the
    classification of sign-labelled problems such as XOR)."""

    centres: jax.Array
    assignment: jax.Array
    rebuilt: jax.Array
    exact: jax.Array
    rms_error: float
    sign_agreement: float


def cluster_affine_maps(key: jax.Array, params: MLP, x: jax.Array, k: int, output: int = 0) -> ClusteredMaps:
    """Cluster the local affine maps at the points x (p, n_0) into k centres and rebuild f from them."""
    C = dual_points(params, x, output)
    km = kmeans(key, C, k)
    xt = jnp.concatenate([x, jnp.ones(x.shape[:-1] + (1,), C.dtype)], -1)
    rebuilt = jnp.sum(km.centres[km.assignment] * xt, -1)
    exact = mlp_forward(params, x)[..., output]
    return ClusteredMaps(km.centres, km.assignment, rebuilt, exact, float(jnp.sqrt(jnp.mean((rebuilt - exact) ** 2))),
                         float(jnp.mean(jnp.sign(rebuilt) == jnp.sign(exact))))


def affine_map_between(C1: jax.Array, C2: jax.Array) -> tuple[np.ndarray, float]:
    """Least-squares M (n+1, n+1) minimising ||C1 M - C2||_F (Sattelberg eq. 5.4) and the relative
    residual ||C1 M - C2|| / ||C2||.  C1, C2: (p, n+1) dual points of two networks at the same inputs."""
    C1, C2 = np.asarray(C1, np.float64), np.asarray(C2, np.float64)
    if C1.shape != C2.shape or C1.ndim != 2:
        raise ValueError(f"C1, C2: expected two arrays of one shape (p, n+1), got {C1.shape} and {C2.shape}")
    M, *_ = np.linalg.lstsq(C1, C2, rcond=None)
    return M, float(np.linalg.norm(C1 @ M - C2) / max(np.linalg.norm(C2), 1e-300))


# ---------------------------------------------------------------- functional dimension

def functional_dimension_bound(widths: Sequence[int]) -> int:
    """(number of parameters) - (number of hidden neurons) = sum_l n_l (n_{l-1} + 1) - sum_{0<l<L} n_l
    (Grigsby et al.: one positive scaling direction per hidden neuron).  (5,5,5,5,1): 96 - 15 = 81."""
    widths = check_widths(widths)
    return num_mlp_params(widths) - sum(widths[1:-1])


def parameter_jacobian(params: MLP, points: jax.Array) -> jax.Array:
    """d f_theta(z_k)_j / d theta: (p * n_L, D) for points z (p, n_0), theta in flatten_mlp order."""
    check_mlp(params)
    points = jnp.asarray(points)
    if points.ndim != 2 or points.shape[1] != params.widths[0] or points.shape[0] < 1:
        raise ValueError(f"points: expected shape (p, {params.widths[0]}) with p >= 1, got {points.shape}")
    return _jacobian(tuple(params.widths), flatten_mlp(params), points)


@partial(jax.jit, static_argnums=0)
def _jacobian(widths: tuple, theta, points):
    """(theta, points) -> (p * n_L, D): one reverse-mode pass per point, vmapped over points;
    compiled once per architecture (``widths`` is static)."""
    per_point = jax.vmap(jax.jacrev(lambda th, z: mlp_forward(unflatten_mlp(th, widths), z)), in_axes=(None, 0))
    return per_point(theta, points).reshape(-1, theta.shape[0])


_singular_values = jax.jit(lambda J: jnp.linalg.svd(J, compute_uv=False))


def functional_dimension(params: MLP, points: jax.Array, rtol: float | None = None) -> int:
    """Batch functional dimension: the numerical rank of the parameter Jacobian at the points.

        dim = rank d/dtheta (f_theta(z_1), .., f_theta(z_p)),  singular values above rtol * s_max

    The Jacobian is ``parameter_jacobian(params, points)`` (reverse mode per point, vmapped;
    checked against finite differences and a NumPy backward pass).

    Args:
        params: MLP theta.
        points: (p, n_0) the points z_k.
        rtol: >= 0; default max(shape) * eps (NumPy's rule).

    Returns:
        int: the functional dimension, at most ``functional_dimension_bound(params.widths)``.

    References:
        Grigsby, Lindsey & Rolnick 2023.
    """
    if rtol is not None:
        check_number(rtol, "rtol", nonnegative=True)
    J = parameter_jacobian(params, points)
    s = _singular_values(J)
    rtol = max(J.shape) * float(jnp.finfo(J.dtype).eps) if rtol is None else float(rtol)
    return int(jnp.sum(s > rtol * s[0])) if s.size else 0
