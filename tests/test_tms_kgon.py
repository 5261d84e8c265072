"""Regular k-gons of the toy model of superposition: construction, refinement, criticality, Hessian and
Fisher counts, first-principles learning coefficients, and the table."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.tms import (fisher_rank, hessian_counts, kgon_record, kgon_table, loss_hessian, make_kgon,
                          population_loss, positive_unused_bias, refine_kgon, refined_kgon, rotate, rotation,
                          rotation_generator)
from slt_relu.tms.critical_points import is_smooth
from slt_relu.tms.kgon import kgon_loss_formula, variant_name
from tms_reference import quadrature_loss


@pytest.fixture(scope="module")
def table():
    """Every k and variant for c = 4 and 6 (c = 5 and 8: single records below, to compile less)."""
    return kgon_table((4, 6))


def test_make_kgon_places_columns_on_a_regular_polygon():
    p = make_kgon(6, 5, 1.3, -0.2, n_positive=1)
    W, b = np.asarray(p.W), np.asarray(p.b)
    np.testing.assert_allclose(np.linalg.norm(W, axis=0), [1.3] * 5 + [0.0], rtol=1e-15)
    angles = np.arctan2(W[1, :5], W[0, :5]) % (2 * np.pi)
    np.testing.assert_allclose(np.diff(angles), 2 * np.pi / 5, rtol=1e-14)
    np.testing.assert_allclose(b, [-0.2] * 5 + [1 / 12], rtol=1e-15)
    np.testing.assert_allclose(make_kgon(6, 4, n_positive=1).b, [0, 0, 0, 0, 1 / 12, -1 / 12], rtol=1e-15)
    # a square: columns at right angles have G_ji = 0 exactly (entries below 4 eps l are set to 0)
    G = np.asarray(make_kgon(4, 4).W.T @ make_kgon(4, 4).W)
    np.testing.assert_array_equal(G, [[1, 0, -1, 0], [0, 1, 0, -1], [-1, 0, 1, 0], [0, -1, 0, 1]])
    assert variant_name(6, 3, 1) == "+--" and variant_name(5, 5, 0) == ""


def test_make_kgon_refuses_bad_arguments():
    with pytest.raises(ValueError, match="^k: expected 0 <= k <= c = 4"):
        make_kgon(4, 5)
    with pytest.raises(ValueError, match="^n_positive: expected 0 <= n_positive <= c - k = 1"):
        make_kgon(4, 3, n_positive=2)
    with pytest.raises(ValueError, match="^negative_bias: expected a negative"):
        make_kgon(4, 3, negative_bias=0.1)
    with pytest.raises(ValueError, match="^length: expected a positive"):
        make_kgon(4, 3, length=-1.0)
    with pytest.raises(ValueError, match="^k: expected 1 <= k <= c"):
        kgon_record(4, 0)
    with pytest.raises(ValueError, match="^variants: expected 'all' or 'extremes'"):
        kgon_table((4,), variants="some")


@pytest.mark.parametrize("k", [5, 6, 7, 8])
def test_refined_length_and_bias_are_a_minimum_of_the_quadrature_loss(k):
    """(l, b) of Newton's method on the closed form against the independent quadrature: central differences
    in (l, b) (h = 1e-6: truncation ~1e-12, rounding ~1e-10) below 1e-8, and every point of a ring of radius
    1e-3 around it higher."""
    length, bias = refine_kgon(k)
    Lq = lambda l, b: quadrature_loss(*make_kgon(k, k, l, b))
    h = 1e-6
    assert abs(Lq(length + h, bias) - Lq(length - h, bias)) / (2 * h) < 1e-8
    assert abs(Lq(length, bias + h) - Lq(length, bias - h)) / (2 * h) < 1e-8
    L0 = Lq(length, bias)
    for t in np.linspace(0, 2 * np.pi, 8, endpoint=False):
        assert Lq(length + 1e-3 * np.cos(t), bias + 1e-3 * np.sin(t)) > L0
    assert bias < 0 and length > 1 and refine_kgon(4) == (1.0, 0.0)


def test_the_positive_unused_bias_is_optimal_and_lowers_the_loss_by_one_over_4c2():
    """With W_u = 0, b_u > 0 enters L as (1/c)(1/3 - b_u + c b_u^2): stationary at 1/(2c), 1/(4c^2) below b_u < 0."""
    c = 6
    bu = positive_unused_bias(c)
    assert bu == 1 / 12
    p = refined_kgon(c, 5, 1)
    grad_b = jax.grad(lambda b: population_loss(p._replace(b=p.b.at[5].set(b))))(bu)
    assert abs(float(grad_b)) < 1e-14
    drop = float(population_loss(refined_kgon(c, 5, 0)) - population_loss(refined_kgon(c, 5, 1)))
    assert drop == pytest.approx(1 / (4 * c * c), rel=1e-12)


def test_table_losses_match_quadrature_and_the_hand_formula(table):
    """L of each row against the quadrature of its parameters (1e-12) and against
    (k L_k + (c - k)/3)/c - n_+/(4c^2) with L_k = 0 for k <= 4 (exact reconstruction) and L_k by quadrature."""
    for r in table:
        p = refined_kgon(r.c, r.k, r.n_positive)
        assert r.loss == pytest.approx(quadrature_loss(p.W, p.b), rel=1e-12, abs=1e-15)
        Lk = 0.0 if r.k <= 4 else quadrature_loss(*make_kgon(r.k, r.k, r.length, r.bias))
        want = (r.k * Lk + (r.c - r.k) / 3) / r.c - r.n_positive / (4 * r.c ** 2)
        assert r.loss == pytest.approx(want, rel=1e-12, abs=1e-15)
        assert kgon_loss_formula(r.c, r.k, r.n_positive) == pytest.approx(r.loss, rel=1e-12, abs=1e-15)


def test_c6_losses_to_four_digits(table):
    """The values this implementation computes (checked above by quadrature, and L by Monte Carlo in
    test_tms_model): the 6-gon is below the 5-gon in both variants."""
    rows = {(r.k, r.variant): r for r in table if r.c == 6}
    assert rows[6, ""].loss == pytest.approx(0.048192, abs=5e-7)
    assert rows[5, "-"].loss == pytest.approx(0.068744, abs=5e-7)
    assert rows[5, "+"].loss == pytest.approx(0.061799, abs=5e-7)
    assert rows[4, "--"].loss == pytest.approx(1 / 9, rel=1e-12)
    assert rows[6, ""].loss < rows[5, "+"].loss < rows[5, "-"].loss < rows[4, "--"].loss
    assert rows[5, "-"].length == pytest.approx(1.170460, abs=5e-7) and rows[5, "-"].bias == pytest.approx(-0.282297, abs=5e-7)
    assert rows[6, ""].length == pytest.approx(1.320526, abs=5e-7) and rows[6, ""].bias == pytest.approx(-0.618135, abs=5e-7)


def test_criticality_by_hand(table):
    """Every k-gon is critical (|grad L| < 1e-9 in the full space) except k = 1 with positive unused biases:
    there dL/dW_u = (b_u / c) W_1 for each positive u, so |grad L| = sqrt(n_+) / (2 c^2)."""
    for r in table:
        if r.k == 1 and r.n_positive:
            assert r.kind == "not critical"
            assert r.grad_norm == pytest.approx(np.sqrt(r.n_positive) / (2 * r.c ** 2), rel=1e-12)
        else:
            assert r.grad_norm < 1e-9 and r.kind != "not critical"


def test_hessian_and_fisher_counts_by_hand(table):
    """Smooth minima (k >= 5): the Hessian's null space is the rotation plus 3 coordinates (W_u, b_u) per negative
    unused feature, so rank 3k - 1 + 3 n_+; the Fisher rank is the same (J vanishes on those coordinates and
    along the rotation).  k <= 4 (b = 0): with 1(z > 0) only the diagonal outputs (2 directions per active
    feature: its length and bias) and the positive unused outputs (b_u and W_u along span{W_i}, of dimension 1
    for k <= 2 and 2 for k >= 3) are active: Fisher rank 2k + n_+ (1 + dim span{W_i})."""
    for r in table:
        D = 3 * r.c
        assert r.hessian_positive + r.hessian_zero + r.hessian_negative == D
        if r.k >= 5:
            assert r.smooth
            if r.kind == "minimum":
                assert r.hessian_zero == 1 + 3 * (r.c - r.k - r.n_positive)
                assert r.hessian_positive == 3 * r.k - 1 + 3 * r.n_positive == r.fisher_rank
        else:
            assert not r.smooth
            span = 1 if r.k <= 2 else 2
            assert r.fisher_rank == 2 * r.k + r.n_positive * (1 + span)


def test_kinds_and_first_principles_lambda(table):
    """lambda = rank(H)/2 at smooth minima (Morse-Bott), the sandwich values 1, (c + 2)/2, c, c + 3/2 for k = 1, 2, 3, 4 with
    negative unused biases, none at saddles; mixed-sign smooth k-gons are saddles (c = 8, k = 5, 6 below)."""
    for r in table:
        if r.kind == "minimum" and r.smooth:
            assert r.lambda_rule == "morse-bott" and r.lambda_ == r.hessian_positive / 2
        if r.k <= 4 and r.n_positive == 0:
            assert r.kind == "minimum" and r.lambda_rule == "sandwich"
            assert r.lambda_ == {1: 1.0, 2: (r.c + 2) / 2, 3: float(r.c), 4: r.c + 1.5}[r.k]
        if r.kind in ("saddle", "not critical", "numerical minimum"):
            assert r.lambda_ is None
    rows = {(r.c, r.k, r.variant): r for r in table}
    assert kgon_record(5, 5).lambda_ == 7.0 and rows[6, 5, "-"].lambda_ == 7.0
    assert rows[6, 5, "+"].lambda_ == 8.5 and rows[6, 6, ""].lambda_ == 8.5
    assert rows[4, 4, ""].lambda_ == 5.5 and rows[6, 4, "--"].lambda_ == 7.5
    # k = 2, 3 with a positive unused bias: a lower loss within distance 0.01 (the unused feature joins)
    assert rows[6, 3, "+--"].kind == "saddle" and rows[4, 2, "+-"].kind == "saddle"


def test_c8_kgons_and_mixed_variants():
    """c = 8: the 8-gon is a minimum but not the lowest k-gon (the 7-gon with a positive unused bias is lower);
    mixed unused signs at k = 5 are saddles (a bilinear term between a positive unused column and a flat
    negative one), all positive a minimum with lambda = (3c - 1)/2."""
    octagon, heptagon = kgon_record(8, 8), kgon_record(8, 7, 1)
    assert octagon.kind == heptagon.kind == "minimum" and octagon.lambda_ == heptagon.lambda_ == 11.5
    assert heptagon.loss < octagon.loss
    assert kgon_record(8, 5, 3).kind == "minimum" and kgon_record(8, 5, 0).lambda_ == 7.0
    mixed = kgon_record(8, 5, 1)
    assert mixed.kind == "saddle" and mixed.hessian_negative == 2 and mixed.lambda_ is None


def test_flat_directions_are_exactly_flat_and_in_the_hessian_null_space():
    """At the c = 6 5-gon with a negative unused bias, moves of (W_u, b_u) that keep every pre-activation they
    enter negative (|W_u| l < |b_u|, b_u < 0; the active b < 0) and rotations leave L unchanged to rounding
    (1e-15 relative), and the rotation tangent is a null vector of the Hessian."""
    p = refined_kgon(6, 5, 0)
    L0 = float(population_loss(p))
    q = p._replace(W=p.W.at[:, 5].set(jnp.array([0.03, -0.02])), b=p.b.at[5].set(-0.06))
    assert float(population_loss(q)) == pytest.approx(L0, rel=1e-15)
    assert float(population_loss(rotate(p, rotation(0.4)))) == pytest.approx(L0, rel=1e-14)
    H = loss_hessian(p)
    v = rotation_generator(p)
    assert float(jnp.linalg.norm(H @ v)) < 1e-12 * float(jnp.linalg.norm(H)) * float(jnp.linalg.norm(v))
    assert is_smooth(p) and not is_smooth(refined_kgon(6, 4))
    counts = hessian_counts(p)
    assert (counts.positive, counts.zero, counts.negative) == (14, 4, 0)
    assert fisher_rank(p) == 14
