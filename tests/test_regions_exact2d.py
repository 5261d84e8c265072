"""Exact activation regions of deep ReLU MLPs on 2-D slices (``slt_relu.regions.exact_regions_2d``): polygon
subdivision checked against hand counts, the one-hidden-layer line arrangement (``count_regions_box_exact``), the
exact walk along segments (``regions_along_segment``), fine grids of activation patterns, and the network itself at
each region's centroid (pattern and affine map)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.mlp import Dense, activation_patterns, preactivations
from slt_relu.regions import Regions2D, count_regions_box_exact, count_regions_segment, distinct_patterns, \
    exact_regions_2d

E1, E2, ZERO = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.zeros(2)
_patterns = jax.jit(activation_patterns)
_forward = jax.jit(S.mlp_forward)


def _mlp(*layers):
    return S.MLP(tuple(Dense(jnp.asarray(w, jnp.float64), jnp.asarray(b, jnp.float64)) for w, b in layers))


def _area(P):
    """Signed (shoelace) area of a polygon (k, 2): positive when counter-clockwise."""
    s, t = P[:, 0], P[:, 1]
    return 0.5 * float(np.sum(s * np.roll(t, -1) - np.roll(s, -1) * t))


def _centroid(P):
    s, t = P[:, 0], P[:, 1]
    cross = s * np.roll(t, -1) - np.roll(s, -1) * t
    return np.array([np.sum((s + np.roll(s, -1)) * cross), np.sum((t + np.roll(t, -1)) * cross)]) / (3 * np.sum(cross))


def _inradius_at(P, q):
    """Distance from q to the nearest edge line of the convex polygon P (the largest disc about q inside P)."""
    e = np.roll(P, -1, 0) - P
    normal = np.stack([-e[:, 1], e[:, 0]], 1) / np.linalg.norm(e, axis=1, keepdims=True)   # inward for ccw
    return float(np.min(np.sum((q - P) * normal, 1)))


def _crossed(P, p0, p1):
    """Length (as a fraction of [p0, p1]) of the segment's part inside the convex ccw polygon P (Cyrus-Beck)."""
    e = np.roll(P, -1, 0) - P
    normal = np.stack([-e[:, 1], e[:, 0]], 1)
    num, den = np.sum((p0 - P) * normal, 1), normal @ (p1 - p0)          # inside: num + t den >= 0
    lo = max([0.0] + [-n / d for n, d in zip(num, den) if d > 0])
    hi = min([1.0] + [-n / d for n, d in zip(num, den) if d < 0])
    return hi - lo if np.all(num[den == 0] >= 0) else 0.0


def test_hand_counts():
    """Two neurons on the axes: the 4 quadrants.  XOR's two parallel lines: 3.  A depth-2 net by hand: 12.  Three
    concurrent lines and a fourth: 10 (as the line arrangement).  No hidden layer: 1 region, the affine map itself."""
    quadrants = _mlp((np.eye(2), np.zeros(2)), (np.ones((1, 2)), np.zeros(1)))
    r = exact_regions_2d(quadrants, ZERO, E1, E2, 1.0)
    assert isinstance(r, Regions2D) and r.count == 4
    assert sorted(map(tuple, r.patterns.tolist())) == [(False, False), (False, True), (True, False), (True, True)]
    assert sorted(_area(P) for P in r.polygons) == [1.0] * 4                     # quarters of the 2 x 2 square
    # degenerate neurons draw no new line: a duplicate of relu(x), a dead one (w = 0, b = 0: z = 0, off), and in
    # layer 2 relu(h_1) (= h_1: zero exactly where h_1 is) and relu(h_1 + h_2 + 1) (on everywhere)
    degenerate = _mlp(([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]], np.zeros(4)),
                      ([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]], [0.0, 1.0]), (np.ones((1, 2)), np.zeros(1)))
    r = exact_regions_2d(degenerate, ZERO, E1, E2, 1.0)
    assert r.count == 4 and distinct_patterns(r.patterns)[0] == 4
    assert not r.patterns[:, 3].any() and r.patterns[:, 5].all()
    np.testing.assert_array_equal(r.patterns[:, 0], r.patterns[:, 2])
    np.testing.assert_array_equal(r.patterns[:, 0], r.patterns[:, 4])
    xor = _mlp(([[1.0, 1.0], [1.0, 1.0]], [1.0, 0.0]), ([[1.0, -2.0]], [-1.0]))
    assert exact_regions_2d(xor, ZERO, E1, E2, 2.0).count == 3
    # layer 1: relu(x), relu(-x), relu(y), relu(-y) (x = h1 - h2, |x| = h1 + h2, y = h3 - h4): the quadrants;
    # layer 2: g1 = relu(|x| - 1) cuts each quadrant at x = -1 or 1 (8 pieces), g2 = relu(y - |x|) halves the four
    # pieces with y > 0 along the V y = |x|: 12 regions
    deep = _mlp(([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], [0.0] * 4),
                ([[1.0, 1.0, 0.0, 0.0], [-1.0, -1.0, 1.0, -1.0]], [-1.0, 0.0]), ([[1.0, 1.0]], [0.0]))
    r = exact_regions_2d(deep, ZERO, E1, E2, 2.0)
    assert r.count == 12 and distinct_patterns(r.patterns)[0] == 12
    lengths = [float(np.linalg.norm(z[:, 1] - z[:, 0], axis=1).sum()) for z in r.zero_sets]
    np.testing.assert_allclose(lengths, [4 + 4, 4 + 4 + 4 * np.sqrt(2)], rtol=1e-12)   # x, y = 0; x = +-1 and the V
    concurrent = _mlp(([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0]], [0.0, 0.0, 0.0, -0.5]),
                      (np.ones((1, 4)), np.zeros(1)))          # tests/test_regions.py: three lines through 0 and one more
    assert exact_regions_2d(concurrent, ZERO, E1, E2, 1.0).count == count_regions_box_exact(concurrent, 1.0) == 10
    affine = _mlp(([[2.0, -1.0, 0.5]], [0.25]))                # no hidden layer: one region, f affine
    r = exact_regions_2d(affine, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], 3.0)
    assert r.count == 1 and r.patterns.shape == (1, 0)
    np.testing.assert_array_equal(r.maps[0], [[[-1.0, 0.5]]])
    np.testing.assert_array_equal(r.maps[1], [[2.25]])


