"""The true set W0 and its phases (DSLT3 Appendix 2; Petzka et al. 2020), and the DSLT4 phase rules.

Truth f0(x) = c0 + sum_j q0_j relu(<w0_j, x> + b0_j), j = 1..m, minimal and activation-distinguished
(q0_j != 0, w0_j != 0, the m boundaries H0_j pairwise different).  A model of width d >= m is in
W0 (f = f0 on R^n_in) iff its nodes fall into groups that share a boundary:

  * group on H0_j: every node i has (w_i, b_i) = s_i a_i (w0_j, b0_j), a_i > 0, s_i = +1 (truth's
    orientation) or -1 (reversed); with e_i = q_i a_i the kinks add up, sum_i e_i = q0_j;
  * hidden group on a boundary H that is no truth boundary: the kinks cancel, sum_i e_i = 0
    (two nodes on one side with opposite outputs: a cancelling pair; one node on each side: a
    linear function, Petzka's linear pair);
  * degenerate nodes: q_i w_i = 0 (q_i = 0, or w_i = 0 with the constant q_i relu(b_i) in c);

and the linear parts cancel.  With r_g = sum of e_i over the reversed nodes of a group (by
relu(-z) = relu(z) - z):

    sum_g r_g w_g = 0  (weight annihilation),        c = c0 + sum_g r_g b_g.

A *phase* is the combinatorial type of this decomposition, up to permutation and scaling: for
each truth node j the numbers (same, reversed) of model nodes on H0_j, the hidden groups as
(one side, other side) counts, and the number of degenerate nodes (:class:`PhaseLabel`).  DSLT3's
Appendix 2 lists the phases without hidden groups; hidden groups need two spare nodes
(d >= m + 2) and are points of W0 too (K = 0), which the fold-set argument of the sketch misses
because their kinks cancel.  Equality is on all of R^n_in; on a bounded input box W0 is larger
(a boundary outside the box), DSLT3's caveat.

DSLT4's rules on effective weights |q_i| w_i: :func:`radius_rule` and :func:`sector_rule`; :func:`rule_labels` names
the phases of either.

Which phase a parameter or a posterior draw is in: ``slt_relu.classify``.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from .network import TwoLayer, check_number, check_params, make_params
from .symmetry import are_equivalent, default_tol, numpy_params

__all__ = ["PhaseLabel", "Representative", "RuleLabels", "check_truth", "effective_weights", "radius_rule",
           "reduced_truth", "rule_labels", "sector_phase", "sector_rule", "true_set_representatives"]

RADIUS_PHASES = ("other", "degenerate", "non_degenerate")
SECTOR_PHASES = ("other", "true_orientation", "reversed")


class PhaseLabel(NamedTuple):
    """A phase of W0 up to permutation and scaling.

    truth: per truth node j, (same, reversed): model nodes on H0_j with the truth's orientation and
        with the reversed one.
    hidden: sorted tuple of (a, b), a >= b: groups of nodes on one boundary that is no truth
        boundary, a nodes on one side and b on the other ((2, 0) cancelling pair, (1, 1) linear pair).
    degenerate: number of nodes with q_i w_i = 0 (and, on a bounded input box, nodes inactive on
        the whole box).
    linear: on a bounded input box, nodes active on the whole box: each adds a linear function
        q_i (<w_i, x> + b_i) there (Petzka's linear neuron), which other nodes' linear parts or
        the output bias must balance.
    """

    truth: tuple
    hidden: tuple = ()
    degenerate: int = 0
    linear: int = 0

    @property
    def width(self) -> int:
        return (sum(a + b for a, b in self.truth) + sum(a + b for a, b in self.hidden) + self.degenerate
                + self.linear)

    @property
    def reversed_nodes(self) -> tuple:
        """Truth nodes j whose boundary carries a reversed model node."""
        return tuple(j for j, (_, r) in enumerate(self.truth) if r)

    @property
    def kind(self) -> str:
        """One word for plots, one of 'true_orientation', 'reversed' (each truth node by one model node,
        some reversed), 'degenerate', 'shared' (a truth boundary carries several nodes), 'linear'
        (a node active on the whole input box), 'hidden', in that order of precedence from the last."""
        if self.hidden:
            return "hidden"
        if self.linear:
            return "linear"
        if any(a + b > 1 for a, b in self.truth):
            return "shared"
        if self.degenerate:
            return "degenerate"
        return "reversed" if self.reversed_nodes else "true_orientation"

    def __str__(self) -> str:
        parts = [" ".join("+" * a + "-" * b or "0" for a, b in self.truth)]
        if self.hidden:
            parts.append("hidden " + " ".join(f"({a},{b})" for a, b in self.hidden))
        if self.degenerate:
            parts.append(f"{self.degenerate} degenerate")
        if self.linear:
            parts.append(f"{self.linear} linear")
        return " | ".join(parts)


class Representative(NamedTuple):
    """One parameter of a phase of W0: label, params (TwoLayer of the model's width), and the
    reversed-kink amounts r (m,) that solve the annihilation equation sum_j r_j w0_j + ... = 0."""

    label: PhaseLabel
    params: TwoLayer
    r: np.ndarray


def check_truth(truth: TwoLayer, tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Unit boundaries h0 (m, n+1) = (w0, b0)/|(w0, b0)| and kinks Q (m,) = q0 |(w0, b0)| of a
    minimal, activation-distinguished truth; ValueError otherwise."""
    check_params(truth)
    if np.ndim(truth.w) != 2:
        raise ValueError(f"truth: expected one network, got w of shape {np.shape(truth.w)}")
    if np.shape(truth.w)[0] == 0:
        raise ValueError("truth: expected at least one node (a constant truth's W0 has only degenerate nodes)")
    w, b, q, c = numpy_params(truth)
    zero_q = np.flatnonzero(q == 0)
    zero_w = np.flatnonzero(np.linalg.norm(w, axis=1) == 0)
    if len(zero_q) or len(zero_w):
        raise ValueError(f"truth: expected a minimal truth (every q0_j != 0 and w0_j != 0); nodes "
                         f"{sorted(set(zero_q.tolist()) | set(zero_w.tolist()))} are degenerate")
    hb = np.concatenate([w, b[:, None]], 1)
    norm = np.linalg.norm(hb, axis=1)
    h = hb / norm[:, None]
    for i, j in itertools.combinations(range(len(q)), 2):
        if min(np.linalg.norm(h[i] - h[j]), np.linalg.norm(h[i] + h[j])) <= tol:
            raise ValueError(f"truth: expected an activation-distinguished truth (pairwise different boundaries); "
                             f"nodes {i} and {j} share a boundary (reduce the truth first)")
    return h, q * norm


def reduced_truth(truth: TwoLayer) -> TwoLayer:
    """The truth in irreducible form (Petzka's R1-R3, :func:`slt_relu.symmetry.reduce`): DSLT4 PT1
    at t = pi/2 has two nodes on one boundary, which reduce to one; ValueError if the reduced
    network has a linear part (no two-layer truth of this module's kind)."""
    from .symmetry import reduce

    red = reduce(truth)
    if np.any(np.abs(np.asarray(red.linear)) > 1e-9):
        raise ValueError("truth: its irreducible form has a linear part")
    return red.params


def _split(total: float, k: int, margin: float) -> np.ndarray | None:
    """k numbers summing to total, each at least `margin` away from 0 (None if impossible: k = 1, small total).

    k >= 2: total / k + t (k - 1, -1, .., -1), with t the first of a few multiples of the margin that
    keeps every part clear of 0 (so classify_phase at tol 0.1 sees no degenerate node)."""
    if k == 1:
        return np.array([total]) if abs(total) >= margin else None
    offsets = np.full(k, -1.0)
    offsets[0] = k - 1
    for f in (1.5, 2.5, 4.0, -1.5, -2.5):
        parts = total / k + f * (abs(total) / k + margin) * offsets / (k - 1)
        if np.min(np.abs(parts)) >= margin:
            return parts
    return None


def _hidden_groups(size: int) -> list[tuple]:
    """Multisets of hidden groups (a, b), a >= b, a + b >= 2, with total size `size`."""
    kinds = [(a, s - a) for s in range(2, size + 1) for a in range(s, (s - 1) // 2, -1)]
    out = []
    for n in range(size // 2 + 1):
        for combo in itertools.combinations_with_replacement(kinds, n):
            if sum(a + b for a, b in combo) == size:
                out.append(tuple(sorted(combo, reverse=True)))
    return out


def _labels(m: int, d: int) -> list[PhaseLabel]:
    """Every candidate label for m truth nodes and width d (feasibility is checked separately)."""
    out = []
    for deg in range(d - m + 1):
        rest = d - deg
        for hidden_size in range(rest - m + 1):
            if hidden_size == 1:
                continue
            truth_size = rest - hidden_size
            for sizes in itertools.product(range(1, truth_size - m + 2), repeat=m):
                if sum(sizes) != truth_size:
                    continue
                for orient in itertools.product(*[[(s - r, r) for r in range(s + 1)] for s in sizes]):
                    for hidden in _hidden_groups(hidden_size):
                        out.append(PhaseLabel(tuple(orient), hidden, deg))
    return out


def _other_direction(k: int, n: int, avoid: np.ndarray) -> np.ndarray:
    """A unit direction for hidden group k that is not parallel to any row of avoid."""
    for t in range(50):
        angle = 0.35 + 0.9 * (k + t)
        v = np.zeros(n)
        v[0] = np.cos(angle)
        if n > 1:
            v[1] = np.sin(angle)
        if n == 1:
            v[0] = 1.0 if (k + t) % 2 == 0 else -1.0
        v /= np.linalg.norm(v)
        if n == 1 or all(abs(abs(v @ a) / np.linalg.norm(a) - 1) > 1e-3 for a in avoid):
            return v
    return v


def _construct(label: PhaseLabel, w0, b0, q0, c0, scale, seed: int = 0) -> tuple[TwoLayer, np.ndarray] | None:
    # scale: min_j |q0_j| |w0_j| (the smallest truth node's effective weight)
    """A parameter of the phase `label`, or None if the phase is empty."""
    m, n = w0.shape
    truth_mixed = [j for j, (a, r) in enumerate(label.truth) if a and r]
    hidden_mixed = [g for g, (a, b) in enumerate(label.hidden) if b]
    fixed_r = np.array([q0[j] if a == 0 else 0.0 for j, (a, r) in enumerate(label.truth)])
    # unknowns: r_j (j mixed), v_g = B_g w_g in R^n (g mixed); sum_j r_j w0_j + sum_g v_g = 0
    A = np.concatenate([w0[truth_mixed].T.reshape(n, -1), np.tile(np.eye(n), len(hidden_mixed))], 1)
    rhs = -(fixed_r @ w0)
    if A.shape[1] == 0:
        candidates = [np.zeros(0)] if np.linalg.norm(rhs) <= 1e-9 * scale else []
    else:
        x0, *_ = np.linalg.lstsq(A, rhs, rcond=None)
        if np.linalg.norm(A @ x0 - rhs) > 1e-9 * scale:
            return None
        _, sv, vt = np.linalg.svd(A)
        null = vt[int(np.sum(sv > 1e-10 * max(sv.max(initial=0), 1))):].T
        rng = np.random.default_rng(seed)
        candidates = [x0] + [x0 + null @ rng.normal(scale=scale, size=null.shape[1]) for _ in range(8)] \
            if null.size else [x0]
    for x in candidates:
        r = fixed_r.copy()
        r[truth_mixed] = x[: len(truth_mixed)]
        v = x[len(truth_mixed):].reshape(len(hidden_mixed), n)
        built = _build(label, r, dict(zip(hidden_mixed, v)), w0, b0, q0, c0, scale)
        if built is not None:
            return built, r
    return None


def _build(label, r, v, w0, b0, q0, c0, scale):
    m, n = w0.shape
    ws, bs, qs = [], [], []
    c = c0 + float(r @ b0)
    for j, (a, rev) in enumerate(label.truth):
        for count, total, s in ((a, q0[j] - r[j], 1.0), (rev, r[j], -1.0)):
            if count == 0:
                continue
            parts = _split(total, count, 0.25 * scale / np.linalg.norm(w0[j]))
            if parts is None:
                return None
            ws += [s * w0[j]] * count
            bs += [s * b0[j]] * count
            qs += list(parts)
    planes = [np.append(w0[j], b0[j]) for j in range(m)]
    for g, (a, bcount) in enumerate(label.hidden):
        if bcount:
            vg = v[g]
            if np.linalg.norm(vg) < 0.25 * scale:
                if a == 1 or bcount == 1:
                    return None
                direction, B = _other_direction(g, n, w0), 0.0
            else:
                direction, B = vg / np.linalg.norm(vg), float(np.linalg.norm(vg))
        else:
            direction, B = _other_direction(g, n, w0), 0.0
        for bias in (0.6, -0.6, 0.8, -0.8, 0.25, -0.45):        # a boundary well away from the others
            plane = np.append(direction, bias)
            unit = plane / np.linalg.norm(plane)
            if all(min(np.linalg.norm(unit - p / np.linalg.norm(p)), np.linalg.norm(unit + p / np.linalg.norm(p)))
                   > 0.15 for p in planes):
                break
        planes.append(plane)
        c += B * bias
        for count, total, s in ((a, -B, 1.0), (bcount, B, -1.0)):
            if count == 0:
                continue
            parts = _split(total, count, 0.25 * scale)
            if parts is None:
                return None
            ws += [s * direction] * count
            bs += [s * bias] * count
            qs += list(parts)
    ws += [np.zeros(n)] * label.degenerate
    bs += [0.0] * label.degenerate
    qs += [0.0] * label.degenerate
    return make_params(np.array(ws).reshape(len(qs), n), np.array(bs), np.array(qs), c)


def true_set_representatives(truth: TwoLayer, width: int) -> list[Representative]:
    """One parameter for every phase of W0 (model of the given width), up to permutation and scaling.

    truth: a minimal, activation-distinguished TwoLayer with m nodes; width d >= m.  Every
    candidate label (:func:`_labels`) is realised if the annihilation equation has a solution
    in which every node keeps a non-zero output (checked on the least-norm solution and on
    random points of its solution set): truth-group nodes are (w, b) = +-(w0_j, b0_j) with the
    kinks split between them, hidden groups sit on boundaries away from the truth's (along
    the linear part they must carry), degenerate nodes are q = w = b = 0.  Each representative
    is checked to be functionally equal to the truth (are_equivalent).  Sorted by
    (degenerate, hidden, truth).
    """
    h0, _ = check_truth(truth)
    w0, b0, q0, c0 = numpy_params(truth)
    m = len(q0)
    if not (isinstance(width, (int, np.integer)) and width >= m):
        raise ValueError(f"width: expected an integer >= m = {m} (the truth's nodes), got {width!r}")
    scale = float(np.min(np.abs(q0) * np.linalg.norm(w0, axis=1)))
    reps = []
    for label in _labels(m, int(width)):
        built = _construct(label, w0, b0, q0, c0, scale)
        if built is None:
            continue
        params, r = built
        if not are_equivalent(params, truth, tol=max(1e-9, 10 * default_tol(params.w.dtype))):
            raise RuntimeError(f"true_set_representatives: the representative of {label} is not in W0; please report")
        reps.append(Representative(label, params.__class__(*(x.astype(truth.w.dtype) for x in params)), r))
    return sorted(reps, key=lambda rep: (rep.label.degenerate, rep.label.hidden, rep.label.truth))


def effective_weights(params: TwoLayer):
    """|q_i| w_i (DSLT4's effective weights); shape (..., d, n_in)."""
    return np.abs(np.asarray(params.q))[..., None] * np.asarray(params.w)


def radius_rule(params: TwoLayer, eps: float = 0.3, non_degenerate: float = 1.0, degenerate: float = 2.0):
    """DSLT4's radius rule on the effective weights' norms r_i = | |q_i| w_i |: a phase code per network.

        degenerate (1):      min_i r_i < eps and |max_i r_i - degenerate| < eps,
        non_degenerate (2):  every |r_i - non_degenerate| < eps,
        other (0)            otherwise  (names in RADIUS_PHASES).

    Args:
        params: TwoLayer with leading batch axes (w (..., d, n_in)), e.g. a posterior's draws (C, S).
        eps: the radii's tolerance, finite, >= 0.
        non_degenerate: the radius of every node in the non-degenerate phase.
        degenerate: the radius of the live node in the degenerate phase.

    Returns:
        (...) int codes, the draws' batch shape (:func:`slt_relu.phase_masses` takes them with RADIUS_PHASES).

    References:
        DSLT4 (Carroll, "Phase transitions in neural networks"): PT1's phases by the nodes' radii.
    """
    check_params(params)
    for name, value in (("eps", eps), ("non_degenerate", non_degenerate), ("degenerate", degenerate)):
        check_number(value, name, nonnegative=True)
    r = np.linalg.norm(effective_weights(params), axis=-1)
    if r.shape[-1] == 0:
        return np.zeros(r.shape[:-1], int)
    deg = (r.min(-1) < eps) & (np.abs(r.max(-1) - degenerate) < eps)
    non = np.all(np.abs(r - non_degenerate) < eps, axis=-1)
    return np.where(deg, 1, np.where(non, 2, 0))


def _directions(truth: TwoLayer) -> np.ndarray:
    w0 = np.asarray(truth.w, np.float64)
    u = w0 / np.linalg.norm(w0, axis=1, keepdims=True)
    return np.concatenate([u, -u])


def sector_rule(params: TwoLayer, truth: TwoLayer):
    """DSLT4's sector rule: for each node, the index of the direction nearest (in angle) to its
    effective weight |q_i| w_i among the truth directions w0_j/|w0_j| (indices 0..m-1) and their
    negations (m..2m-1).  For the m-symmetric truth with m = 3 these are the six 60-degree
    sectors.  Shapes: (..., d, n_in) -> (..., d)."""
    check_params(truth)
    dirs = _directions(truth)
    eff = effective_weights(params)
    norm = np.linalg.norm(eff, axis=-1, keepdims=True)
    cos = (eff / np.where(norm > 0, norm, 1.0)) @ dirs.T
    return np.argmax(cos, axis=-1)


def sector_phase(params: TwoLayer, truth: TwoLayer):
    """Per network: 1 true_orientation if the nodes' sectors are exactly the truth directions
    {0..m-1} (each taken), 2 reversed if exactly the negated ones {m..2m-1}, else 0 other
    (names in SECTOR_PHASES).  Shapes: (..., d, n_in) -> (...)."""
    sec = sector_rule(params, truth)
    m = np.shape(truth.w)[0]
    onehot = np.stack([np.any(sec == k, axis=-1) for k in range(2 * m)], -1)
    true = np.all(onehot[..., :m], -1) & ~np.any(onehot[..., m:], -1)
    rev = np.all(onehot[..., m:], -1) & ~np.any(onehot[..., :m], -1)
    return np.where(true, 1, np.where(rev, 2, 0))


RULES = ("radius", "sector", "none")


class RuleLabels(NamedTuple):
    """The phases a DSLT4 rule gives networks: codes (...) (ints, the networks' batch shape) indexing names."""

    codes: np.ndarray
    names: tuple


def rule_labels(rule: str, params: TwoLayer, truth: TwoLayer | None = None, *, eps: float = 0.3,
                non_degenerate: float = 1.0, degenerate: float = 2.0) -> RuleLabels | None:
    """The phases of DSLT4's rule ``rule`` on networks with leading batch axes: (codes (...), the names the codes
    index), or None for rule "none".

    Args:
        rule: "radius" (:func:`radius_rule`, names RADIUS_PHASES), "sector" (:func:`sector_phase`, names
            SECTOR_PHASES) or "none".
        params: networks (..., d, n_in), e.g. a posterior's draws (chains, draws, d, n_in).
        truth: the truth, for the sector rule.
        eps, non_degenerate, degenerate: the radius rule's tolerance and radii.

    Returns:
        :class:`RuleLabels` (codes, names), or None.
    """
    if rule == "radius":
        return RuleLabels(radius_rule(params, eps, non_degenerate, degenerate), RADIUS_PHASES)
    if rule == "sector":
        if truth is None:
            raise ValueError("truth: expected the truth network for the sector rule, got None")
        return RuleLabels(sector_phase(params, truth), SECTOR_PHASES)
    if rule == "none":
        return None
    raise ValueError(f"rule: expected one of {RULES}, got {rule!r}")
