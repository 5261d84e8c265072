"""Learning coefficients lambda and multiplicities m known in closed form: the ground truth the
estimators are checked against.

Each function returns ``(lambda, m)`` as exact Python numbers (``fractions.Fraction`` where lambda is
rational, which it is for every family here; ``float(lam)`` for arithmetic); the free energy they enter is
in the package's docstring (``slt_relu.known_lambda``).

References:
    Watanabe 2009 (normal crossings, regular models); Aoyagi & Watanabe 2005, "Stochastic complexities
    of reduced rank regression in Bayesian estimation" (reduced-rank regression); Aoyagi 2024,
    "Consideration on the learning efficiency of multiple-layered neural networks with linear units"
    (deep linear networks); Carroll 2021, "Phase transitions in neural networks" (DSLT3: the minimal
    two-layer ReLU network); the summary in shared/papers/known_learning_coefficients.md.
"""
from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations
from typing import Literal, Sequence

__all__ = ["deep_linear", "minimal_two_layer_relu", "normal_crossing", "reduced_rank", "regular", "two_layer_phase"]


def _positive_ints(values, name: str, allow_zero: bool = False) -> tuple[int, ...]:
    try:
        out = tuple(values)
    except TypeError:
        raise ValueError(f"{name}: expected a sequence of integers, got {values!r}") from None
    low = 0 if allow_zero else 1
    if not out or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in out):
        raise ValueError(f"{name}: expected a non-empty sequence of integers >= {low}, got {values!r}")
    return out


