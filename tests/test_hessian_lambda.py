"""The Hessian's rank r at a true parameter against the learning coefficient (docs/concepts/hessian_and_lambda.md,
benchmarks/hessian_rank_vs_lambda.py).

At a minimum w0 of K >= 0 the splitting lemma writes K = y_1^2 + ... + y_r^2 + g(y_(r+1), ..., y_d) with g of
order >= 3, so lambda = r / 2 + lambda(g) with 0 <= lambda(g) <= (d - r) / 2: r <= 2 lambda <= d, and for analytic
K (g >= 0 starts at order 4) 2 lambda <= (d + r) / 2.  Ranks and lambdas are exact (integers, fractions); the
floats are compared with tolerances stated beside them."""
import importlib.util
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu import fisher_rank, truths
from slt_relu.hessian import hessian, rank_of_symmetric
from slt_relu.inputs import expectation_rule
from slt_relu.known_lambda import losses, values
from slt_relu.mlp import flatten_mlp, init_mlp, mlp_forward, unflatten_mlp
from slt_relu.models import mlp as mlp_model
from slt_relu.network import forward, scaling_generators, to_flat

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "hessian_rank_vs_lambda.py"


def _script():
    spec = importlib.util.spec_from_file_location("hessian_rank_vs_lambda", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


B = _script()


def rank_at(loss, w0, data=None):
    """(d, r): the Hessian of loss at w0 in float64 and its rank by the module's rule (rtol = d eps)."""
    w0 = jnp.asarray(w0, jnp.float64)
    H = np.asarray(hessian(loss, w0, loss.rule(w0, data)))
    return H.shape[0], rank_of_symmetric(np.linalg.eigvalsh(H))


# ----------------------------------------------------------------------------------------------------------------
# r <= 2 lambda <= d on every known-lambda case of the script


CASES = B.crossing_cases() + B.linear_cases() + B.two_layer_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rank_at_most_two_lambda_at_most_d(case):
    d, r = rank_at(case.loss, case.w0, case.data)
    two = 2 * Fraction(case.lam)
    assert r <= two <= d                                       # exact: integers against a fraction
    if case.analytic:                                          # g >= 0 with no terms of order <= 3
        assert two <= Fraction(d + r, 2)


# ----------------------------------------------------------------------------------------------------------------
# hand counts


@pytest.mark.parametrize("k, kind", [((1, 1), "product"), ((1, 2), "product"), ((1, 0), "product"),
                                     ((2, 0), "product"), ((1, 0, 0), "product"), ((1, 2), "sum"),
                                     ((1, 1, 3), "sum"), ((2, 3), "sum")])
def test_normal_crossing_rank_is_the_count_of_quadratic_factors(k, kind):
    """A product prod w_i^(2 k_i) has a non-zero Hessian at 0 only when it is w_i^2 alone (one k_i = 1, the others
    0): every other product has order >= 3 at 0.  A sum's Hessian is diagonal with 2 where k_i = 1."""
    K = losses.PolynomialLoss("normal_crossing" if kind == "product" else "sum", k)
    d, r = rank_at(B.Known(K), K.true_point())
    nonzero = [ki for ki in k if ki]
    expected = int(nonzero == [1]) if kind == "product" else sum(ki == 1 for ki in k)
    assert (d, r) == (len(k), expected)
    lam, _ = values.normal_crossing(k, kind)
    assert r <= 2 * lam <= d


def test_regular_rank_is_d():
    K, _ = losses.family_loss("regular", jax.random.PRNGKey(3), 5)
    assert rank_at(B.Known(K), K.true_point()) == (5, 5)
    assert 2 * values.regular(5)[0] == 5


def _rrr_rank(i, h, o, a, b):
    """The rank of (dA, dB) -> B dA + dB A, A (h, i) of rank a, B (o, h) of rank b: matrices with columns in
    col(B) (b i of them) plus matrices with rows in row(A) (o a), less those with both (b a)."""
    return b * i + a * o - a * b


@pytest.mark.parametrize("i, h, o, a, b", [(3, 4, 3, 1, 2), (3, 4, 3, 2, 1), (3, 4, 3, 2, 2), (3, 4, 3, 0, 3),
                                           (2, 3, 4, 1, 1)])
def test_reduced_rank_hessian_rank_at_points_of_a_zero_truth(i, h, o, a, b):
    """At a point of W0 = {B A = C0} the Hessian of K = |B A - C0|^2 / 2 is J^T J, J the differential of (A, B) ->
    B A, whose rank is _rrr_rank (independent of C0).  Here C0 = 0: A of rank a, B of rank b with B A = 0 (B's
    rows orthogonal to col(A), so a + b <= h)."""
    rng = np.random.default_rng(a * 10 + b)
    U = np.linalg.qr(rng.standard_normal((h, h)))[0]
    A = U[:, :a] @ rng.standard_normal((a, i))
    Bm = rng.standard_normal((o, b)) @ U[:, a:a + b].T
    K = losses.ProductLoss((i, h, o), tuple(map(tuple, np.zeros((o, i)))))
    d, r = rank_at(B.Known(K), np.concatenate([A.ravel(), Bm.ravel()]))
    assert (d, r) == (h * (i + o), _rrr_rank(i, h, o, a, b))


@pytest.mark.parametrize("family, layers, r0", [("reduced_rank", (3, 2, 3), 1), ("reduced_rank", (2, 3, 2), 1),
                                                ("reduced_rank", (4, 2, 3), 2), ("reduced_rank", (3, 3, 3), 0),
                                                ("deep_linear", (2, 3, 3, 2), 1), ("deep_linear", (2, 2, 2, 2), 0),
                                                ("deep_linear", (3, 2, 2, 4), 2)])
def test_linear_networks_at_the_deepest_point(family, layers, r0):
    """At the balanced factorization of C0 (rank r0; every other entry 0) the differential of w -> W_L ... W_1 is
    sum_l (W_L..W_(l+1)) dW_l (W_(l-1)..W_1): with columns in col(C0) (the l = 1 term, r0 H_0), rows in row(C0)
    (l = L, H_L r0), both (r0^2; the middle terms add nothing new): r = r0 (H_0 + H_L - r0), twice the base term
    (r0 (H_0 + H_L) - r0^2) / 2 of Aoyagi's lambda; 2 lambda - r is the excess part's."""
    if family == "reduced_rank":
        lam, _, D, _ = losses.family_lambda(family, input_dim=layers[0], hidden=layers[1], output_dim=layers[2],
                                            true_rank=r0)
    else:
        lam, _, D, _ = losses.family_lambda(family, input_dim=layers[0], widths=layers[1:], true_rank=r0)
    K, _ = losses.family_loss(family, jax.random.PRNGKey(1), D, layers, true_rank=r0)
    d, r = rank_at(B.Known(K), K.true_point())
    assert (d, r) == (D, r0 * (layers[0] + layers[-1] - r0))
    assert r <= 2 * lam <= d and 2 * lam <= Fraction(d + r, 2)


@pytest.mark.parametrize("family, layers", [("reduced_rank", (2, 3, 2)), ("deep_linear", (2, 3, 3, 2)),
                                            ("deep_linear", (2, 4, 4, 3))])
def test_linear_networks_at_a_full_rank_point_of_the_true_set(family, layers):
    """Where every layer has full rank (H_(L-1) > H_0 and H_L <= r0 + H_(L-1) - H_0 allow it with a rank-r0 truth)
    the l = 1 term alone, (W_L..W_2) dW_1 with W_L..W_2 of rank H_L, reaches every matrix: r = H_0 H_L, the same
    near by (full rank is open), so W0 is a manifold of dimension d - r there, K is Morse-Bott and the local lambda
    is r / 2 (m = 1)."""
    D = sum(a * b for a, b in zip(layers[:-1], layers[1:]))
    K, _ = losses.family_loss(family, jax.random.PRNGKey(2), D, layers, true_rank=1)
    w0 = B.full_rank_point(layers, K.target, 5)
    assert float(K(jnp.asarray(w0), None)) < 1e-25                     # on W0: K = 0 to rounding
    assert rank_at(B.Known(K), w0) == (D, layers[0] * layers[-1])


@pytest.mark.parametrize("name, width_n_in", [("dslt3_example_3_3", (2, 1)), ("m_symmetric", (3, 2))])
def test_minimal_two_layer_relu_rank_is_two_lambda(name, width_n_in):
    """The minimal network's Hessian at the truth is the Fisher information (f = f0 there), of rank D - d: one null
    direction per node's scaling, and K Morse-Bott across the orbits, so r = 2 lambda = D - d."""
    example = truths.get(name)
    truth = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), example.truth)
    width, n_in = width_n_in
    inputs = example.inputs if name != "m_symmetric" else B.UniformBox(1.0, 2)
    loss = B.TwoLayerK(B.truth_tuple(truth), width, inputs, example.sigma)
    d, r = rank_at(loss, to_flat(truth))
    lam, _ = values.minimal_two_layer_relu(n_in, width)
    assert (d, r) == (width * (n_in + 2) + 1, d - width)
    assert r == 2 * lam == int(fisher_rank(truth, inputs, example.sigma))


