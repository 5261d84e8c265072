"""The true set W0, its phases (DSLT3 Appendix 2), and DSLT4's radius and sector rules."""
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.classify import NOT_IN_W0
from slt_relu.phases import radius_rule, sector_phase, sector_rule, true_set_representatives
from slt_relu.network import make_params
from slt_relu.truths import m_symmetric

BOX = S.UniformBox(1.0, 2)


def count_phases(truth, width):
    reps = true_set_representatives(truth, width)
    return len(reps), sum(1 for r in reps if not r.label.hidden)


def test_number_of_phases_for_the_3_symmetric_truth_by_hand():
    """3-symmetric truth: w0_j unit vectors 120 degrees apart, q0_j = 1.  With r_j the total
    output of the reversed nodes on boundary j, annihilation sum_j r_j w0_j = 0 holds iff
    r_1 = r_2 = r_3.  A boundary with only same-side nodes has r_j = 0, with only reversed
    nodes r_j = 1, with both a value that avoids 0 (if one reversed node) and 1 (if one
    same-side node).

    d = 3: one node per boundary, r in {0, 1}^3 all equal: all '+' or all '-'.          2
    d = 4: one degenerate node and the two of d = 3:                                     2
           one boundary j carries two nodes: '++' with the rest '+', '--' with the rest
           '-' ('+-' needs r_j not in {0, 1} but r_j = r_k in {0, 1}): 2 per j:          6  -> 8
    d = 5: two degenerate:                                                               2
           one degenerate and one shared boundary (as d = 4):                            6
           one boundary with three nodes: '+++' (rest '+'), '---' (rest '-'), '++-'
           (the two '+' cancel, r_j = 1, rest '-'), '+--' (the two '-' cancel, r_j = 0,
           rest '+'): 4 per j:                                                          12
           two boundaries with two nodes each: both '++' (third '+') or both '--':
           3 pairs x 2:                                                                  6  -> 26 (DSLT3's list)
           hidden: a cancelling pair (2,0) on a new boundary, truth all '+' or all '-':   2
           a linear pair (1,1) carrying -sum_{j reversed} w0_j with the reversed set
           E not in {none, all}: 6 choices of E:                                         6  -> 34
    """
    truth = m_symmetric(3)
    assert count_phases(truth, 3) == (2, 2)
    assert count_phases(truth, 4) == (8, 8)
    assert count_phases(truth, 5) == (34, 26)


def test_number_of_phases_for_dslt3_example_3_3_by_hand():
    """relu(x - 1) + relu(-x - 1) + 2: w0 = (1, -1), q0 = (1, 1); annihilation r_1 - r_2 = 0.
    d = 2: '+ +' and '- -' (DSLT3's Example 3.3 pair).                                    2
    d = 3: one degenerate (2) or one boundary with '++' (other '+') or '--' (other '-'),
    2 per boundary (4): 6."""
    truth = S.truths.get("dslt3_example_3_3").truth
    assert count_phases(truth, 2) == (2, 2)
    assert count_phases(truth, 3) == (6, 6)
    labels = {str(r.label) for r in true_set_representatives(truth, 2)}
    assert labels == {"+ +", "- -"}


@pytest.mark.parametrize("width", [3, 4, 5])
def test_representatives_are_true_parameters_and_classify_to_their_label(width):
    truth = m_symmetric(3)
    reps = true_set_representatives(truth, width)
    assert len({r.label for r in reps}) == len(reps)
    for k, rep in enumerate(reps):
        assert rep.params.width == width
        assert float(S.population_loss(rep.params, truth, BOX)) < 1e-26
        got = S.classify_phase(rep.params, truth, tol=1e-6)
        assert got.label == rep.label and got.distance < 1e-12
        # after a permutation and a rescaling (and the same with the batch interface)
        key = jax.random.PRNGKey(k)
        lam = jnp.exp(jax.random.uniform(key, (width,), minval=-1.0, maxval=1.0))
        moved = S.permute(S.rescale(rep.params, lam), np.asarray(jax.random.permutation(key, width)))
        again = S.classify_phase(moved, truth, tol=1e-6)
        assert again.label == rep.label and again.distance < 1e-12
        # points within tol: a perturbation of size 1e-4 with tol 1e-2
        noise = 1e-4 * jax.random.normal(jax.random.fold_in(key, 1), (S.num_params(width, 2),))
        near = S.from_flat(S.to_flat(moved) + noise, width, 2)
        close = S.classify_phase(near, truth, tol=1e-2)
        assert close.label == rep.label and 0 < close.distance < 1e-2


