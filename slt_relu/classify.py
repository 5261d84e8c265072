"""Which phase of W0 a parameter, or a batch of posterior draws, is in (DSLT3 Appendix 2).

A label is always either a phase that exists for this truth and width (a label of
:func:`~slt_relu.phases.true_set_representatives` of the truth's irreducible form, or on a bounded
input box, where W0 is larger (DSLT3's caveat), one whose extra nodes are active on the whole box,
adding an affine part, while every truth boundary is still carried and the phase's equations can
hold) or the single value :data:`NOT_IN_W0`.  Two ways to decide:

* ``tol=`` (exact parameters, e.g. representatives and their images under the symmetries): a node
  is degenerate if |q_i w_i| <= tol S (S = min_j |q0_j| |w0_j|, the smallest truth node), it sits on
  truth boundary j if its unit boundary (w_i, b_i)/|(w_i, b_i)| is within tol of +-(w0_j, b0_j)/|.|
  (the sign is its orientation), else it joins a hidden group of nodes on one boundary by the same
  test; the parameter is in the phase if the phase exists and its equations can hold
  (finite distance).

* ``n=`` (posterior draws; with ``sigma``, ``beta`` and the input distribution ``inputs``): the
  resolution of n data points with noise sigma.  For a regular model the draws of a tempered
  posterior around W0 have n K(w) = (1/2)(1 + 1/beta) chi^2_D (the data set's own estimation error
  plus the posterior's spread at temperature beta, K(w) = E_q[(f - f0)^2] / (2 sigma^2) the KL
  divergence), so a draw is in W0 at this resolution when

      K(w) <= K_res = (1 + 1/beta) chi^2_D(0.999) / (2 n)          (D the model's parameters),

  conservative for singular models (fewer effective directions).  A node is degenerate when the
  data cannot tell it from no node: n Var_q[q_i relu(<w_i, x> + b_i)] / (2 sigma^2) <= the same
  bound with the node's n_in + 2 parameters.  The others take the nearest truth boundary (the
  assignment that minimises each node's distance; no fixed angle), unless they lie closer to each
  other than to any truth boundary and their kinks cancel (the kink of q_i relu(+-z) is
  q_i |(w_i, b_i)| whatever the side; their sum within a quarter of the largest): a hidden group.
  A draw within the resolution whose nodes leave a truth boundary uncarried (its truth node too weak
  for the data: e.g. one node degenerate where the truth has two) cannot be told apart from W0, so it
  gets the phase it is closest to: each uncarried truth boundary j, in turn, takes the spare node
  nearest to it (a degenerate node, a node linear on the box, or one of two or more nodes sharing a
  boundary), an assignment with a node for every truth node; its ``structure`` keeps what its nodes
  form.  So a draw whose boundaries the data place 0.1-0.2 off the truth's still gets the truth's
  phase, and a draw of a wrong mode (K above the resolution) gets "not in W0" whatever its
  structure.  (A node's variance under q is what counts: a constant node, w_i = 0 with b_i > 0, is
  degenerate, its constant absorbed in c.)

Per draw the answer also holds K(w) (exact on a uniform box; a 96 x 96 tensor rule for Gaussian
inputs), the distance to the assigned phase's part of W0 in effective coordinates (q_i w_i, q_i b_i;
c), the node groups and orientations, and a name in words (:func:`phase_name`).  Vectorised over
draws: no Python loop over them.  The phases themselves and DSLT4's rules live in
``slt_relu.phases``.

Over ~450 lines on purpose: one concept, the phase of a draw, whose steps (node strengths,
structure, uncarried truth boundaries, codes, distances) share their arrays.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .network import TwoLayer, check_count, check_number, check_params, to_flat
from .phases import PhaseLabel, check_truth, reduced_truth, true_set_representatives

__all__ = ["NOT_IN_W0", "PhaseAssignment", "classify_phase", "phase_labels", "phase_name", "resolution"]

NOT_IN_W0 = "not in W0"
"""The label of a parameter that is in no phase of W0."""


class PhaseAssignment(NamedTuple):
    """classify_phase's answer, per draw; the draws' batch shape (object arrays for label, name, structure) when
    params had leading batch axes, so that the labels of draws (C, S) go to :func:`~slt_relu.phase_masses` as they
    are.

    Attributes:
        label: the PhaseLabel, or NOT_IN_W0.
        name: the label in words.
        K: the population loss K(w) (NaN without inputs).
        distance: to the label's part of W0 in effective coordinates (q_i w_i, q_i b_i; c) with the boundaries held
            (inf when its equations cannot hold; a lower bound where a hidden group with nodes on both sides may
            carry any linear part).
        group: (..., d) truth node j of the reduced truth, -1 degenerate (or inactive on the whole box), -2 linear
            (active on the whole box), m + k hidden group k.
        orientation: (..., d) +1 / -1 relative to the group's boundary, 0 for degenerate and linear nodes.
        structure: the label the nodes form, also when it is no phase.
        resolution: K_res (n mode) or None.
    """

    label: object
    name: object
    K: object
    distance: object
    group: np.ndarray
    orientation: np.ndarray
    structure: object
    resolution: float | None


@lru_cache(maxsize=64)
def _phases(truth_key: tuple, width: int, n_in: int) -> frozenset:
    from .network import from_flat

    m = (len(truth_key) - 1) // (n_in + 2)
    truth = from_flat(np.asarray(truth_key, np.float64), m, n_in)
    return frozenset(rep.label for rep in true_set_representatives(truth, width))


def phase_labels(truth: TwoLayer, width: int) -> frozenset:
    """The labels of the phases of W0 for this (already irreducible) truth and width (cached)."""
    return _phases(tuple(np.asarray(to_flat(truth), np.float64).tolist()), int(width), int(truth.n_in))


def _nodes_text(js) -> str:
    js = [j + 1 for j in js]
    if len(js) > 2 and js == list(range(js[0], js[-1] + 1)):
        return f"nodes {js[0]}-{js[-1]}"
    return ("node " if len(js) == 1 else "nodes ") + ", ".join(map(str, js))


def phase_name(label, m: int | None = None) -> str:
    """A phase in words for plot legends and metrics: "both truth nodes, true orientation",
    "orientation reversed on truth nodes 1-3", "truth node 1 carried by 2 nodes", "one node
    degenerate", "a cancelling pair", "a linear pair", "one node linear on the box", "not in W0"."""
    if not isinstance(label, PhaseLabel):
        return NOT_IN_W0
    m = len(label.truth) if m is None else m
    parts = []
    single = all(a + r == 1 for a, r in label.truth)
    reversed_ = [j for j, (a, r) in enumerate(label.truth) if r]
    if single and not reversed_:
        parts.append({1: "the truth node", 2: "both truth nodes"}.get(m, f"all {m} truth nodes") + ", true orientation")
    else:
        full = [j for j, (a, r) in enumerate(label.truth) if r and not a]
        if full:
            parts.append(f"orientation reversed on truth {_nodes_text(full)}")
        for j, (a, r) in enumerate(label.truth):
            if a + r > 1:
                parts.append(f"truth node {j + 1} carried by {a + r} nodes" + (f" ({r} reversed)" if r else ""))
    kinds = {(2, 0): "a cancelling pair", (1, 1): "a linear pair"}
    parts += [kinds.get(g, f"a hidden group ({g[0]},{g[1]})") for g in label.hidden]
    words = {1: "one node", 2: "two nodes", 3: "three nodes"}
    if label.degenerate:
        parts.append(f"{words.get(label.degenerate, f'{label.degenerate} nodes')} degenerate")
    if label.linear:
        parts.append(f"{words.get(label.linear, f'{label.linear} nodes')} linear on the box")
    return "; ".join(parts)


