"""Symmetries of two-layer ReLU networks as operations (Petzka et al. 2020; DSLT3).

An equioutput transformation T keeps the function: f(x, T(w)) = f(x, w) for every x in
R^n_in (Petzka, Definition 1), with f(x, w) = c + sum_i q_i relu(<w_i, x> + b_i).

    permute(params, perm)               pi: node i of the result is node perm[i]
    rescale(params, lambdas)            rho_lambda: (w_i, b_i, q_i) -> (l_i w_i, l_i b_i, q_i / l_i), l_i > 0
    reverse_orientation(params, nodes)  psi^J: (w_i, b_i) -> (-w_i, -b_i) for i in J, c -> c + sum_J q_i b_i;
                                        valid iff sum_J q_i w_i = 0 (weight annihilation, DSLT3)
    flip_orientation(params, mask)      psi^J unchecked, jittable: f changes by sum_J q_i <w_i, x> (the
                                        Metropolis-Hastings proposal of slt_relu.moves)
    split_node(params, node, into, t)   node degeneracy: a degenerate node takes the share 1 - t of node's
                                        output on node's boundary (w_j, b_j = w_i, b_i; q_j = (1-t) q_i)
    merge_nodes(params, keep, absorb)   the inverse: two nodes on one boundary, same side, become one
                                        (Petzka's R2 inside a fixed width; the absorbed node gets q = 0)
    reduce(params)                      Petzka's R1, R2, R3: an irreducible network plus a linear part
    are_equivalent(p1, p2)              functional equivalence on R^n_in by Theorem 1 (pi, rho, psi^J)

The identity behind psi is relu(z) = relu(-z) + z:  q relu(<w,x> + b) = q relu(<-w,x> - b) + q <w,x> + q b,
so reversing the nodes J adds the linear function sum_J q_i (<w_i, x> + b_i), which is a constant
exactly when the effective weights q_i w_i of J sum to zero.

All functions here take one concrete parameter (no batch axes) and compute in NumPy float64
except permute, rescale and flip_orientation, which are jnp functions that also work under jit
and vmap.

Over ~450 lines on purpose: the group of equioutput transformations is one concept, and each
operation documents its formula and its conditions.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .network import TwoLayer, check_params, make_params

__all__ = ["Irreducible", "annihilating_subsets", "are_equivalent", "default_tol", "flip_orientation", "merge_nodes",
           "numpy_params", "permute", "random_symmetry", "reduce", "rescale", "reverse_orientation", "split_node"]

MAX_SUBSET_WIDTH = 20


def _single(params, name="params") -> TwoLayer:
    check_params(params)
    if np.ndim(params.w) != 2:
        raise ValueError(f"{name}: expected one network (w of shape (d, n_in)), got w of shape {np.shape(params.w)}; "
                         "use jax.vmap or a loop for batches")
    if not all(np.all(np.isfinite(np.asarray(leaf))) for leaf in params):
        raise ValueError(f"{name}: expected finite parameters, got NaN or inf")
    return params


def numpy_params(params) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(w, b, q, c) of one TwoLayer as float64 NumPy arrays and a float."""
    return (np.array(params.w, np.float64), np.array(params.b, np.float64), np.array(params.q, np.float64),
            float(params.c))


def _scale(w, b, q, c=0.0) -> float:
    """A size for relative tolerances: the largest |q_i| |(w_i, b_i)| (and |c|), at least 1e-300."""
    node = np.abs(q) * np.linalg.norm(np.concatenate([w, b[:, None]], 1), axis=1) if len(q) else np.zeros(0)
    return max(float(np.max(node, initial=0.0)), abs(c), 1e-300)


def _forward_np(params, x: np.ndarray) -> np.ndarray:
    """f(x) = c + relu(x W^T + b) q in float64 NumPy (for the equivalence cross-check)."""
    w, b, q, c = numpy_params(params)
    return np.maximum(x @ w.T + b, 0.0) @ q + c


def default_tol(dtype) -> float:
    """Relative tolerance for symmetry decisions: 1000 eps(dtype) (2e-13 in float64, 1e-4 in float32)."""
    return 1000 * float(jnp.finfo(dtype).eps)