def test_teacher_mlp_null_space_is_its_scaling_generators():
    """A ReLU MLP at its own teacher (K_n = 0 on the sample exactly): rank D - (hidden nodes), and the hidden nodes'
    6 independent scaling generators are null vectors of H (|H v| below 1e-12 |H| |v|: rounding of the float64
    Hessian), so they span its null space."""
    widths = (2, 3, 3, 1)
    x = B.UniformBox(1.0, 2).sample(jax.random.PRNGKey(1), 1024, jnp.float64)
    teacher = init_mlp(jax.random.PRNGKey(14), widths, bias_std=0.3, dtype=jnp.float64)
    data = (x, mlp_forward(teacher, x)[:, 0])
    w0 = flatten_mlp(teacher)
    H = np.asarray(hessian(B.SampleK(widths), w0, data))
    r = rank_of_symmetric(np.linalg.eigvalsh(H))
    assert (H.shape[0], r) == (25, 25 - 6)
    G = np.asarray(mlp_model(widths, jnp.float64).scaling_generators(unflatten_mlp(w0, widths)))
    assert np.linalg.matrix_rank(G) == 6
    assert np.linalg.norm(H @ G.T) <= 1e-12 * np.linalg.norm(H) * np.linalg.norm(G)


# ----------------------------------------------------------------------------------------------------------------
# along null directions: the order of K


