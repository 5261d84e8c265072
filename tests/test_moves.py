"""Symmetry moves (slt_relu.moves): the orientation flip as an involution with the right acceptance, and SMC
with the moves against exact answers: an exact symmetry is always accepted and splits the modes evenly by
count; an inexact one leaves the grid posterior's masses and log Z where they were."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.evidence import logmeanexp
from slt_relu.moves import OrientationFlip, involution_step
from slt_relu.posterior import _numpyro_pieces, draw_datasets, grid_posterior, target
from slt_relu.smc import SMCSettings, run_smc
from slt_relu.symmetry import flip_orientation

RUNS = 16                         # independent runs per sampler check (their spread is the Monte Carlo error)


def test_flip_orientation_is_the_checked_reversal_where_valid_and_changes_f_by_the_linear_term_elsewhere():
    x = jax.random.uniform(jax.random.PRNGKey(0), (500, 2), minval=-1, maxval=1)
    w0 = S.truths.dslt4_pt2(1.0)
    every = jnp.ones(3, bool)
    flipped = flip_orientation(w0, every)
    checked = S.reverse_orientation(w0, [0, 1, 2])
    for a, b in zip(flipped, checked):                 # the same arithmetic: equal to rounding
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(S.forward(flipped, x), S.forward(w0, x), atol=1e-12)
    for a, b in zip(flip_orientation(flipped, every), w0):        # an involution
        np.testing.assert_allclose(a, b, atol=1e-12)
    # v = 1.5: the nodes do not annihilate, f moves by -sum_J q_i <w_i, x> (relu(z) = relu(-z) + z)
    w = S.truths.dslt4_pt2(1.5)
    mask = jnp.array([True, False, True])
    linear = x @ (w.q[:, None] * w.w)[np.asarray(mask)].sum(0)
    np.testing.assert_allclose(S.forward(flip_orientation(w, mask), x), S.forward(w, x) - linear, atol=1e-12)
    batch = jax.tree.map(lambda a: jnp.stack([a, 2 * a]), w)          # leading batch axes broadcast
    np.testing.assert_allclose(flip_orientation(batch, mask).c[1], flip_orientation(jax.tree.map(lambda a: 2 * a, w),
                                                                                    mask).c, rtol=1e-12)


@pytest.mark.parametrize("prior", [S.Prior(), S.Prior(("uniform", 2.0), ("uniform", 2.0), ("normal", 1.0),
                                                       ("uniform", 3.0))])
def test_orientation_flip_on_unconstrained_coordinates(prior):
    """At DSLT4's PT2 truth (v = 1) the flip keeps f, so U(z') - U(z) is the prior's change alone: c moves from 0
    to sum q_i b_i = -0.9 (N(0, 1): 0.81 / 2 nats; U(-3, 3): 0 nats) plus the unconstrained Jacobian's, which
    the move's log |det| returns, so that pi(z') |det| / pi(z) = phi(w') / phi(w).  Twice is the identity."""
    ex = S.truths.get("dslt4_pt2", v=1.0)
    tg = target(ex.model, prior)
    pieces = _numpyro_pieces(tg.potential)
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(0), 1), ex.truth, ex.inputs, 2000, 1.0)
    U = tg.potential(x[0].T, y[0], jnp.asarray(300.0))
    move = OrientationFlip(tg.potential)
    z = pieces.unconstrain(S.to_flat(ex.truth))
    z1, log_det = move(jax.random.PRNGKey(1), z)
    z2, log_det_back = move(jax.random.PRNGKey(2), z1)
    np.testing.assert_allclose(z2, z, atol=1e-12)
    assert float(log_det + log_det_back) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(tg.constrain(z1)[-1], -0.9, rtol=1e-12)
    prior_change = 0.81 / 2 if prior.c[0] == "normal" else 0.0
    log_alpha = float(U(z) - U(z1) + log_det)
    assert log_alpha == pytest.approx(-prior_change, abs=1e-9)       # U ~ 600 nats: 1e-9 is rounding's margin