def _nodes(nodes, d: int, name: str = "nodes") -> list[int]:
    """A list of distinct node indices in [0, d) from an iterable of ints or a boolean mask of length d."""
    arr = np.asarray(nodes)
    if arr.dtype == bool:
        if arr.shape != (d,):
            raise ValueError(f"{name}: a boolean mask must have shape ({d},), got {arr.shape}")
        return [int(i) for i in np.flatnonzero(arr)]
    arr = arr.reshape(-1)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: expected node indices (integers) or a boolean mask, got {nodes!r}")
    out = [int(i) for i in arr]
    bad = [i for i in out if not 0 <= i < d]
    if bad:
        raise ValueError(f"{name}: node indices must lie in [0, {d}), got {bad}")
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: node indices must be distinct, got {out}")
    return out


def permute(params: TwoLayer, perm) -> TwoLayer:
    """The permutation symmetry pi: node i of the result is node perm[i] of params.

        pi(w)_i = w_perm[i]  (and b, q likewise)

    f is unchanged (the hidden sum is reordered).  Works on batches (leading axes).

    Args:
        params: TwoLayer, d nodes, optionally with leading batch axes.
        perm: a permutation of range(d).

    Returns:
        TwoLayer with the nodes reordered, same shapes as params.

    References:
        Petzka et al. 2020.
    """
    check_params(params)
    d = params.w.shape[-2]
    p = np.asarray(perm)
    if p.shape != (d,) or sorted(p.tolist()) != list(range(d)):
        raise ValueError(f"perm: expected a permutation of range({d}), got {np.asarray(perm).tolist()}")
    return TwoLayer(params.w[..., p, :], params.b[..., p], params.q[..., p], params.c)


def rescale(params: TwoLayer, lambdas) -> TwoLayer:
    """The rescaling symmetry rho_lambda, with every l_i > 0.

        rho_lambda: w_i -> l_i w_i, b_i -> l_i b_i, q_i -> q_i / l_i

    f is unchanged because l relu(z) = relu(l z) for l > 0.  Works on batches and under jit (the
    positivity check runs only on concrete values).

    Args:
        params: TwoLayer, d nodes, optionally with leading batch axes.
        lambdas: scalar or (d,) positive factors l_i.

    Returns:
        TwoLayer rho_lambda(params), same shapes as params.

    References:
        Petzka et al. 2020, equation (2).
    """
    check_params(params)
    d = params.w.shape[-2]
    lam = jnp.broadcast_to(jnp.asarray(lambdas, params.w.dtype), (d,)) if np.ndim(lambdas) == 0 else \
        jnp.asarray(lambdas, params.w.dtype)
    if lam.shape != (d,):
        raise ValueError(f"lambdas: expected a scalar or shape ({d},), got {np.shape(lambdas)}")
    if not isinstance(lam, jax.core.Tracer) and not bool(jnp.all(lam > 0)):
        raise ValueError(f"lambdas: expected positive factors (rho_lambda needs lambda > 0; a negative factor "
                         f"moves the active side), got {np.asarray(lam).tolist()}")
    return TwoLayer(params.w * lam[:, None], params.b * lam, params.q / lam, params.c)


def flip_orientation(params: TwoLayer, mask) -> TwoLayer:
    """psi^J without the annihilation check: (w_i, b_i) -> (-w_i, -b_i) for the nodes with mask_i
    true, c -> c + sum_J q_i b_i.

    f(x, psi^J(w)) = f(x, w) - sum_J q_i <w_i, x> (relu(z) = relu(-z) + z), so the function is kept
    exactly when the nodes J annihilate.  An involution (psi^J psi^J = id) whose Jacobian has
    determinant +-1 (sign flips and a shear of c): a valid Metropolis-Hastings proposal
    (``slt_relu.moves``).  mask: (d,) booleans; params with leading batch axes broadcast against
    it; jnp throughout (jit, vmap).
    """
    sign = jnp.where(jnp.asarray(mask, bool), -1.0, 1.0).astype(params.w.dtype)
    shift = jnp.sum(jnp.where(jnp.asarray(mask, bool), params.q * params.b, 0.0), axis=-1)
    return TwoLayer(params.w * sign[..., :, None], params.b * sign, params.q, params.c + shift)


