"""Symmetry moves (slt_relu.moves): the orientation flip as an involution with the right acceptance, and SMC
and MCMC chains with the moves against exact answers: an exact symmetry is always accepted and splits the
modes evenly by count; an inexact one leaves the grid posterior's (the quadrature's) masses and log Z where
they were."""
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.posterior.evidence import logmeanexp
from slt_relu.moves import OrientationFlip
from slt_relu.sampling import involution_step
from slt_relu.posterior import draw_datasets, grid_posterior, tempered_target
from slt_relu.sampling.smc import SMCSettings, run_smc
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


@pytest.mark.parametrize("prior", [S.Prior(), S.Prior(w=("uniform", 2.0), b=("uniform", 2.0), q=("normal", 1.0),
                                                       c=("uniform", 3.0))])
def test_orientation_flip_on_unconstrained_coordinates(prior):
    """At DSLT4's PT2 truth (v = 1) the flip keeps f, so U(z') - U(z) is the prior's change alone: c moves from 0
    to sum q_i b_i = -0.9 (N(0, 1): 0.81 / 2 nats; U(-3, 3): 0 nats) plus the unconstrained Jacobian's, which
    the move's log |det| returns, so that pi(z') |det| / pi(z) = phi(w') / phi(w).  Twice is the identity."""
    ex = S.truths.get("dslt4_pt2", v=1.0)
    tg = tempered_target(ex.model, prior)
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(0), 1), ex.truth, ex.inputs, 2000, 1.0)
    U = tg((x[0], y[0]), jnp.asarray(300.0))
    move = OrientationFlip(tg)
    z = tg.unconstrain(S.to_flat(ex.truth))
    z1, log_det = move(jax.random.PRNGKey(1), z)
    z2, log_det_back = move(jax.random.PRNGKey(2), z1)
    np.testing.assert_allclose(z2, z, atol=1e-12)
    assert float(log_det + log_det_back) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(tg.constrain(z1)[-1], -0.9, rtol=1e-12)
    prior_change = 0.81 / 2 if prior.spec("c")[0] == "normal" else 0.0
    log_alpha = float(U(z) - U(z1) + log_det)
    assert log_alpha == pytest.approx(-prior_change, abs=1e-9)       # U ~ 600 nats: 1e-9 is rounding's margin


def test_a_flip_that_moves_a_fixed_coordinate_is_rejected():
    """PT2's network with only node 0's weights free: psi would move the fixed b = -0.3 (and the other
    nodes' w), so log |det| is -inf and SMC accepts no flip."""
    ex = S.truths.get("dslt4_pt2", v=1.0)
    model = S.Restriction.from_names(ex.truth, ["w[0,0]", "w[0,1]"])
    tg = tempered_target(model)
    z1, log_det = OrientationFlip(tg)(jax.random.PRNGKey(0), jnp.array([0.5, 0.5]))
    assert log_det == -jnp.inf
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(2), 2), ex.truth, ex.inputs, 200, ex.sigma)
    ps = S.sample_posterior(jax.random.split(jax.random.PRNGKey(3), 2), x, y, 50.0, model=model, sigma=ex.sigma,
                            settings=SMCSettings(num_particles=64, symmetry_moves=True))
    stages = ps.draws.info.num_stages
    assert stages.min() >= 1 and np.all(ps.draws.info.symmetry_accept == 0.0)


def test_a_flip_back_that_misses_z_is_rejected_in_float32():
    """A uniform prior's transform saturates near the support's edge: in float32, w -> z loses digits at
    z = 12, psi(psi(z)) != z there, and the move says -inf (rejected); away from the edge it does not."""
    ex = S.truths.get("dslt4_pt2", v=1.0)
    with jax.enable_x64(False):
        tg = tempered_target(ex.model, S.Prior(w=("uniform", 2.0), b=("uniform", 2.0)))
        move = OrientationFlip(tg)
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
    stages = out.info.num_stages
    for c in range(4):
        np.testing.assert_array_equal(out.info.symmetry_accept[c, :stages[c]], 1.0)
    np.testing.assert_array_equal((out.z[..., 0] > 0).sum(1), 256)
    plain = run_smc(keys, Even(), z0, (t_max,), s.replace(symmetry_moves=False))
    assert np.any((plain.z[..., 0] > 0).sum(1) != 256) and plain.info.symmetry_accept is None
    with pytest.raises(ValueError, match="moves: symmetry_moves needs"):
        run_smc(keys, Even(), z0, (t_max,), s)