def test_a_flip_that_moves_a_fixed_coordinate_is_rejected():
    """PT2's network with only node 0's weights free: psi would move the fixed b = -0.3 (and the other
    nodes' w), so log |det| is -inf and SMC accepts no flip."""
    ex = S.truths.get("dslt4_pt2", v=1.0)
    model = S.Restriction.from_names(ex.truth, ["w[0,0]", "w[0,1]"])
    tg = target(model)
    z1, log_det = OrientationFlip(tg.potential)(jax.random.PRNGKey(0), jnp.array([0.5, 0.5]))
    assert log_det == -jnp.inf
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(2), 2), ex.truth, ex.inputs, 200, ex.sigma)
    ps = S.sample_posterior(jax.random.split(jax.random.PRNGKey(3), 2), x, y, 50.0, model=model, sigma=ex.sigma,
                            settings=SMCSettings(num_particles=64, symmetry_moves=True))
    stages = ps.draws.stats["num_stages"]
    assert stages.min() >= 1 and np.all(ps.draws.stats["symmetry_accept"] == 0.0)


def test_a_flip_back_that_misses_z_is_rejected_in_float32():
    """A uniform prior's transform saturates near the support's edge: in float32, w -> z loses digits at
    z = 12, psi(psi(z)) != z there, and the move says -inf (rejected); away from the edge it does not."""
    ex = S.truths.get("dslt4_pt2", v=1.0)
    with jax.enable_x64(False):
        tg = target(ex.model, S.Prior(("uniform", 2.0), ("uniform", 2.0), ("normal", 1.0), ("normal", 1.0)))
        move = OrientationFlip(tg.potential)
        z = jnp.zeros(tg.size, jnp.float32).at[0].set(0.5)
        assert np.isfinite(move(jax.random.PRNGKey(0), z)[1])
        assert move(jax.random.PRNGKey(0), z.at[0].set(12.0))[1] == -jnp.inf


def test_involution_step_accepts_no_proposal_with_an_undefined_density():
    """A proposal off the support (NaN z', NaN log pi) or with log |det| = -inf is never accepted; a proposal
    with pi(z') = pi(z) and |det| = 1 always is."""
    from blackjax.mcmc.hmc import init

    logdensity = lambda z: jnp.where(jnp.all(jnp.abs(z) < 1), -0.5 * jnp.sum(z**2), jnp.nan)
    state = init(jnp.array([0.5, -0.2]), logdensity)
    moves = {"nan": lambda k, z: (jnp.full_like(z, jnp.nan), jnp.zeros(())),
             "off the support": lambda k, z: (z + 2.0, jnp.zeros(())),
             "-inf det": lambda k, z: (-z, -jnp.inf * jnp.ones(())),
             "exact": lambda k, z: (-z, jnp.zeros(()))}
    for name, move in moves.items():
        got = [involution_step(k, state, logdensity, move) for k in jax.random.split(jax.random.PRNGKey(0), 20)]
        accepted = [bool(a) for _, a in got]
        assert accepted == [name == "exact"] * 20, name
        for new, a in got:
            np.testing.assert_array_equal(new.position, -state.position if a else state.position)


class Even(tuple):
    """U(z; t) = z^2 / 2 + t (z_0^2 - 4)^2 / 4: a prior N(0, 1) and two wells z_0 = +-2, even in z."""

    def __call__(self, t):
        return lambda z: 0.5 * jnp.sum(z**2) + t * (z[0] ** 2 - 4.0) ** 2 / 4


class Negate(tuple):
    """z -> -z: an involution with |det| = 1 and an exact symmetry of Even."""

    def __call__(self, key, z):
        return -z, jnp.zeros((), z.dtype)