def reverse_orientation(params: TwoLayer, nodes, tol: float | None = None) -> TwoLayer:
    """The orientation reversal psi^J: negate the incoming weights and biases of the nodes J.

        psi^J: (w_i, b_i) -> (-w_i, -b_i) for i in J,  c -> c + sum_J q_i b_i

    Valid (f unchanged) iff the nodes annihilate, sum_{i in J} q_i w_i = 0.

    Args:
        params: one TwoLayer (no batch axes).
        nodes: the node indices J.
        tol: relative to the largest |q_i| |w_i| in J (default 1000 eps).

    Returns:
        TwoLayer psi^J(params).

    Raises:
        ValueError: the nodes do not annihilate (the message gives the residual sum).

    References:
        DSLT3, "Orientation reversal"; Petzka et al. 2020 (psi_-^J with a zero linear neuron).
    """
    params = _single(params)
    w, b, q, c = numpy_params(params)
    J = _nodes(nodes, len(q))
    tol = default_tol(params.w.dtype) if tol is None else float(tol)
    g = (q[J, None] * w[J]).sum(0) if J else np.zeros(w.shape[1])
    size = max(float(np.max(np.abs(q[J]) * np.linalg.norm(w[J], axis=1), initial=0.0)), 1e-300)
    if np.linalg.norm(g) > tol * size:
        raise ValueError(
            f"nodes {J} do not annihilate: sum_i q_i w_i over them is {np.round(g, 12).tolist()} "
            f"(norm {np.linalg.norm(g):.3g}, tolerance {tol * size:.3g}); reversing their orientation would add the "
            f"linear function {np.round(g, 6).tolist()} . x.  annihilating_subsets(params) lists the subsets that work")
    sign = np.ones(len(q))
    sign[J] = -1.0
    dt = params.w.dtype
    return TwoLayer(params.w * jnp.asarray(sign, dt)[:, None], params.b * jnp.asarray(sign, dt), params.q,
                    params.c + jnp.asarray(float(np.sum(q[J] * b[J])), dt))


def annihilating_subsets(params: TwoLayer, tol: float | None = None) -> list[tuple[int, ...]]:
    """Every non-empty subset F of nodes with sum_{i in F} q_i w_i = 0 (DSLT3 weight annihilation).

    Exhaustive over the 2^d - 1 subsets (d <= 20), sorted by size then lexicographically;
    tol is relative to the largest |q_i| |w_i| in F (default 1000 eps).  A node with
    q_i w_i = 0 (degenerate) joins any annihilating subset.
    """
    params = _single(params)
    w, b, q, c = numpy_params(params)
    d = len(q)
    if d > MAX_SUBSET_WIDTH:
        raise ValueError(f"params: annihilating_subsets enumerates 2^d subsets; expected d <= {MAX_SUBSET_WIDTH}, got {d}")
    tol = default_tol(params.w.dtype) if tol is None else float(tol)
    if d == 0:
        return []
    eff = q[:, None] * w
    masks = ((np.arange(1, 2 ** d)[:, None] >> np.arange(d)) & 1).astype(bool)
    sums = np.linalg.norm(masks.astype(float) @ eff, axis=1)
    sizes = np.max(np.where(masks, np.linalg.norm(eff, axis=1), 0.0), axis=1)
    ok = sums <= tol * np.maximum(sizes, 1e-300) + (sizes == 0)
    found = [tuple(int(i) for i in np.flatnonzero(m)) for m in masks[ok]]
    return sorted(found, key=lambda F: (len(F), F))


def _degenerate(w, q, i, tol, size) -> bool:
    return abs(q[i]) * np.linalg.norm(w[i]) <= tol * size


def split_node(params: TwoLayer, node: int, into: int, fraction: float = 0.5) -> TwoLayer:
    """Node degeneracy (DSLT3): the degenerate node ``into`` joins ``node`` on its boundary.

    Requires q_into w_into = 0 (q = 0, or w = 0 whose constant q relu(b) moves into c).  Then
    (w, b)_into = (w, b)_node, q_into = (1 - t) q_node, q_node = t q_node for t = fraction (any
    real: t outside [0, 1] gives two nodes with opposite outputs).  f is unchanged.
    """
    params = _single(params)
    w, b, q, c = numpy_params(params)
    d = len(q)
    (i,), (j,) = _nodes([node], d, "node"), _nodes([into], d, "into")
    if i == j:
        raise ValueError(f"into: expected a node other than node = {i}")
    size = _scale(w, b, q, c)
    if not _degenerate(w, q, j, default_tol(params.w.dtype), size):
        raise ValueError(f"into: node {j} must be degenerate (q_{j} = 0 or w_{j} = 0) to take a share of node {i}; "
                         f"got q_{j} = {q[j]:.6g}, |w_{j}| = {np.linalg.norm(w[j]):.6g}")
    c = c + q[j] * max(b[j], 0.0)                     # the constant of a w = 0 node (0 when q = 0)
    t = float(fraction)
    w[j], b[j], q[j], q[i] = w[i], b[i], (1.0 - t) * q[i], t * q[i]
    return make_params(w, b, q, c, dtype=params.w.dtype)