@pytest.mark.parametrize("prior", [S.Prior(), S.Prior(w=("uniform", 4.0), b=("normal", 1.0), q=("uniform", 4.0),
                                                       c=("normal", 1.0))])
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
    stages = ps.draws.info.num_stages
    last = ps.draws.info.symmetry_accept[np.arange(RUNS), stages - 1]
    assert np.all((last > 0.2) & (last < 0.95)), last             # the flip is neither free nor impossible
    g = grid_posterior(x[0], y[0], nb, model=ex.model, prior=prior, sigma=ex.sigma,
                       ranges=[(-4.0, 4.0), (-4.0, 4.0)] if prior.spec("w")[0] == "uniform" else [(-6.0, 6.0)] * 2,
                       resolution=1200)
    if prior.spec("w")[0] == "normal":
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


def even_wells(t):
    """Even as a module-level potential_gen (numpyro's lockstep kernel wants a truthy callable)."""
    return Even()(t)


def mirrored_wells(t, a):
    """Wells at z_0 = 1 and z_0 = -sinh(1) (a quartic, t = 5: a 7-nat barrier), tilted by a z_0, times N(0, 1)
    in z_1: SinhMirror maps one well onto the other, stretched by cosh(1), so the flip is inexact and its
    Jacobian is not 1."""
    return lambda z: 0.5 * z[1] ** 2 + t * (z[0] - 1) ** 2 * (z[0] + math.sinh(1)) ** 2 + a * z[0]


class SinhMirror(NamedTuple):
    """z_0 -> -sinh(z_0) (z_0 > 0), asinh(-z_0) (z_0 <= 0): an involution of R with log |det| = log cosh z_0 and
    -log(1 + z_0^2) / 2 on the two sides; ``sign`` = -1 returns the wrong sign (the test's control)."""

    sign: float = 1.0

    def __call__(self, key, z):
        positive = z[0] > 0
        new = jnp.where(positive, -jnp.sinh(z[0]), jnp.arcsinh(-z[0]))
        log_det = jnp.where(positive, jnp.log(jnp.cosh(z[0])), -0.5 * jnp.log1p(z[0] ** 2))
        return z.at[0].set(new), self.sign * log_det


MCMC = [S.NUTSSettings(num_warmup=50, num_samples=100, symmetry_moves=True),
        S.NUTSSettings(num_warmup=50, num_samples=100, symmetry_moves=True, schedule="lockstep"),
        S.HMCSettings(num_warmup=50, num_samples=100, symmetry_moves=True)]