def resolution(n: int, sigma: float, beta: float, dims: int) -> float:
    """K_res = (1 + 1/beta) chi^2_dims(0.999) / (2 n) (module docstring); sigma enters through K."""
    from scipy.stats import chi2

    return float((1.0 + 1.0 / beta) * chi2.ppf(0.999, dims) / (2.0 * n))


# ----------------------------------------------------------------------------------------


@jax.jit
def _node_variance(w, b, q, x, wt):
    """Var_q[q_i relu(<w_i, x> + b_i)] = q_i^2 (E[r^2] - E[r]^2) of every node of every draw (B, d), by the
    rule x (P, n_in), wt (P,): one fused program."""
    r = jnp.maximum(w @ x.T + b[..., None], 0.0)                          # (B, d, P)
    return q**2 * ((r * r) @ wt - (r @ wt) ** 2)


def _rule(inputs, n_in: int, dtype=np.float64):
    """A fixed quadrature rule (points, weights) for node norms E_q[g(x)^2]."""
    import jax.numpy as jnp

    from .inputs import Gaussian, UniformBox, piecewise_rule_1d, tensor_rule_2d

    if n_in == 2 and isinstance(inputs, (UniformBox, Gaussian)):
        rule = tensor_rule_2d(inputs, jnp.zeros(()).dtype, cells=12, order=2)
        return np.asarray(rule.points, dtype), np.asarray(rule.weights, dtype)
    if n_in == 1 and isinstance(inputs, (UniformBox, Gaussian)):
        lo, hi = inputs.support()
        rule = piecewise_rule_1d(jnp.linspace(lo, hi, 65), 4, inputs.density_1d)
        return np.asarray(rule.points, dtype), np.asarray(rule.weights, dtype)
    import jax

    x = np.asarray(inputs.sample(jax.random.PRNGKey(0), 4096))
    return x, np.full(len(x), 1.0 / len(x))