def _int(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    return value


def normal_crossing(k: Sequence[int], kind: Literal["product", "sum"] = "product") -> tuple[Fraction, int]:
    """lambda and m of a normal crossing, K(w) = prod_i w_i^(2 k_i) or sum_i w_i^(2 k_i), near w = 0
    with a prior positive there:

        product:  lambda = min_i 1 / (2 k_i),  m = #{i : 1 / (2 k_i) = lambda}
        sum:      lambda = sum_i 1 / (2 k_i),  m = 1

    Args:
        k: the half-exponents k_i (so ``normal_crossing((1, 1))`` is w1^2 w2^2: (1/2, 2)); for a product
            k_i = 0 is a coordinate K does not depend on (devinterp's ``Polynomial([0, 1])``: K = w2^2),
            for a sum every k_i >= 1.
        kind: "product" or "sum".

    Returns:
        (lambda, m); lambda a Fraction.

    References:
        Watanabe 2009, Section 2.4 and Theorem 6.1 (resolution to normal crossings).
    """
    if kind == "product":
        k = _positive_ints(k, "k", allow_zero=True)
        if not any(k):
            raise ValueError(f"k: expected at least one positive half-exponent (K = 1 has no zero), got {k!r}")
        lam = min(Fraction(1, 2 * ki) for ki in k if ki)
        return lam, sum(Fraction(1, 2 * ki) == lam for ki in k if ki)
    if kind == "sum":
        k = _positive_ints(k, "k")
        return sum((Fraction(1, 2 * ki) for ki in k), Fraction(0)), 1
    raise ValueError(f"kind: expected 'product' or 'sum', got {kind!r}")


def regular(num_params: int) -> tuple[Fraction, int]:
    """A regular model (positive-definite Fisher information at the truth) with d parameters:
    lambda = d / 2, m = 1 (Watanabe 2009, Section 1.4: the BIC)."""
    return Fraction(_int(num_params, "num_params", 1), 2), 1


def minimal_two_layer_relu(input_dim: int, width: int, output_dim: int = 1) -> tuple[Fraction, int]:
    """The generic minimal two-layer ReLU network (every node active, no two nodes sharing a
    boundary, the truth of minimal width): lambda = (D - d) / 2, m = 1, with D = width (input_dim + 1
    + output_dim) + output_dim the parameter count and d = width the scaling symmetries (one positive
    rescaling per node), so that the model is regular in the D - d directions across the scaling
    orbits (DSLT3, Section 4; Fisher rank D - d: ``slt_relu.fisher``)."""
    i, h, o = _int(input_dim, "input_dim", 1), _int(width, "width", 1), _int(output_dim, "output_dim", 1)
    D = h * (i + 1 + o) + o
    return Fraction(D - h, 2), 1


def two_layer_phase(input_dim: int, carried: int, shared_pairs: int = 0, degenerate: int = 0,
                    bounded_inputs: bool = True) -> tuple[Fraction, int]:
    """The local learning coefficient of a phase of W0 of a two-layer ReLU network (DSLT3 Appendix 2's phases,
    ``slt_relu.phases``) whose nodes carry ``carried`` truth boundaries, each by one node or, for
    ``shared_pairs`` of them, by two nodes of the same orientation, plus ``degenerate`` nodes:

        lambda = (carried (input_dim + 1) + 1) / 2 + shared_pairs * input_dim / 3,   m = 1.

    The count, on a region around a representative of the phase that holds no point of another phase:

    - one node per boundary: the minimal network of :func:`minimal_two_layer_relu`, regular across its
      ``carried`` scaling orbits (Fisher rank carried (input_dim + 1) + 1);
    - a pair on one boundary (nodes i, j with kinks e_i + e_j = the truth's): to first order only
      e_i u_i + e_j u_j enters f (u the tilt of a boundary, input_dim numbers), so the pair adds one flat
      direction (the split of the kink) and input_dim directions of relative tilt u along which f - f0 is
      two ramps on strips of width |u| between the tilted and the true boundary, of squared norm
      ~ |u|^3: a homogeneous cubic, positive for e_i + e_j != 0, whose volume {|u|^3 < eps} ~ eps^(input_dim / 3);
    - a degenerate node (q_i w_i = 0) on a bounded input box: its configurations with b_i <= -a |w_i|_1 (the
      node dead on the box [-a, a]^n, any q_i) are an open set of its input_dim + 2 coordinates on which K does
      not change, so the node adds 0 (the volume of {K < eps} keeps a positive factor).  On unbounded inputs
      there is no such set, and the count differs (ValueError).

    Phases with hidden groups, nodes linear on the box, three or more nodes on one boundary or a pair of
    opposite orientations are not covered.  The approach to lambda can be slow: the degenerate node's near-dead
    configurations (K ~ q_i^2 delta^4 for a boundary delta past a corner of the box) add to t E_t[t K] a term that
    decays like t^(-1/4) (docs/experiments/lambda_per_phase.md).

    Args:
        input_dim: n_in.
        carried: the truth boundaries carried (the truth's nodes m), >= 1.
        shared_pairs: how many of them are carried by two nodes of one orientation.
        degenerate: degenerate nodes.
        bounded_inputs: whether q(x) is supported on a bounded box (``slt_relu.UniformBox``).

    Returns:
        (lambda, m); lambda a Fraction.

    References:
        DSLT3 (Carroll, "Neural networks are singular"): the phases of W0, the Fisher count; DSLT4 (Carroll,
        "Phase transitions in neural networks"): the degenerate phase's lower lambda at PT1.
    """
    n, m = _int(input_dim, "input_dim", 1), _int(carried, "carried", 1)
    pairs, deg = _int(shared_pairs, "shared_pairs", 0), _int(degenerate, "degenerate", 0)
    if not isinstance(bounded_inputs, bool):
        raise ValueError(f"bounded_inputs: expected True or False, got {bounded_inputs!r}")
    if pairs > m:
        raise ValueError(f"shared_pairs: expected at most carried = {m}, got {pairs}")
    if deg and not bounded_inputs:
        raise ValueError("degenerate: the count holds on a bounded input box (a dead node's open set of "
                         "configurations); expected bounded_inputs=True or degenerate=0")
    return minimal_two_layer_relu(n, m)[0] + Fraction(pairs * n, 3), 1


def reduced_rank(input_dim: int, hidden: int, output_dim: int, true_rank: int = 0) -> tuple[Fraction, int]:
    """Reduced-rank regression y = B A x (A: hidden x input_dim, B: output_dim x hidden) with a true
    map of rank r (Aoyagi & Watanabe 2005, Main Theorem).  With M = input_dim - r, H = hidden - r,
    N = output_dim - r:

        N + H < M:  lambda = H N / 2              M + H < N:  lambda = H M / 2
        M + N < H:  lambda = M N / 2              otherwise:  lambda = (2MN + 2HN + 2MH - N^2 - M^2 - H^2) / 8
                                                               (+ 1/8 and m = 2 when M + H + N is odd)

    plus (r (input_dim + output_dim) - r^2) / 2; m = 1 except in the last case with M + H + N odd.
    It equals :func:`deep_linear` with one hidden layer (a test of both).

    Returns:
        (lambda, m).
    """
    i, h, o = _int(input_dim, "input_dim", 1), _int(hidden, "hidden", 1), _int(output_dim, "output_dim", 1)
    r = _int(true_rank, "true_rank", 0)
    if r > min(i, h, o):
        raise ValueError(f"true_rank: expected at most min(input_dim, hidden, output_dim) = {min(i, h, o)}, got {r}")
    M, H, N = i - r, h - r, o - r
    base = Fraction(r * (i + o) - r * r, 2)
    if N + H < M:
        return base + Fraction(H * N, 2), 1
    if M + H < N:
        return base + Fraction(H * M, 2), 1
    if M + N < H:
        return base + Fraction(M * N, 2), 1
    lam = Fraction(2 * M * N + 2 * H * N + 2 * M * H - N * N - M * M - H * H, 8)
    odd = (M + H + N) % 2 == 1
    return base + lam + (Fraction(1, 8) if odd else 0), 2 if odd else 1


def deep_linear(input_dim: int, widths: Sequence[int], true_rank: int = 0) -> tuple[Fraction, int]:
    """A deep linear network f(x) = W_L ... W_1 x with layer widths H_0 = input_dim, H_1..H_{L-1}
    (hidden), H_L (output), whose true product has rank r (Aoyagi 2024, Theorem 1).  With
    M_i = H_i - r, take S = the indices of the k smallest M_i for the smallest k such that, with
    ell = |S| - 1,

        max_{i in S} M_i < min_{j not in S} M_j,   sum_{i in S} M_i >= ell max_{i in S} M_i,
        sum_{i in S} M_i < ell min_{j not in S} M_j           (the outer conditions when S is not all);

    then with Sigma = sum_{i in S} M_i and a = Sigma - (ceil(Sigma / ell) - 1) ell,

        lambda = (r (H_0 + H_L) - r^2) / 2 + a (ell - a) / (4 ell) - (ell (ell - 1) / 4) (Sigma / ell)^2
                 + (1/2) sum_{i < j in S} M_i M_j,
        m = a (ell - a) + 1.

    Args:
        input_dim: H_0.
        widths: the hidden widths then the output width (at least one hidden layer and the output).
        true_rank: r <= min H_i.

    Returns:
        (lambda, m).
    """
    H = (_int(input_dim, "input_dim", 1),) + _positive_ints(widths, "widths")
    if len(H) < 3:
        raise ValueError(f"widths: expected at least one hidden width and the output width, got {widths!r}")
    r = _int(true_rank, "true_rank", 0)
    if r > min(H):
        raise ValueError(f"true_rank: expected at most the smallest width {min(H)}, got {r}")
    M = sorted(h - r for h in H)
    for size in range(2, len(M) + 1):
        S, rest = M[:size], M[size:]
        ell, total = size - 1, sum(M[:size])
        if rest and not max(S) < min(rest):
            continue
        if total < ell * max(S) or (rest and not total < ell * min(rest)):
            continue
        a = total - (math.ceil(Fraction(total, ell)) - 1) * ell
        lam = (Fraction(r * (H[0] + H[-1]) - r * r, 2) + Fraction(a * (ell - a), 4 * ell)
               - Fraction(ell * (ell - 1), 4) * Fraction(total, ell) ** 2
               + Fraction(sum(x * y for x, y in combinations(S, 2)), 2))
        return lam, a * (ell - a) + 1
    raise AssertionError(f"no index set satisfies Aoyagi's conditions for widths {H}, rank {r}")  # pragma: no cover