@pytest.mark.parametrize("s", MCMC, ids=["nuts-async", "nuts-lockstep", "hmc"])
def test_mcmc_chains_take_an_exact_symmetry_after_every_trajectory(s):
    """Even at t = 50 (a barrier of 200 nats between z_0 = +-2): chains started at z_0 = 2 never cross it
    alone (nor during warm-up, which has no flips), and with the flip after every kept trajectory (always
    accepted) the kept draws alternate between the wells, exactly half in each (a count); HMC's gradient
    count includes the flips'."""
    C = 4
    keys = jax.random.split(jax.random.PRNGKey(1), C)
    z0 = jnp.tile(jnp.array([2.0, 0.0]), (C, 1))
    t = (jnp.full(C, 50.0),)
    out = S.sample(keys, even_wells, z0, t, s, moves=Negate())
    np.testing.assert_array_equal(out.info.symmetry_accept, 1.0)
    np.testing.assert_array_equal((out.z[..., 0] > 0).sum(1), s.num_samples // 2)
    plain = S.sample(keys, even_wells, z0, t, s.replace(symmetry_moves=False))
    np.testing.assert_array_equal((plain.z[..., 0] > 0).sum(1), s.num_samples)
    assert type(out.info) is type(plain.info) is (S.HMCInfo if s.name == "hmc" else S.NUTSInfo)
    assert plain.info.symmetry_accept is None
    if s.name == "hmc":                               # a fixed 10 steps + the flip, per iteration
        np.testing.assert_array_equal(out.grad_evals, s.num_warmup * 10 + s.num_samples * 11)
        np.testing.assert_array_equal(out.info.num_steps, 10)
    with pytest.raises(ValueError, match="moves: symmetry_moves needs"):
        S.sample(keys, even_wells, z0, t, s)


@pytest.mark.parametrize("schedule", ["async", "lockstep"])
def test_inexact_flips_with_a_jacobian_leave_a_nuts_chains_target_unchanged(schedule):
    """mirrored_wells (t = 5, a = 0.5) with SinhMirror after every kept trajectory (accepted about half the
    time): the mass of z_0 > 0 matches its quadrature (0.2587) within 5 standard errors of the 8 chains'
    spread; with the Jacobian's sign wrong it comes out near 0.44 instead (0.185 away, against 5 se ~0.02 with
    1,000 draws per chain)."""
    t, a = 5.0, 0.5
    grid = np.linspace(-4, 4, 400_001)
    u = t * (grid - 1) ** 2 * (grid + math.sinh(1)) ** 2 + a * grid
    p = np.exp(-(u - u.min()))
    exact = p[grid > 0].sum() / p.sum()
    C = 8
    s = S.NUTSSettings(num_warmup=300, num_samples=1000, symmetry_moves=True, schedule=schedule)
    z0 = jnp.tile(jnp.array([1.0, 0.0]), (C, 1))
    args = (jnp.full(C, t), jnp.full(C, a))
    keys = jax.random.split(jax.random.PRNGKey(2), C)
    masses = {}
    for sign in (1.0, -1.0):
        out = S.sample(keys, mirrored_wells, z0, args, s, moves=SinhMirror(sign))
        masses[sign] = (out.z[..., 0] > 0).mean(1)
        if sign == 1.0:
            assert np.all((out.info.symmetry_accept > 0.3) & (out.info.symmetry_accept < 0.7))
    se = masses[1.0].std(ddof=1) / math.sqrt(C)
    assert abs(masses[1.0].mean() - exact) < 5 * se, (masses[1.0].mean(), exact, se)
    assert abs(masses[-1.0].mean() - exact) > 5 * se                 # the control: the check can fail


def test_nuts_flips_leave_the_posterior_of_example_3_2_unchanged():
    """NUTS chains on Example 3.2 (theta0 = 0.05, uniform priors on w and q) with the orientation flip after
    every kept trajectory, through ``sample_posterior``: accepted ~0.63 of the time, and the quadrant masses
    (0.12-0.46) match the grid within 5 standard errors of the 16 chains' spread (0.003-0.008; without the
    flips 3-4 times larger)."""
    ex = S.truths.get("dslt3_example_3_2", theta0=0.05)
    prior = S.Prior(w=("uniform", 4.0), b=("normal", 1.0), q=("uniform", 4.0), c=("normal", 1.0))
    n = 1000
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(2), 1), ex.truth, ex.inputs, n, ex.sigma)
    nb = n / math.log(n)
    s = S.NUTSSettings(num_warmup=300, num_samples=1000, symmetry_moves=True)
    ps = S.sample_posterior(jax.random.split(jax.random.PRNGKey(3), RUNS), x, y, nb, model=ex.model, prior=prior,
                            sigma=ex.sigma, settings=s, chains_per_dataset=RUNS)
    accept = ps.draws.info.symmetry_accept
    assert np.all((accept > 0.05) & (accept < 0.95)), accept       # the flip is neither free nor impossible
    g = grid_posterior(x[0], y[0], nb, model=ex.model, prior=prior, sigma=ex.sigma, ranges=[(-4.0, 4.0)] * 2,
                       resolution=1200)
    P = g.points()
    quadrant = lambda w, q: 2 * (w > 0) + (q > 0)
    exact = np.array([g.mass(quadrant(P[..., 0], P[..., 1]) == k) for k in range(4)])
    per_chain = np.stack([(quadrant(ps.params.w[..., 0, 0], ps.params.q[..., 0]) == k).mean(1) for k in range(4)], 1)
    mcse = per_chain.std(0, ddof=1) / math.sqrt(RUNS)
    assert np.all(np.abs(per_chain.mean(0) - exact) < 5 * mcse), (per_chain.mean(0), exact, mcse)