def _ex33():
    ex = truths.get("dslt3_example_3_3")
    truth = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), ex.truth)
    return truth, B.TwoLayerK(B.truth_tuple(truth), 2, ex.inputs, ex.sigma), ex


def test_a_scaling_direction_is_flat_on_its_orbit_and_quartic_on_its_tangent_line():
    """Node i's scaling generator v_i = (w_i, b_i, -q_i): along the orbit (a w_i, a b_i, q_i / a) f is unchanged,
    K = 0; along the straight tangent line w0 + t v_i node i becomes (1 + t)(w_i, b_i), (1 - t) q_i, so
    f - f0 = -t^2 q_i relu(<w_i, x> + b_i) for |t| < 1 and

        K(w0 + t v_i) = t^4 E[q_i^2 relu(<w_i, x> + b_i)^2] / (2 sigma^2)

    exactly: order 4, not 2 (K is quadratic in f - f0, which is O(t^2)); H v_i = 0."""
    truth, loss, ex = _ex33()
    w0 = to_flat(truth)
    K = lambda w: float(loss(w, loss.rule(w, None)))
    H = np.asarray(hessian(loss, w0, loss.rule(w0, None)))
    rule = expectation_rule(ex.inputs, truth)
    for i, v in enumerate(np.asarray(scaling_generators(truth))):
        assert np.linalg.norm(H @ v) <= 1e-12 * np.linalg.norm(H) * np.linalg.norm(v)   # rounding of H (float64)
        node = truth._replace(q=truth.q * (jnp.arange(2) == i), c=jnp.zeros_like(truth.c))
        coef = float(jnp.sum(rule.weights * forward(node, rule.points) ** 2) / (2 * ex.sigma ** 2))
        ts = np.array([1e-3, 1e-2, 1e-1, 0.5])
        along_line = np.array([K(w0 + t * v) for t in ts])
        np.testing.assert_allclose(along_line / ts ** 4, coef, rtol=1e-9)   # exact quadrature: rounding only
        slope = np.polyfit(np.log(ts), np.log(along_line), 1)[0]
        assert abs(slope - 4) < 1e-6
        for a in (0.5, 1.5, 3.0):                                            # the orbit: K = 0 to rounding
            w = np.asarray(w0).copy()
            w[i] *= a                                                        # w (n_in = 1): slot i
            w[2 + i] *= a                                                    # b_i
            w[4 + i] /= a                                                    # q_i
            assert K(jnp.asarray(w)) < 1e-28 * coef