def test_classify_phase_batches_and_groups():
    truth = m_symmetric(3)
    reps = true_set_representatives(truth, 4)
    batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[r.params for r in reps])
    got = S.classify_phase(batch, truth, tol=1e-6)
    assert got.label.tolist() == [r.label for r in reps]
    assert got.distance.shape == (len(reps),) and got.group.shape == (len(reps), 4)
    for rep, group, orient in zip(reps, got.group, got.orientation):
        counts = Counter((int(g), int(o)) for g, o in zip(group, orient))
        for j, (same, rev) in enumerate(rep.label.truth):
            assert counts[(j, 1)] == same and counts[(j, -1)] == rev
        assert counts[(-1, 0)] == rep.label.degenerate


def test_distance_off_the_true_set_closed_form():
    """q scaled by 1 + s: every node has e_i = (1 + s) |(w0, b0)| against the kink |(w0, b0)|, no
    perpendicular part; projecting the kinks (and c, untouched) gives distance
    sqrt(3) s |(w0, b0)| = sqrt(3) s sqrt(1 + 0.09)."""
    truth = m_symmetric(3)
    s = 0.05
    got = S.classify_phase(truth._replace(q=truth.q * (1 + s)), truth, tol=0.1)
    assert str(got.label) == "+ + +"
    np.testing.assert_allclose(got.distance, np.sqrt(3) * s * np.sqrt(1.09), rtol=1e-10)
    # a boundary left without a node: the label cannot occur in W0
    far = truth._replace(w=truth.w.at[0].set(jnp.array([0.0, 3.0])))
    off = S.classify_phase(far, truth, tol=0.1)
    assert off.label == NOT_IN_W0 and off.structure.truth[0] == (0, 0) and off.distance == np.inf


def test_true_set_representatives_checks_the_truth():
    with pytest.raises(ValueError, match="minimal truth"):
        true_set_representatives(m_symmetric(3)._replace(q=jnp.array([1.0, 0.0, 1.0])), 3)
    shared = make_params([[1.0, 0.0], [-2.0, 0.0]], [-0.5, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="activation-distinguished"):
        true_set_representatives(shared, 2)
    with pytest.raises(ValueError, match="width: expected an integer >= m = 3"):
        true_set_representatives(m_symmetric(3), 2)


def dslt4_pt1_truth(t):
    return make_params([[np.cos(t), np.sin(t)], [-np.cos(t), np.sin(t)]], -0.3, 1.0, 0.0)


def test_radius_rule_by_hand():
    truth = dslt4_pt1_truth(1.2)
    degenerate = make_params([[0.0, 2.0], [0.1, 0.0]], -0.3, [1.0, 0.5], 0.0)   # r = (2, 0.05)
    other = make_params([[0.0, 1.5], [0.1, 0.0]], -0.3, [1.0, 1.0], 0.0)       # r = (1.5, 0.1)
    rescaled = S.rescale(truth, jnp.array([3.0, 0.25]))                        # r = (1, 1) still
    batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), truth, degenerate, other, rescaled)
    codes = radius_rule(batch, eps=0.3)
    assert [S.phases.RADIUS_PHASES[c] for c in codes] == ["non_degenerate", "degenerate", "other", "non_degenerate"]