def _components(adj: np.ndarray) -> np.ndarray:
    """Connected components of boolean adjacency (B, d, d): the smallest node index of each node's
    component, (B, d)."""
    B, d, _ = adj.shape
    reach = adj | np.eye(d, dtype=bool)[None]
    for _ in range(max(1, int(np.ceil(np.log2(max(d, 2)))))):
        reach = reach | (np.einsum("bij,bjk->bik", reach.astype(np.int32), reach.astype(np.int32)) > 0)
    idx = np.arange(d)
    return np.where(reach, idx[None, None, :], d).min(-1)


def _structure(w, b, q, h0, Q0, degenerate, linear, tol):
    """Node groups and orientations, vectorised over draws.  tol: float (fixed angles) or None
    (resolution mode: nearest truth boundary; hidden groups by cancelling kinks)."""
    B, d, n = w.shape
    m = h0.shape[0]
    hb = np.concatenate([w, b[..., None]], -1)
    norm = np.linalg.norm(hb, axis=-1)
    h = hb / np.where(norm > 0, norm, 1.0)[..., None]
    e = q * norm
    live = ~degenerate & ~linear
    dp = np.linalg.norm(h[:, :, None, :] - h0[None, None], axis=-1)
    dm = np.linalg.norm(h[:, :, None, :] + h0[None, None], axis=-1)
    dt = np.minimum(dp, dm)
    jbest = dt.argmin(-1)
    dbest = np.take_along_axis(dt, jbest[..., None], -1)[..., 0]
    obest = np.where(np.take_along_axis(dp, jbest[..., None], -1)[..., 0]
                     <= np.take_along_axis(dm, jbest[..., None], -1)[..., 0], 1.0, -1.0)
    npp = np.linalg.norm(h[:, :, None, :] - h[:, None, :, :], axis=-1)
    npm = np.linalg.norm(h[:, :, None, :] + h[:, None, :, :], axis=-1)
    dnode = np.minimum(npp, npm)
    pair = live[:, :, None] & live[:, None, :] & ~np.eye(d, dtype=bool)[None]
    if tol is not None:
        cand = live & (dbest > tol)
        adj = pair & cand[:, :, None] & cand[:, None, :] & (dnode <= tol)
    else:
        near = np.minimum(dbest[:, :, None], dbest[:, None, :])
        adj = pair & (dnode < 0.5 * near)
        cand = adj.any(-1)
    root = _components(adj)
    side = np.where(np.take_along_axis(npp, root[..., None], -1)[..., 0]
                    <= np.take_along_axis(npm, root[..., None], -1)[..., 0], 1.0, -1.0)
    if tol is None:                                   # a cluster is hidden only if its kinks cancel
        members = root[:, :, None] == root[:, None, :]
        total = np.einsum("bik,bk->bi", members & cand[:, None, :], e)      # kinks q_i |(w_i, b_i)|
        largest = np.max(np.where(members & cand[:, None, :], np.abs(e)[:, None, :], 0.0), -1)
        cand = cand & (np.abs(total) <= 0.25 * largest)
    hidden = cand & live
    first = np.where(hidden, root, d)
    roots = np.sort(np.where(hidden & (root == np.arange(d)[None]), np.arange(d)[None], d), axis=-1)
    rank = np.argmax(roots[:, None, :] == first[..., None], axis=-1)
    group = np.where(linear, -2, -1)
    group = np.where(live & ~hidden, jbest, group)
    group = np.where(hidden, m + rank, group)
    orient = np.where(live & ~hidden, obest, np.where(hidden, side, 0.0))
    return group, orient, h, hb