def test_one_hidden_layer_equals_the_line_arrangement():
    """count_regions_box_exact counts the cells of the neurons' lines in (-a, a)^2; the slice with origin 0 and the
    coordinate axes is that box: integer equality."""
    rng = np.random.default_rng(0)
    for d in (1, 2, 3, 5, 7, 12, 20, 30, 40):
        for a in (0.5, 1.0, 2.0):
            p = _mlp((rng.normal(size=(d, 2)), 0.6 * rng.normal(size=d)), (rng.normal(size=(1, d)), np.zeros(1)))
            assert exact_regions_2d(p, ZERO, E1, E2, a).count == count_regions_box_exact(p, a), (d, a)


CASES = [((2, 8, 8, 8, 1), 0, False), ((2, 16, 16, 16, 16, 1), 1, False), ((2, 10, 10, 10, 10, 10, 1), 2, False),
         ((5, 16, 16, 16, 2), 3, True), ((2, 64, 64, 64, 1), 4, False)]


@pytest.mark.parametrize("widths, seed, random_slice", CASES)
def test_deep_nets_against_grids_segments_and_the_network(widths, seed, random_slice):
    """Depth 3-5, Gaussian weights.  Exact: the polygons tile the square (areas sum to (2a)^2; rel 1e-9, float64
    rounding of ~1e3 shoelace sums), each is convex and ccw, the patterns are pairwise distinct; at each centroid the
    network's pattern is the region's and f equals A (s, t) + c (rel 1e-9: float64 rounding through <= 6 layers).
    Against a 400 x 400 grid: every grid pattern is a region's (the count is an upper bound of the grid's) and every
    region containing a disc of radius h / sqrt(2) (h the spacing: such a disc holds a grid point) is seen.
    Along random segments in the slice the regions crossed are the exact walk's count."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    p = S.init_mlp(keys[0], widths, bias_std=0.5)
    n, a = widths[0], 1.0
    if random_slice:
        o, u, v = (np.array(jax.random.normal(k, (n,))) for k in jax.random.split(keys[1], 3))
        o *= 0.3
    else:
        o, u, v = ZERO, E1, E2
    r = exact_regions_2d(p, o, u, v, a)
    A, c = r.maps
    assert len(r.polygons) == len(r.patterns) == len(A) == len(c) == r.count > 50
    assert r.patterns.shape == (r.count, p.num_hidden) and A.shape == (r.count, widths[-1], 2)
    assert distinct_patterns(r.patterns)[0] == r.count
    areas = np.array([_area(P) for P in r.polygons])
    assert np.all(areas > 0)
    np.testing.assert_allclose(areas.sum(), (2 * a) ** 2, rtol=1e-9)
    for P in r.polygons:
        e = np.roll(P, -1, 0) - P
        turn = e[:, 0] * np.roll(e[:, 1], -1) - e[:, 1] * np.roll(e[:, 0], -1)
        assert np.all(turn >= -1e-9 * np.abs(e).max() ** 2)          # convex, ccw (straight angles allowed)
        assert np.all(np.abs(P) <= a * (1 + 1e-12))

    # the network at the centroids
    cs = np.array([_centroid(P) for P in r.polygons])
    x = o + cs[:, :1] * u + cs[:, 1:] * v
    np.testing.assert_array_equal(np.asarray(_patterns(p, x)), r.patterns)
    f = np.asarray(_forward(p, x))
    np.testing.assert_allclose(np.einsum("rij,rj->ri", A, cs) + c, f, rtol=1e-9, atol=1e-9 * np.abs(f).max())

    # a 400 x 400 grid of the slice
    g = np.linspace(-a, a, 400)
    st = np.stack(np.meshgrid(g, g, indexing="xy"), -1).reshape(-1, 2)
    grid = np.asarray(_patterns(p, o + st[:, :1] * u + st[:, 1:] * v))
    n_grid = distinct_patterns(grid)[0]
    exact = {row.tobytes() for row in np.packbits(r.patterns, axis=1)}
    seen = {row.tobytes() for row in np.packbits(grid, axis=1)}
    assert seen <= exact and n_grid <= r.count
    h = g[1] - g[0]
    big = [i for i, P in enumerate(r.polygons) if _inradius_at(P, cs[i]) > h / np.sqrt(2)]
    assert len(big) >= min(100, r.count // 2)                        # the check has teeth
    assert all(np.packbits(r.patterns[i]).tobytes() in seen for i in big)
    print(f"\n{widths}: {r.count} regions exactly, {n_grid} on the 400 x 400 grid, {len(big)} with a disc of radius "
          f"h/sqrt2")

    # along segments: the polygons a segment passes through are the regions the exact walk meets
    ends = np.asarray(jax.random.uniform(keys[2], (3, 2, 2), minval=-a, maxval=a))
    for s0, s1 in ends:
        crossed = sum(_crossed(P, s0, s1) > 1e-9 for P in r.polygons)
        assert crossed == count_regions_segment(p, o + s0[0] * u + s0[1] * v, o + s1[0] * u + s1[1] * v)

    # the zero sets: segments inside the square, on which a neuron of their layer vanishes
    zs = preactivations(p, jnp.zeros((1, n)))
    for layer, segs in enumerate(r.zero_sets):
        assert segs.ndim == 3 and segs.shape[1:] == (2, 2) and len(segs) > 0
        mid = segs.mean(1)
        z = np.asarray(preactivations(p, o + mid[:, :1] * u + mid[:, 1:] * v)[layer])
        scale = np.abs(z).max()
        assert np.all(np.abs(z).min(1) <= 1e-9 * scale), (layer, np.abs(z).min(1).max() / scale)
    assert len(r.zero_sets) == len(zs)


def test_changing_the_slice_coordinates():
    """The same square in input space, drawn with u, v doubled and half the half width: the same regions, the
    polygons halved; a permutation of a hidden layer's neurons (and the next layer's columns) keeps the count."""
    p = S.init_mlp(jax.random.PRNGKey(7), (3, 12, 12, 12, 1), bias_std=0.5)
    o, u, v = np.array([0.1, -0.2, 0.3]), np.array([1.0, 0.5, 0.0]), np.array([0.0, 1.0, -1.0])
    r, half = exact_regions_2d(p, o, u, v, 1.0), exact_regions_2d(p, o, 2 * u, 2 * v, 0.5)
    assert r.count == half.count
    assert sorted(round(_area(P), 9) for P in r.polygons) == sorted(round(4 * _area(P), 9) for P in half.polygons)
    perm = np.asarray(jax.random.permutation(jax.random.PRNGKey(1), 12))
    layers = list(p.layers)
    layers[1] = Dense(layers[1].w[perm], layers[1].b[perm])
    layers[2] = Dense(layers[2].w[:, perm], layers[2].b)
    assert exact_regions_2d(S.MLP(tuple(layers)), o, u, v, 1.0).count == r.count


def test_bad_input_names_the_argument():
    p = S.init_mlp(jax.random.PRNGKey(0), (2, 6, 6, 1), bias_std=0.5)
    cases = [((p, [0.0], E1, E2, 1.0), "origin"), ((p, ZERO, [1.0, 0.0, 0.0], E2, 1.0), "u"),
             ((p, ZERO, E1, [np.nan, 1.0], 1.0), "v"), ((p, [np.inf, 0.0], E1, E2, 1.0), "origin"),
             ((p, ZERO, E1, -3 * E1, 1.0), "u, v"), ((p, ZERO, E1, [1.0, 1e-14], 1.0), "u, v"),
             ((p, ZERO, ZERO, E2, 1.0), "u, v"), ((p, ZERO, E1, E2, 0.0), "half_width"),
             ((p, ZERO, E1, E2, -1.0), "half_width"), ((p, ZERO, E1, E2, float("nan")), "half_width")]
    for args, name in cases:
        with pytest.raises(ValueError, match=rf"^{name}: "):
            exact_regions_2d(*args)
    nan = p._replace(layers=(Dense(p.layers[0].w.at[0, 0].set(jnp.nan), p.layers[0].b),) + p.layers[1:])
    with pytest.raises(ValueError, match=r"^params\.layers\[0\]\.w: "):
        exact_regions_2d(nan, ZERO, E1, E2, 1.0)
    with pytest.raises(TypeError, match=r"^params: "):
        exact_regions_2d(S.truths.m_symmetric(3), ZERO, E1, E2, 1.0)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match=r"^max_regions: "):
            exact_regions_2d(p, ZERO, E1, E2, 1.0, max_regions=bad)
    count = exact_regions_2d(p, ZERO, E1, E2, 1.0).count
    assert exact_regions_2d(p, ZERO, E1, E2, 1.0, max_regions=count).count == count
    with pytest.raises(ValueError, match=rf"^max_regions: more than {count - 1} regions"):
        exact_regions_2d(p, ZERO, E1, E2, 1.0, max_regions=count - 1)
