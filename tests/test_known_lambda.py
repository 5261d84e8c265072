"""Closed-form learning coefficients (slt_relu.known_lambda) against hand counts, the published checks, and
each other: reduced-rank regression (Aoyagi & Watanabe 2005) and deep linear networks (Aoyagi 2024) are
two formulas that must agree for one hidden layer."""
from fractions import Fraction

import pytest

from slt_relu.known_lambda import (deep_linear, minimal_two_layer_relu, normal_crossing, reduced_rank, regular,
                                   two_layer_phase)


def test_normal_crossings_by_hand():
    assert normal_crossing((1, 1)) == (Fraction(1, 2), 2)            # w1^2 w2^2
    assert normal_crossing((1,)) == (Fraction(1, 2), 1)              # w^2: a regular direction
    assert normal_crossing((1, 2, 3)) == (Fraction(1, 6), 1)         # w1^2 w2^4 w3^6
    assert normal_crossing((2, 2, 1)) == (Fraction(1, 4), 2)
    assert normal_crossing((1, 2), kind="sum") == (Fraction(3, 4), 1)
    assert normal_crossing((1, 1, 1), kind="sum") == regular(3)      # |w|^2: regular, d / 2
    # devinterp's nine sampler-accuracy cases, Polynomial(powers): K = prod_i w_i^(2 p_i)
    nine = {(0, 1): (Fraction(1, 2), 1), (1, 1): (Fraction(1, 2), 2), (0, 2): (Fraction(1, 4), 1),
            (1, 2): (Fraction(1, 4), 1), (2, 2): (Fraction(1, 4), 2), (0, 3): (Fraction(1, 6), 1),
            (1, 3): (Fraction(1, 6), 1), (2, 3): (Fraction(1, 6), 1), (3, 3): (Fraction(1, 6), 2)}
    assert {p: normal_crossing(p) for p in nine} == nine


def test_the_published_deep_linear_checks():
    """shared/papers/known_learning_coefficients.md: H = (5, 3, 5), (5, 4, 5), (4, 3, 8) with r = 0."""
    assert deep_linear(5, (3, 5)) == (Fraction(13, 2), 2)
    assert deep_linear(5, (4, 5)) == (8, 1)
    assert deep_linear(4, (3, 8)) == (6, 1)


@pytest.mark.parametrize("i", range(1, 8))
def test_deep_linear_with_one_hidden_layer_is_reduced_rank_regression(i):
    for h in range(1, 8):
        for o in range(1, 8):
            for r in range(min(i, h, o) + 1):
                assert deep_linear(i, (h, o), r) == reduced_rank(i, h, o, r), (i, h, o, r)


def test_reduced_rank_limits():
    # one input, one hidden unit, one output: y = b a x, K = (ab)^2 / 2 up to the input's variance: w1^2 w2^2
    assert reduced_rank(1, 1, 1) == normal_crossing((1, 1))
    # a truth of full rank h: the map is identified up to GL(h), regular in h (i + o) - h^2 directions
    for i, h, o in [(4, 2, 3), (5, 3, 3), (3, 3, 3), (6, 1, 2)]:
        assert reduced_rank(i, h, o, true_rank=h) == (Fraction(h * (i + o) - h * h, 2), 1)
    # a bottleneck wider than input + output: lambda = M N / 2, the regular count of the product map
    assert reduced_rank(2, 9, 3) == (3, 1)


def test_deep_linear_adds_nothing_for_a_wide_extra_layer():
    # a hidden layer at least as wide as every other is no bottleneck: the same lambda as without it
    for dims in [(3, 2, 3), (4, 2, 5), (2, 1, 2)]:
        i, h, o = dims
        assert deep_linear(i, (h, 10, o)) == deep_linear(i, (h, o)), dims


def test_minimal_two_layer_relu():
    # d = m = 1 width 2: D = 2 (1 + 1 + 1) + 1 = 7, d = 2 scalings: (7 - 2) / 2
    assert minimal_two_layer_relu(1, 2) == (Fraction(5, 2), 1)
    # DSLT4 PT2: input 2, width 3, output 1: D = 3 * 4 + 1 = 13, lambda = (13 - 3) / 2 = 5 (llc_known_values)
    assert minimal_two_layer_relu(2, 3) == (5, 1)


def test_two_layer_phase_by_hand():
    """One node per boundary: the minimal network's (D' - d') / 2 = (m (n_in + 1) + 1) / 2; a pair of nodes on one
    boundary adds n_in / 3 (n_in directions of relative tilt, K ~ |u|^3 there); a degenerate node dead on a bounded
    box adds 0."""
    assert two_layer_phase(1, 1) == (Fraction(3, 2), 1)                       # (1 * 2 + 1) / 2
    assert two_layer_phase(2, 1) == (2, 1)                                    # DSLT4 PT1: (1 * 3 + 1) / 2
    assert two_layer_phase(2, 1, shared_pairs=1) == (Fraction(8, 3), 1)       # PT1's "++": 2 + 2 / 3
    assert two_layer_phase(2, 1, degenerate=1) == (2, 1)                      # PT1's "+ | 1 degenerate"
    assert two_layer_phase(3, 2, shared_pairs=2, degenerate=3) == (Fraction(9, 2) + 2, 1)   # (2*4+1)/2 + 2 * 3/3
    for n_in in (1, 2, 5):
        for m in (1, 2, 3):
            assert two_layer_phase(n_in, m) == minimal_two_layer_relu(n_in, m)


@pytest.mark.parametrize("call, match", [
    (lambda: two_layer_phase(0, 1), "input_dim: expected an integer >= 1"),
    (lambda: two_layer_phase(2, 0), "carried: expected an integer >= 1"),
    (lambda: two_layer_phase(2, 1, shared_pairs=2), "shared_pairs: expected at most carried = 1"),
    (lambda: two_layer_phase(2, 1, shared_pairs=-1), "shared_pairs: expected an integer >= 0"),
    (lambda: two_layer_phase(2, 1, degenerate=1.0), "degenerate: expected an integer >= 0"),
    (lambda: two_layer_phase(2, 1, degenerate=1, bounded_inputs=False), "degenerate: the count holds on a bounded"),
    (lambda: two_layer_phase(2, 1, bounded_inputs="yes"), "bounded_inputs: expected True or False"),
])
def test_two_layer_phase_refuses_bad_arguments_in_one_line(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("call, match", [
    (lambda: normal_crossing(()), "k: expected a non-empty"),
    (lambda: normal_crossing((1, 0), kind="sum"), "k: expected"),
    (lambda: normal_crossing((0, 0)), "k: expected at least one positive"),
    (lambda: normal_crossing((1, -1)), "k: expected"),
    (lambda: normal_crossing((1,), kind="max"), "kind: expected"),
    (lambda: reduced_rank(3, 2, 2, true_rank=3), "true_rank: expected at most"),
    (lambda: reduced_rank(3, 0, 2), "hidden: expected an integer >= 1"),
    (lambda: deep_linear(3, (2,)), "widths: expected at least one hidden"),
    (lambda: deep_linear(3, (2, 2.5)), "widths: expected"),
    (lambda: regular(True), "num_params: expected"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