def merge_nodes(params: TwoLayer, keep: int, absorb: int, tol: float | None = None) -> TwoLayer:
    """Merge two nodes on one boundary with the same active side (Petzka's R2 at fixed width).

    Needs (w, b)_absorb = l (w, b)_keep with l > 0; then q_keep -> q_keep + l q_absorb and
    q_absorb -> 0 (the absorbed node stays as a degenerate q = 0 node).  f is unchanged.
    Nodes on one boundary with opposite sides form a linear part (Petzka's R3): use reduce.
    """
    params = _single(params)
    w, b, q, c = numpy_params(params)
    (k,), (a,) = _nodes([keep], len(q), "keep"), _nodes([absorb], len(q), "absorb")
    if k == a:
        raise ValueError(f"absorb: expected a node other than keep = {k}")
    tol = default_tol(params.w.dtype) if tol is None else float(tol)
    hk, ha = np.append(w[k], b[k]), np.append(w[a], b[a])
    if np.linalg.norm(w[k]) == 0:
        raise ValueError(f"keep: node {k} has w = 0 and no boundary to share")
    lam = float(ha @ hk / (hk @ hk))
    if np.linalg.norm(ha - lam * hk) > tol * max(np.linalg.norm(ha), 1e-300) or lam == 0:
        raise ValueError(f"absorb: node {a}'s (w, b) = {np.round(ha, 6).tolist()} is not a multiple of node {k}'s "
                         f"{np.round(hk, 6).tolist()}: the nodes do not share a boundary")
    if lam < 0:
        raise ValueError(f"absorb: nodes {k} and {a} share a boundary with opposite active sides (factor {lam:.6g}); "
                         "together they are a ReLU plus a linear function (Petzka R3), see reduce")
    q[k], q[a] = q[k] + lam * q[a], 0.0
    return make_params(w, b, q, c, dtype=params.w.dtype)


class Irreducible(NamedTuple):
    """Petzka's (R1, R2, R3)-irreducible form: f(x) = forward(params, x) + <linear, x>.

    params: TwoLayer whose nodes have unit |w_i| and pairwise different boundaries (as
    unoriented hyperplanes) and q_i != 0; params.c holds the constant of the linear part N(x).
    linear: (n_in,) the slope alpha of N(x) = <alpha, x> + c.
    """

    params: TwoLayer
    linear: np.ndarray

    def __call__(self, x):
        x = np.asarray(x, np.float64)
        return _forward_np(self.params, x) + x @ np.asarray(self.linear, np.float64)

    def as_two_layer(self) -> TwoLayer:
        """The same function as a TwoLayer: the linear part becomes the opposite pair
        relu(<a, x>) - relu(<-a, x>) (Petzka R3), appended when alpha != 0."""
        w, b, q, c = numpy_params(self.params)
        a = np.asarray(self.linear, np.float64)
        if np.any(a != 0):
            w, b, q = np.concatenate([w, [a, -a]]), np.concatenate([b, [0.0, 0.0]]), np.concatenate([q, [1.0, -1.0]])
        return make_params(w.reshape(len(q), self.params.n_in), b, q, c)