def test_the_tilt_of_two_nodes_on_one_boundary_is_a_cubic_null_direction():
    """Phase '++' of relu(x) (DSLT3 Example 3.4's truth, width 2: both nodes on the truth's kink at 0, q_1 w_1 +
    q_2 w_2 = 1): moving the two kinks apart, b_1 = s q_2, b_2 = -s q_1, keeps f - f0 = 0 to first order
    (df = (q_1 db_1 + q_2 db_2) 1(x > 0) = 0), so the direction is in the Hessian's null space; f - f0 is then two
    ramps on a strip of width ~ s and height ~ s, and K = c s^3 exactly (homogeneous in s) while the strip is inside
    the box: an odd order, which an analytic K >= 0 cannot have (K of a ReLU network is not analytic), and the
    phase's lambda adds n_in / 3 over the minimal network's."""
    case = [c for c in B.two_layer_cases() if "phase '++'" in c.name][0]
    w0 = jnp.asarray(case.w0)
    loss = case.loss
    q = np.asarray(w0)[4:6]
    v = np.zeros(7)
    v[2], v[3] = q[1], -q[0]                                     # b_1, b_2 (flat order: w, b, q, c)
    v /= np.linalg.norm(v)
    H = np.asarray(hessian(loss, w0, loss.rule(w0, None)))
    assert np.linalg.norm(H @ v) <= 1e-12 * np.linalg.norm(H)
    ss = np.array([1e-3, 1e-2, 1e-1])
    K = np.array([float(loss(w0 + s * v, loss.rule(w0 + s * v, None))) for s in ss])
    np.testing.assert_allclose(K / ss ** 3, K[0] / ss[0] ** 3, rtol=1e-7)   # exact quadrature; K ~ 1e-12 at s = 1e-3
    assert 2 * case.lam - rank_at(loss, w0)[1] == Fraction(2, 3)              # 2 (lambda - r / 2) = 2 n_in / 3


def test_the_script_separates_flat_from_higher_order_null_directions():
    """The script's reading of reduced-rank regression 3-2-3 at its deepest point (rank-1 truth): of the 7 null
    directions, 3 are the GL(2) orbit's tangents (A, B) -> (X A, -B X) at w0, along which the splitting lemma's
    remainder g does not change, and 4 carry g ~ t^4, whose lambda is 2 lambda - r = 7 - 5 = 2 = 4 x (1/2): each
    quartic direction adds 1/4 to lambda, as the analytic bound allows at most."""
    case = [c for c in B.linear_cases() if c.name == "reduced rank 3-2-3, rank 1, deepest point"][0]
    res = B.analyse(case)
    assert (res.d, res.r, len(res.flat), len(res.bent)) == (12, 5, 3, 4)
    assert all(x.curve_flat and not x.line_flat and abs(x.line_order - 4) < 0.05 for x in res.flat_dirs)
    assert all(not x.curve_flat and abs(x.curve_order - 4) < 0.05 for x in res.bent_dirs)
    A = np.asarray(case.w0[:6]).reshape(2, 3)
    Bm = np.asarray(case.w0[6:]).reshape(3, 2)
    orbit = np.array([np.concatenate([(X @ A).ravel(), (-Bm @ X).ravel()])
                      for X in np.random.default_rng(0).standard_normal((8, 2, 2))])
    # the orbit's tangents lie in the flat directions' span: their part outside it is rounding and the flat
    # directions' estimate (its leakage, ~1e-6 at the probes' t)
    outside = orbit - (orbit @ res.flat.T) @ res.flat
    assert np.linalg.norm(outside) <= 1e-4 * np.linalg.norm(orbit)
    assert np.linalg.matrix_rank(orbit, tol=1e-8 * np.linalg.norm(orbit)) == 3