def _assign_uncarried(group, orient, h, h0, degenerate, linear, near):
    """For the draws ``near`` (B,) whose nodes leave a truth boundary uncarried: each such boundary j
    in turn takes the spare node nearest to it (degenerate, linear on the box, or one of two or more
    nodes of a group), with its orientation (a degenerate node, with no output to orient, the truth's).
    Returns new (group, orient, degenerate, linear)."""
    group, orient, degenerate, linear = group.copy(), orient.copy(), degenerate.copy(), linear.copy()
    B, d = group.shape
    m = h0.shape[0]
    dp = np.linalg.norm(h[:, :, None, :] - h0[None, None], axis=-1)          # (B, d, m)
    dm = np.linalg.norm(h[:, :, None, :] + h0[None, None], axis=-1)
    rows = np.arange(B)
    for j in range(m):
        need = near & ~np.any(group == j, -1)
        if not need.any():
            continue
        size = np.sum(group[:, :, None] == group[:, None, :], -1)              # members of each node's group
        spare = degenerate | linear | ((group >= 0) & (size >= 2))
        cost = np.where(spare, np.minimum(dp[:, :, j], dm[:, :, j]), np.inf)
        i = cost.argmin(-1)
        take = need & np.isfinite(cost[rows, i])
        group[rows[take], i[take]] = j
        # a degenerate node has no output to orient: it takes the truth's orientation
        side = np.where((dp[rows, i, j] <= dm[rows, i, j]) | degenerate[rows, i], 1.0, -1.0)
        orient[rows[take], i[take]] = side[take]
        degenerate[rows[take], i[take]] = False
        linear[rows[take], i[take]] = False
    return group, orient, degenerate, linear