def test_an_exact_symmetry_is_always_accepted_and_splits_the_modes_by_count():
    """On Even, every flip is accepted (U(-z) = U(z) exactly in floating point), so with waste-free SMC and
    an odd number of moves each kept lineage of 8 states alternates between the wells: exactly half the
    particles in each (a count, not an estimate).  Without the moves a run's split is whatever the
    tempering left, away from 1/2 by many particles."""
    z0 = jax.random.normal(jax.random.PRNGKey(0), (4, 512, 2))
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    t_max = jnp.full(4, 200.0)
    s = SMCSettings(num_particles=512, waste_free=True, num_mcmc_steps=7, symmetry_moves=True)
    out = run_smc(keys, Even(), z0, (t_max,), s, moves=Negate())
    stages = out.stats["num_stages"]
    for c in range(4):
        np.testing.assert_array_equal(out.stats["symmetry_accept"][c, :stages[c]], 1.0)
    np.testing.assert_array_equal((out.z[..., 0] > 0).sum(1), 256)
    plain = run_smc(keys, Even(), z0, (t_max,), s.model_copy(update={"symmetry_moves": False}))
    assert np.any((plain.z[..., 0] > 0).sum(1) != 256)
    with pytest.raises(ValueError, match="moves: symmetry_moves needs"):
        run_smc(keys, Even(), z0, (t_max,), s)


@pytest.mark.parametrize("prior", [S.Prior(), S.Prior(("uniform", 4.0), ("normal", 1.0), ("uniform", 4.0),
                                                       ("normal", 1.0))])
def test_inexact_flips_leave_the_posterior_of_example_3_2_unchanged(prior):
    """DSLT3 Example 3.2 with theta0 = 0.05 (f = q relu(w x), b = c = 0 held): psi maps (w, q) to (-w, q),
    which changes f by q w x, so the flips are accepted often (about 0.7 of them at the last stage) but not
    always, and they carry mass between the quadrants w > 0 and w < 0 (0.14-0.43 each); the quadrant masses
    and log Z still match the grid."""
    ex = S.truths.get("dslt3_example_3_2", theta0=0.05)
    n = 1000
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(2), 1), ex.truth, ex.inputs, n, ex.sigma)
    nb = n / math.log(n)
    s = SMCSettings(num_particles=1024, waste_free=True, num_mcmc_steps=7, symmetry_moves=True)
    ps = S.sample_posterior(jax.random.split(jax.random.PRNGKey(3), RUNS), jnp.repeat(x, RUNS, 0),
                            jnp.repeat(y, RUNS, 0), nb, model=ex.model, prior=prior, sigma=ex.sigma, settings=s)
    stages = ps.draws.stats["num_stages"]
    last = ps.draws.stats["symmetry_accept"][np.arange(RUNS), stages - 1]
    assert np.all((last > 0.2) & (last < 0.95)), last             # the flip is neither free nor impossible
    g = grid_posterior(x[0], y[0], nb, model=ex.model, prior=prior, sigma=ex.sigma,
                       ranges=[(-4.0, 4.0), (-4.0, 4.0)] if prior.w[0] == "uniform" else [(-6.0, 6.0)] * 2,
                       resolution=1200)
    if prior.w[0] == "normal":
        assert g.edge_mass < 1e-6
    P = g.points()
    quadrant = lambda w, q: 2 * (w > 0) + (q > 0)
    exact = np.array([g.mass(quadrant(P[..., 0], P[..., 1]) == k) for k in range(4)])
    per_run = np.stack([(quadrant(ps.params.w[..., 0, 0], ps.params.q[..., 0]) == k).mean(1) for k in range(4)], 1)
    mcse = per_run.std(0, ddof=1) / math.sqrt(RUNS)
    # k = 5 on 15 degrees of freedom; + 0.01 as in test_smc (a mass moves by whole particles)
    assert np.all(np.abs(per_run.mean(0) - exact) < 5 * mcse + 0.01), (per_run.mean(0), exact, mcse)
    lz = ps.draws.log_evidence
    grid_lz = float(logmeanexp(g.log_density.ravel()) + math.log(g.log_density.size * g.cell))
    assert abs(logmeanexp(lz) - grid_lz) < 5 * lz.std(ddof=1) / math.sqrt(RUNS) + 0.1, (lz, grid_lz)