def test_sector_rule_for_the_3_symmetric_truth():
    """Sectors are 60 degrees wide, centred on the truth directions (0..2) and their negations (3..5)."""
    truth = m_symmetric(3)
    flipped = S.reverse_orientation(truth, [0, 1, 2])
    np.testing.assert_array_equal(sector_rule(truth, truth), [0, 1, 2])
    np.testing.assert_array_equal(sector_rule(flipped, truth), [3, 4, 5])
    # rotate node 0's effective weight by 29 and by 31 degrees: it stays / leaves its sector
    w0 = np.asarray(truth.w[0])
    for deg, want in ((29, 0), (31, 5)):
        a = np.radians(-deg)
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]) @ w0
        p = truth._replace(w=truth.w.at[0].set(jnp.asarray(rot)))
        assert sector_rule(p, truth)[0] == want
    mixed = flipped._replace(w=flipped.w.at[2].set(truth.w[2]))
    batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), truth, flipped, mixed)
    assert [S.phases.SECTOR_PHASES[c] for c in sector_phase(batch, truth)] == ["true_orientation", "reversed",
                                                                                  "other"]


def test_number_of_phases_for_relu_x_width_4_by_hand():
    """Truth relu(x) (m = 1, n_in = 1), width 4; annihilation r w0 + sum_g B_g w_g = 0 with r the
    reversed output on the truth boundary and B_g the linear part of a hidden group.
    3 degenerate: '+'.                                                                       1
    2 degenerate: '++' ('+-' needs r not in {0, 1} but r = 0; '--' has r = 1).               1
    1 degenerate: '+++', '+--' (the two '-' cancel); '+' with a cancelling pair (2,0);
      '-' (r = 1) balanced by a linear pair (1,1).                                            4
    0 degenerate: '++++', '++--', '+---'; '++' + (2,0), '+-' + (1,1) (B = -r != 0),
      '--' + (1,1); '+' + (3,0), '-' + (2,1).                                                 8  -> 14
    """
    truth = make_params([[1.0]], 0.0, 1.0)
    reps = true_set_representatives(truth, 4)
    assert len(reps) == 14
    for rep in reps:
        assert S.are_equivalent(rep.params, truth)
        got = S.classify_phase(rep.params, truth)                     # default tol 0.1
        assert got.label == rep.label and got.distance < 1e-9


def test_truths_with_nodes_of_different_sizes():
    """The smallest truth node sets the scale: its phases exist and classify at the default tol."""
    truth = make_params([[1.0, 0.0], [0.0, 1.0]], [-0.3, 0.2], [1.0, 0.04])
    assert [str(r.label) for r in true_set_representatives(truth, 2)] == ["+ +"]
    assert len(true_set_representatives(make_params([[50.0]], -1.0, 0.02), 1)) == 1
    for rep in true_set_representatives(truth, 3):
        assert S.classify_phase(rep.params, truth).label == rep.label


def test_rule_labels_names_the_codes_of_either_rule():
    """rule_labels: the radius rule's and the sector rule's codes with the names they index (as radius_rule and
    sector_phase give them), None for "none"; a bad rule or a sector rule without its truth refused in one line."""
    from slt_relu.phases import RADIUS_PHASES, SECTOR_PHASES, radius_rule, rule_labels, sector_phase

    truth = S.truths.m_symmetric(3)
    batch = jax.tree.map(lambda a: jnp.stack([a, 2 * a]), truth)
    codes, names = rule_labels("radius", batch, eps=0.5)
    assert names == RADIUS_PHASES and np.array_equal(codes, radius_rule(batch, 0.5))
    codes, names = rule_labels("sector", batch, truth)
    assert names == SECTOR_PHASES and np.array_equal(codes, sector_phase(batch, truth))
    assert rule_labels("none", batch) is None
    for call, match in ((lambda: rule_labels("angle", batch), "rule: expected one of"),
                        (lambda: rule_labels("sector", batch), "truth: expected the truth network")):
        with pytest.raises(ValueError, match=f"^{match}") as err:
            call()
        assert "\n" not in str(err.value)