def _codes(group, orient, m, d, degenerate_count, linear_count):
    """Integer rows that determine the label: truth counts (m, 2), hidden (a, b) sorted, counts."""
    B = group.shape[0]
    same = np.stack([np.sum((group == j) & (orient > 0), -1) for j in range(m)], -1)
    rev = np.stack([np.sum((group == j) & (orient < 0), -1) for j in range(m)], -1)
    K = max(d // 2, 1)
    hid = np.zeros((B, K, 2), np.int64)
    for k in range(K):
        a = np.sum((group == m + k) & (orient > 0), -1)
        bb = np.sum((group == m + k) & (orient < 0), -1)
        hid[:, k] = np.stack([np.maximum(a, bb), np.minimum(a, bb)], -1)
    key = hid[..., 0] * 100 + hid[..., 1]
    hid = np.take_along_axis(hid, np.argsort(-key, axis=-1, kind="stable")[..., None], 1)
    return np.concatenate([same, rev, hid.reshape(B, -1), degenerate_count[:, None], linear_count[:, None]], -1)


def _label(code, m) -> PhaseLabel:
    same, rev = code[:m], code[m:2 * m]
    K = (len(code) - 2 * m - 2) // 2
    hid = code[2 * m: 2 * m + 2 * K].reshape(K, 2)
    hidden = tuple((int(a), int(b)) for a, b in hid if a + b > 0)
    return PhaseLabel(tuple((int(a), int(r)) for a, r in zip(same, rev)), hidden, int(code[-2]), int(code[-1]))


def _distances(w, b, q, c, h, hb, group, orient, degenerate, linear, h0, Q0, c0, scale, label):
    """Distance to the label's part of W0 for draws (B,) that share the label, in one batch of
    least-squares problems (the per-draw version is the DSLT3 projection of PhaseAssignment)."""
    B, d, n1 = hb.shape
    m = h0.shape[0]
    order = np.argsort(np.where(group >= 0, group * 2 + (orient < 0), 10 ** 6), axis=-1, kind="stable")
    K = int(np.sum(group[0] >= 0))
    live = order[:, :K]
    take = lambda a: np.take_along_axis(a, live, 1)
    g_live, o_live = take(group), take(orient)
    hid_ids = sorted({int(g) for g in g_live[0] if g >= m})
    unit = np.zeros((B, m + len(hid_ids), n1))
    unit[:, :m] = h0[None]
    for k, gid in enumerate(hid_ids):
        mem = (group == gid)[..., None]
        u = np.sum(np.where(mem, orient[..., None] * h, 0.0), 1)
        unit[:, m + k] = u / np.linalg.norm(u, axis=-1, keepdims=True)
    gpos = np.where(g_live < m, g_live, m + np.searchsorted(np.array(hid_ids), np.maximum(g_live, m)))
    along = o_live[..., None] * np.take_along_axis(unit, gpos[..., None].repeat(n1, -1), 1)
    V = take(q)[..., None] * np.take_along_axis(hb, live[..., None].repeat(n1, -1), 1)
    a = np.sum(V * along, -1)
    eff = q[..., None] * hb[..., :-1]
    perp2 = np.sum((V - a[..., None] * along) ** 2, (1, 2)) + np.sum(np.where(degenerate[..., None], eff, 0.0) ** 2,
                                                                     (1, 2))
    c_eff = c + np.sum(np.where(degenerate, q * np.maximum(b, 0.0), 0.0), -1)
    lin_idx = np.argsort(~linear, axis=-1, kind="stable")[:, : int(np.sum(linear[0]))]
    L = lin_idx.shape[1]
    v_lin = (np.take_along_axis(q, lin_idx, 1)[..., None] * np.take_along_axis(hb, lin_idx[..., None].repeat(n1, -1), 1)
             ).reshape(B, -1)
    width = K + 1 + L * n1
    G = m + len(hid_ids)
    rows = np.zeros((B, G, width))
    rows[:, :, :K] = (gpos[:, None, :] == np.arange(G)[None, :, None])
    rhs = np.concatenate([np.broadcast_to(Q0, (B, m)), np.zeros((B, len(hid_ids)))], 1)
    both_sides = any(h_ab[1] > 0 for h_ab in label.hidden)
    if not both_sides:
        lin = np.zeros((B, n1, width))
        lin[:, :, :K] = np.where((o_live < 0)[:, None, :], np.swapaxes(np.take_along_axis(
            unit, gpos[..., None].repeat(n1, -1), 1), 1, 2), 0.0)
        lin[:, n1 - 1, K] = -1.0
        for k in range(L):
            lin[:, :, K + 1 + k * n1: K + 1 + (k + 1) * n1] = -np.eye(n1)[None]
        rows = np.concatenate([rows, lin], 1)
        rhs = np.concatenate([rhs, np.broadcast_to(np.append(np.zeros(n1 - 1), -c0), (B, n1))], 1)
    x0 = np.concatenate([a, c_eff[:, None], v_lin], 1)
    resid = rhs - np.einsum("brc,bc->br", rows, x0)
    corr = np.einsum("bcr,br->bc", np.linalg.pinv(rows), resid)
    miss = np.linalg.norm(np.einsum("brc,bc->br", rows, x0 + corr) - rhs, axis=-1)
    dist = np.sqrt(perp2 + np.sum(corr**2, -1))
    return np.where(miss > 1e-8 * max(scale, 1.0), np.inf, dist)


def _population_losses(params, truth, inputs, sigma, chunk: int = 1024) -> np.ndarray:
    """K(w) of each draw (B,), vmapped in chunks (exact on a uniform box)."""
    import jax.numpy as jnp

    B = params.w.shape[0]
    out = []
    for start in range(0, B, chunk):                  # equal chunks: one compiled program
        part = TwoLayer(*(np.resize(a[start:start + chunk], (chunk,) + a.shape[1:]) for a in params))
        out.append(np.asarray(_losses_batch(TwoLayer(*map(jnp.asarray, part)), truth, inputs, sigma))
                   [: min(chunk, B - start)])
    return np.concatenate(out) if out else np.zeros(0)


def _losses_batch(params, truth, inputs, sigma):
    from .loss import population_losses

    return population_losses(params, truth, inputs, sigma)


def classify_phase(params: TwoLayer, truth: TwoLayer, *, inputs=None, n: int | None = None, sigma: float = 1.0,
                   beta: float = 1.0, tol: float | None = None) -> PhaseAssignment:
    """The phase of W0 that params is in: its label, or NOT_IN_W0 (module docstring).

        resolution mode (n given):  K(w) <= K_res = (1 + 1/beta) chi^2_D(0.999) / (2 n)   (D the model's parameters)

    Invariant under permutation and rescaling of the nodes.

    Args:
        params: TwoLayer (d nodes) or a batch with leading axes.
        truth: any TwoLayer, reduced first (Petzka's R1-R3: PT1 at t = pi/2 is one node).
        inputs: the input distribution (needed with n: K and the node norms are expectations under
            it); a ``UniformBox`` also makes nodes inactive on the whole box degenerate and nodes
            active on the whole box ``linear``.
        n: the number of data points of the posterior whose draws params are: the resolution mode.
        sigma: the noise standard deviation of those data (resolution mode).
        beta: the posterior's inverse temperature (resolution mode).
        tol: the tolerance for exact parameters (default 0.1 when n is not given); not with n.

    Returns:
        PhaseAssignment: label, name, K, distance, group, orientation, structure and resolution
        per draw, with params' batch shape (label, name and structure as object arrays of that shape).

    References:
        DSLT3 Appendix 2.
    """
    from .inputs import UniformBox, check_inputs

    check_params(params)
    truth_min = reduced_truth(truth)
    h0, Q0 = check_truth(truth_min)
    n_in = h0.shape[1] - 1
    w = np.asarray(params.w, np.float64)
    if w.shape[-1] != n_in:
        raise ValueError(f"params: expected n_in = {n_in} like the truth, got {w.shape[-1]}")
    if n is not None and tol is not None:
        raise ValueError("n, tol: expected one of them (n for posterior draws, tol for exact parameters)")
    if n is not None:
        check_count(n, "n")
    if n is not None and inputs is None:
        raise ValueError("inputs: expected the input distribution with n (K and node norms are expectations)")
    if tol is not None:
        check_number(tol, "tol", nonnegative=True)
    check_number(sigma, "sigma")
    check_number(beta, "beta")
    if inputs is not None:
        check_inputs(inputs, n_in)
    tol = 0.1 if (n is None and tol is None) else tol
    batch, d = w.shape[:-2], w.shape[-2]
    B = int(np.prod(batch))
    w = w.reshape(B, d, n_in)
    b = np.asarray(params.b, np.float64).reshape(B, d)
    q = np.asarray(params.q, np.float64).reshape(B, d)
    c = np.asarray(params.c, np.float64).reshape(B)
    c0 = float(truth_min.c)
    _, _, q0, _ = (np.asarray(a, np.float64) for a in truth_min)
    scale = float(np.min(np.abs(q0) * np.linalg.norm(np.asarray(truth_min.w, np.float64), axis=1)))
    m = h0.shape[0]
    box = inputs.half_width if isinstance(inputs, UniformBox) else None
    dead = np.zeros((B, d), bool)
    linear = np.zeros((B, d), bool)
    if box is not None:                                # pre-activation range on [-a, a]^n: b +- a |w|_1
        reach = box * np.abs(w).sum(-1)
        dead, linear = b + reach <= 0, b - reach >= 0
    K = np.full(B, np.nan)
    res = None
    if n is not None:
        res = resolution(int(n), sigma, beta, d * (n_in + 2) + 1)
        x, wt = _rule(inputs, n_in)
        strength = np.asarray(_node_variance(w, b, q, x, wt), np.float64) / (2 * sigma**2)   # a constant is c's
        degenerate = (strength <= resolution(int(n), sigma, beta, n_in + 2)) | dead
        linear = linear & ~degenerate
    else:
        degenerate = (np.linalg.norm(q[..., None] * w, axis=-1) <= tol * scale) | dead
        linear = linear & ~degenerate
    if inputs is not None and B:
        K = _population_losses(TwoLayer(w, b, q, c), truth, inputs, sigma)
    if d == 0:                                         # no node: a phase only if the truth has none
        group, orient = np.zeros((B, 0), int), np.zeros((B, 0))
        h = hb = np.zeros((B, 0, n_in + 1))
    else:
        group, orient, h, hb = _structure(w, b, q, h0, Q0, degenerate, linear, tol)
    valid = phase_labels(truth_min, d) if d >= m else frozenset()
    formed = _codes(group, orient, m, d, degenerate.sum(-1), linear.sum(-1))      # what the nodes form
    uniq_formed, back = np.unique(formed, axis=0, return_inverse=True)
    back = np.asarray(back).reshape(-1)
    formed_labels = np.array([_label(code, m) for code in uniq_formed] + [None], object)[:-1]
    if n is not None and d >= m and B:                 # within the resolution: a node for every truth node
        near = (K <= res) & np.array([lab not in valid for lab in formed_labels], bool)[back]
        if near.any():
            group, orient, degenerate, linear = _assign_uncarried(group, orient, h, h0, degenerate, linear, near)
    codes = _codes(group, orient, m, d, degenerate.sum(-1), linear.sum(-1))
    uniq, inverse = np.unique(codes, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    dist = np.full(B, np.inf)
    structures = np.empty(len(uniq), object)
    good = np.zeros(len(uniq), bool)
    for u, code in enumerate(uniq):                   # a few distinct structures, each one batch
        lab = structures[u] = _label(code, m)
        idx = np.flatnonzero(inverse == u)
        if all(a + r > 0 for a, r in lab.truth):
            dist[idx] = _distances(w[idx], b[idx], q[idx], c[idx], h[idx], hb[idx], group[idx], orient[idx],
                                   degenerate[idx], linear[idx], h0, Q0, c0, scale, lab)
        # on a box, nodes active on all of it add an affine part (W0 on the box is larger, DSLT3's caveat):
        # such a structure is a phase only if every truth boundary is still carried and its equations can hold
        good[u] = lab in valid or (lab.linear > 0 and box is not None and all(a + r > 0 for a, r in lab.truth))
    linear_label = np.array([lab.linear > 0 for lab in structures], bool)[inverse]
    if n is not None:                                  # the data decide: K within the resolution
        ok = good[inverse] & (K <= res) & (~linear_label | np.isfinite(dist))
    else:                                              # exact parameters: the equations must (nearly) hold
        ok = good[inverse] & np.isfinite(dist) & (~linear_label | (dist <= tol * scale))
    names_u = np.array([phase_name(lab, m) for lab in structures] + [NOT_IN_W0], object)
    labels_u = np.append(structures, np.array([NOT_IN_W0], object))
    pick = np.where(ok, inverse, len(uniq))
    labels, names, structure = labels_u[pick], names_u[pick], formed_labels[back]
    if not batch:
        return PhaseAssignment(labels[0], names[0], float(K[0]), float(dist[0]), group[0], orient[0], structure[0], res)
    return PhaseAssignment(_shaped(labels, batch), _shaped(names, batch), K.reshape(batch), dist.reshape(batch),
                           group.reshape(batch + (d,)), orient.reshape(batch + (d,)), _shaped(structure, batch), res)


def _shaped(values, batch: tuple) -> np.ndarray:
    """An object array of the batch's shape holding values (B,) one per entry (a PhaseLabel is a tuple: it stays
    one entry)."""
    out = np.empty(len(values), object)
    for i, v in enumerate(values):
        out[i] = v
    return out.reshape(batch)