LAYER_WIDTHS = [(2, 3, 1, 2), (3, 2, 3), (2, 1, 2)]


@pytest.mark.parametrize("widths", LAYER_WIDTHS)
def test_layer_reparametrization_keeps_the_product_and_reports_its_jacobian(widths):
    """W_l -> G_l^(-1) W_l G_(l-1) leaves W_L ... W_1 unchanged (to float64 rounding of a few matrix products and two
    matrix exponentials: 1e-12 relative) and its log |det| is that of the map's Jacobian by automatic
    differentiation (the map is linear in w for a fixed key: the same to rounding)."""
    from slt_relu.known_lambda.losses import layer_product
    from slt_relu.moves import LayerReparametrization

    with jax.enable_x64(True):
        D = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
        w = jax.random.normal(jax.random.key(0), (D,))
        move = LayerReparametrization(widths, scale=0.7)
        for k in jax.random.split(jax.random.key(1), 3):
            w2, log_det = move(k, w)
            assert w2.shape == w.shape and not np.allclose(w2, w)
            np.testing.assert_allclose(layer_product(widths, w2), layer_product(widths, w), rtol=1e-12, atol=1e-12)
            sign, ref = jnp.linalg.slogdet(jax.jacfwd(lambda v: move(k, v)[0])(w))
            assert float(sign) != 0
            np.testing.assert_allclose(float(log_det), float(ref), rtol=0, atol=1e-10)


def test_layer_reparametrization_leaves_the_prior_invariant():
    """Metropolis-Hastings with the GL(1) move alone (``involution_step``) on N(0, I) over widths (3, 1, 2), from
    4,000 exact prior draws, 30 moves each: the layers' E |W_l|^2 stay at their prior values H_l H_(l-1) (3 and 2),
    within 4 Monte Carlo standard errors over the independent chains.  The move scales W_1 by 1 / g and W_2 by g
    (Jacobian g^(H_2 - H_0) = g^(-1)); with the sign of log |det| reversed the chains settle near 2 and 3 (measured
    with 20,000 chains of 50 moves), about 25 standard errors off here, so the check can fail."""
    from blackjax.mcmc import hmc

    from slt_relu.moves import LayerReparametrization

    move = LayerReparametrization((3, 1, 2), scale=0.5)
    log_pi = lambda w: -0.5 * jnp.sum(w ** 2)

    def chain(key):
        k0, k1 = jax.random.split(key)
        state = hmc.init(jax.random.normal(k0, (5,)), log_pi)
        state, accepted = jax.lax.scan(lambda s, k: involution_step(k, s, log_pi, move), state,
                                       jax.random.split(k1, 30))
        return state.position, jnp.mean(accepted)

    with jax.enable_x64(True):
        w, accepted = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(3), 4000))
    w = np.asarray(w)
    assert 0.3 < float(np.mean(accepted)) < 0.95                 # the moves are made, not all refused
    for block, expected in ((w[:, :3], 3.0), (w[:, 3:], 2.0)):
        sq = np.sum(block ** 2, axis=1)
        assert abs(sq.mean() - expected) < 4 * sq.std(ddof=1) / math.sqrt(len(sq)), (sq.mean(), expected)


@pytest.mark.parametrize("move, w, match", [
    (((2,), 0.5), np.zeros(2), "widths: expected the input, at least one hidden layer and the output"),
    (((2, 0, 2), 0.5), np.zeros(0), "widths: expected"),
    (((2, 1.5, 2), 0.5), np.zeros(4), "widths: expected"),
    (((2, 1, 2), 0.0), np.zeros(4), r"scale: expected a number in \(0, 10\)"),
    (((2, 1, 2), 0.5), np.zeros(5), r"w: expected the flat layers of widths \(2, 1, 2\), shape \(4,\)"),
])
def test_layer_reparametrization_refuses_bad_arguments(move, w, match):
    from slt_relu.moves import LayerReparametrization

    with pytest.raises(ValueError, match=match):
        LayerReparametrization(*move)(jax.random.key(0), jnp.asarray(w))