def _hyperplane_groups(h: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Group unit vectors h (k, n+1) by unoriented hyperplane: |h_i - s h_g| <= tol.

    Returns group index (k,), orientation s (k,) relative to the group's first member, and the
    group representatives (first members).
    """
    group, sign, reps = np.zeros(len(h), int), np.ones(len(h)), []
    for i, hi in enumerate(h):
        for g, r in enumerate(reps):
            if np.linalg.norm(hi - r) <= tol:
                group[i], sign[i] = g, 1.0
                break
            if np.linalg.norm(hi + r) <= tol:
                group[i], sign[i] = g, -1.0
                break
        else:
            group[i] = len(reps)
            reps.append(hi)
    return group, sign, reps


def reduce(params: TwoLayer, tol: float | None = None) -> Irreducible:
    """Petzka's reduction to an irreducible network plus a linear part.

        R1: a node with q_i = 0 is removed; a node with w_i = 0 is the constant q_i relu(b_i) and
            moves into c.
        R2: nodes with (w, b)_i = l (w, b)_j, l > 0 (same boundary, same side) merge into one.
        R3: nodes on one boundary with opposite sides become one ReLU and a linear function, by
            a relu(h.x~) + B relu(-h.x~) = (A + B) relu(h.x~) - B h.x~ (x~ = (x, 1)); all linear
            parts and c form N(x) = <alpha, x> + c.  A node whose merged output is 0 is removed.

    Args:
        params: one TwoLayer (no batch axes).
        tol: relative (default 1000 eps): outputs are compared against the largest
            |q_i| |(w_i, b_i)| (not |c|: a large constant does not hide a node), boundaries as unit
            vectors (w, b)/|(w, b)| to within tol.

    Returns:
        Irreducible: (params, linear); params: nodes with |w_i| = 1 (q_i is the kink size), in order of first
        appearance; linear: (n_in,) the slope alpha.

    References:
        Petzka et al. 2020 (R1, R2, R3).
    """
    params = _single(params)
    w, b, q, c = numpy_params(params)
    n = w.shape[1]
    tol = default_tol(params.w.dtype) if tol is None else float(tol)
    size = _scale(w, b, q)
    hb = np.concatenate([w, b[:, None]], 1)
    norm = np.linalg.norm(hb, axis=1)
    alive = np.abs(q) * norm > tol * size                                  # R1: q = 0 (or w = b = 0)
    constant = alive & (np.linalg.norm(w, axis=1) <= tol * norm)           # R1: w = 0
    c += float(np.sum(q[constant] * np.maximum(b[constant], 0.0)))
    keep = alive & ~constant
    h = hb[keep] / norm[keep, None]
    e = q[keep] * norm[keep]                                               # node = e relu(h . x~)
    group, sign, reps = _hyperplane_groups(h, tol)
    alpha = np.zeros(n)
    ws, bs, qs = [], [], []
    for g, r in enumerate(reps):
        A = float(np.sum(e[(group == g) & (sign > 0)]))
        B = float(np.sum(e[(group == g) & (sign < 0)]))
        alpha -= B * r[:n]                                                 # R3: B relu(-h) = B relu(h) - B h
        c -= B * r[n]
        kink = A + B
        if abs(kink) > tol * size:
            unit = np.linalg.norm(r[:n])
            ws.append(r[:n] / unit)
            bs.append(r[n] / unit)
            qs.append(kink * unit)
    alpha[np.abs(alpha) <= tol * size] = 0.0
    reduced = make_params(np.array(ws).reshape(len(ws), n), np.array(bs).reshape(-1), np.array(qs).reshape(-1), c)
    return Irreducible(reduced, alpha)


def _match(r1: Irreducible, r2: Irreducible, tol: float) -> tuple[list[int], list[float]] | None:
    """Match nodes of two irreducible forms by unoriented boundary; (perm, signs) or None."""
    w1, b1, _, _ = numpy_params(r1.params)
    w2, b2, _, _ = numpy_params(r2.params)
    if len(b1) != len(b2):
        return None
    h1, h2 = np.concatenate([w1, b1[:, None]], 1), np.concatenate([w2, b2[:, None]], 1)
    h1 /= np.linalg.norm(h1, axis=1, keepdims=True)
    h2 /= np.linalg.norm(h2, axis=1, keepdims=True)
    perm, signs, used = [], [], set()
    for i in range(len(h1)):
        for j in range(len(h2)):
            if j in used:
                continue
            for s in (1.0, -1.0):
                if np.linalg.norm(h1[i] - s * h2[j]) <= tol:
                    perm.append(j)
                    signs.append(s)
                    used.add(j)
                    break
            if len(perm) == i + 1:
                break
        else:
            return None
    return perm, signs


def are_equivalent(p1: TwoLayer, p2: TwoLayer, tol: float | None = None) -> bool:
    """Whether f(x, p1) = f(x, p2) for every x in R^n_in.

    Both are reduced (R1-R3); by Lemma 2 the irreducible forms agree iff their boundaries match
    one to one (pi), each matched pair has the same kink after unit normalisation (rho), and
    the linear parts agree once every node of p2 whose match in p1 has the opposite side is
    flipped (psi^J: e relu(h.x~) = e relu(-h.x~) + e h.x~).  The decision is cross-checked by
    evaluating both networks at probe points on both sides of every boundary and far out (both
    must agree to 100 tol, relative to the largest node, |c| or linear coefficient, per unit of
    1 + |x|).

    Args:
        p1: one TwoLayer (no batch axes).
        p2: one TwoLayer with the same n_in (any width).
        tol: relative, default 1000 eps(dtype) (2e-13 in float64, 1e-4 in float32).

    Returns:
        bool: whether the two networks compute the same function.

    References:
        Petzka et al. 2020, Theorem 1 and Lemma 2.
    """
    p1, p2 = _single(p1, "p1"), _single(p2, "p2")
    if p1.n_in != p2.n_in:
        raise ValueError(f"p2: expected n_in = {p1.n_in} like p1, got {p2.n_in}")
    tol = max(default_tol(p1.w.dtype), default_tol(p2.w.dtype)) if tol is None else float(tol)
    r1, r2 = reduce(p1, tol), reduce(p2, tol)
    size = max(_scale(*numpy_params(r1.params)), _scale(*numpy_params(r2.params)), float(np.max(np.abs(r1.linear), initial=0)),
               float(np.max(np.abs(r2.linear), initial=0)))
    matched = _match(r1, r2, tol)
    equal = False
    if matched is not None:
        perm, signs = matched
        w2, b2, q2, c2 = numpy_params(r2.params)
        _, _, q1, c1 = numpy_params(r1.params)
        alpha2 = np.array(r2.linear, np.float64)
        for i, (j, s) in enumerate(zip(perm, signs)):
            if s < 0:                                  # q relu(w.x + b) = q relu(-(w.x + b)) + q (w.x + b)
                alpha2 = alpha2 + q2[j] * w2[j]
                c2 = c2 + q2[j] * b2[j]
        kinks = np.array([q2[j] for j in perm]) if perm else np.zeros(0)
        equal = (np.allclose(q1, kinks, rtol=0, atol=tol * size) and np.allclose(r1.linear, alpha2, rtol=0,
                                                                                   atol=tol * size)
                 and abs(c1 - c2) <= tol * size)
    if equal:                                          # cross-check on the networks themselves
        x = _probe_points(r1, r2)
        gap = np.abs(_forward_np(p1, x) - _forward_np(p2, x)) / (1 + np.linalg.norm(x, axis=1))
        equal = bool(np.max(gap, initial=0.0) <= 100 * tol * size)
    return bool(equal)


def _probe_points(*forms: Irreducible) -> np.ndarray:
    """Deterministic points on both sides of every boundary and far out along the axes."""
    pts = []
    n = forms[0].params.n_in
    for f in forms:
        w, b, _, _ = numpy_params(f.params)
        for wi, bi in zip(w, b):
            foot = -bi * wi / (wi @ wi)
            pts += [foot + s * wi for s in (-1.0, -0.1, 0.1, 1.0)]
    R = 1 + max((np.linalg.norm(p) for p in pts), default=1.0)
    pts += [s * R * np.eye(n)[k] for k in range(n) for s in (-3.0, 3.0)] + [np.zeros(n)]
    return np.array(pts)


def random_symmetry(key: jax.Array, params: TwoLayer, tol: float | None = None) -> tuple[TwoLayer, dict]:
    """Apply a random composition pi . rho . psi^J to params: J a random annihilating subset
    (possibly empty), lambdas log-uniform in [1/4, 4], pi uniform.  Returns (new params, the
    choices {"reversed": J, "lambdas": ..., "perm": ...}).  f is unchanged."""
    params = _single(params)
    d = params.width
    k1, k2, k3 = jax.random.split(key, 3)
    options = [()] + (annihilating_subsets(params, tol) if d <= 12 else [])
    J = options[int(jax.random.randint(k1, (), 0, len(options)))]
    lambdas = jnp.exp(jax.random.uniform(k2, (d,), minval=-np.log(4), maxval=np.log(4))).astype(params.w.dtype)
    perm = np.asarray(jax.random.permutation(k3, d))
    out = permute(rescale(reverse_orientation(params, list(J), tol), lambdas), perm)
    return out, {"reversed": list(J), "lambdas": np.asarray(lambdas).tolist(), "perm": perm.tolist()}

