"""Adaptive tempered sequential Monte Carlo: weighted particles that cross between modes, and the evidence.

MCMC chains that never leave the basin they start in measure where they started, not the
posterior's mass (DSLT4's sweeps; ``slt_relu.posterior.masses``).  Tempered SMC moves N particles from
the prior to the posterior through the bridge

    pi_lambda(z)  proportional to  exp(-U(z; lambda t_max)),   0 = lambda_0 < lambda_1 < ... < lambda_K = 1,

where U(z; t) = U_0(z) + t S(z) is the chain's potential with its last argument (the inverse
temperature t = n beta) scaled: for the tempered posterior U_0 = -log phi (prior, with the
Jacobian of the unconstrained coordinates) and S = L_n.  Each stage (Del Moral, Doucet &
Jasra 2006; the adaptive schedule of Jasra et al. 2011):

1. the next lambda solves ESS(w) = target_ess * N for the incremental weights
   w_i = exp(-(lambda' - lambda) t_max S(z_i)) (bisection, BlackJAX's ``solver.dichotomy``);
2. log Z accumulates log mean_i w_i, so that after the last stage
   log Z = log int exp(-U(z; t_max)) dz - log int exp(-U(z; 0)) dz, which for a normalised
   prior is log int phi(w) exp(-n beta L_n(w)) dw (docs/design.md's evidence; Z is estimated without
   bias, log Z with a downward bias of about half its variance);
3. the particles are resampled (BlackJAX's systematic resampling) and moved by
   ``num_mcmc_steps`` HMC steps (BlackJAX's kernel, ``num_leapfrog`` leapfrog steps) that leave
   pi_lambda' invariant; the diagonal inverse mass matrix is the particles' weighted variance and
   the step size is tuned after every move towards ``target_accept_prob`` (the particles' mean
   acceptance; each particle's step jittered by +-20%) and carried to the next stage.  With ``waste_free`` (Dau & Chopin 2022) only N / (num_mcmc_steps + 1)
   particles are resampled and every state of their moves is kept: the same number of particles
   for num_mcmc_steps + 1 times fewer gradients, correlated in short chains (which the Monte Carlo
   errors from independent runs see).
4. with ``symmetry_moves``, every HMC move is followed by one Metropolis-Hastings proposal along a
   symmetry of the model (``slt_relu.moves``: for two-layer ReLU posteriors the orientation flip
   psi of every node; for a product of layers W_L ... W_1 the GL(H) reparametrization), which leaves
   pi_lambda' invariant and lets particles jump between modes that HMC cannot connect (DSLT4's true and
   reversed orientations) or travel along flat directions that HMC's steps at large t cannot; one gradient
   per proposal.

S at the particles comes with U from one forward-mode pass (``jax.jvp`` in t).

The stage loop is written here from BlackJAX's pieces (``solver.dichotomy``, ``smc.ess``,
``resampling.systematic``, ``mcmc.hmc``) rather than by calling ``adaptive_tempered_smc``: the
whole run (stages until lambda = 1, at most ``max_stages``, with their histories) must be one
``lax.while_loop`` that vmaps and shards over runs with different n beta; the moves run in
``lax.map`` chunks of ``particle_batch`` particles (each chunk's intermediates over the n data
points stay in cache); the step
size is tuned after every move, not once per stage from the last stage's acceptance; and the
waste-free variant keeps the moved particles of every step.  Runs (the
"chains" of :func:`slt_relu.sampling.sample`, e.g. one per data set, or several independent runs
per data set for Monte Carlo errors) are vmapped and sharded like MCMC chains; a run that has
reached lambda = 1 waits for the others.  ``init_z``: (C, N, D) prior draws.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .base import Draws, StaticPartial, register
from .sharding import run_sharded
from .settings import SMCSettings

__all__ = ["SMCInfo", "run_smc"]


class SMCInfo(NamedTuple):
    """Adaptive tempered SMC's statistics; C runs, M = max_stages stages (entries past a run's
    num_stages are 0).

    Attributes:
        num_stages: (C,) the stages each run took.
        final_lambda: (C,) its last lambda (1 unless max_stages ran out).
        lambda_: (C, M) lambda after each stage (the bridge's inverse temperature is lambda t_max).
        ess: (C, M) the incremental weights' ESS fraction, ESS / N, before the stage's resampling.
        accept_prob: (C, M) the mean HMC acceptance of the stage's moves.
        step_size: (C, M) the step size the stage's moves started from (then tuned after each move).
        symmetry_accept: (C, M) the mean acceptance of the stage's symmetry proposals; None without
            symmetry moves.
        log_evidence: (C, M) log Z(lambda t_max) after the stage: the free-energy curve
            F(t) = -log Z(t) at every stage's t.
        mean_slope: (C, M) the moved particles' mean S = dU/dt, E_t[S] at the stage's t
            (thermodynamic integration's integrand).
        prior_mean_slope: (C,) E[S] over the prior particles.
    """

    num_stages: np.ndarray
    final_lambda: np.ndarray
    lambda_: np.ndarray
    ess: np.ndarray
    accept_prob: np.ndarray
    step_size: np.ndarray
    symmetry_accept: np.ndarray | None
    log_evidence: np.ndarray
    mean_slope: np.ndarray
    prior_mean_slope: np.ndarray


class _Run(NamedTuple):
    """One run's state in the stage loop, with its histories (M,)."""

    key: jax.Array
    z: jax.Array              # (N, D)
    slope: jax.Array          # (N,) S(z) = dU/dt
    lam: jax.Array
    log_z: jax.Array
    step: jax.Array
    stage: jax.Array
    grads: jax.Array
    lam_hist: jax.Array       # (M,)
    ess_hist: jax.Array
    acc_hist: jax.Array
    step_hist: jax.Array
    sym_hist: jax.Array       # acceptance of the symmetry proposals
    log_z_hist: jax.Array     # log Z(lambda t_max) after each stage
    slope_hist: jax.Array     # the particles' mean S = dU/dt after each stage's moves: E[S] at lambda t_max


class _Outcome(NamedTuple):
    """What one run returns: its final state (particles, log Z, lambda, stages, gradients, histories), U at
    t_max at its particles (N,), and the mean S over the prior particles."""

    final: _Run
    potential_energy: jax.Array
    prior_mean_slope: jax.Array


def _value_and_slope(potential_gen, data, t, z):
    """(U(z; t), dU/dt (z; t)) in one forward-mode pass."""
    return jax.jvp(lambda tt: potential_gen(*data, tt)(z), (t,), (jnp.ones_like(t),))


def _run(s: SMCSettings, potential_gen, moves, z0, key, args) -> _Outcome:
    """One SMC run from the prior particles z0 (N, D)."""
    from blackjax.mcmc import hmc
    from blackjax.smc.ess import log_ess
    from blackjax.smc.resampling import systematic
    from blackjax.smc.solver import dichotomy

    from .involution import involution_step

    *data, t_max = args
    N, D = z0.shape
    dt = z0.dtype
    M = s.max_stages
    kernel = hmc.build_kernel()
    slope = jax.lax.map(lambda z: _value_and_slope(potential_gen, data, jnp.zeros((), dt), z)[1], z0,
                        batch_size=s.particle_batch)
    zeros = jnp.zeros(M, dt)
    state = _Run(key, z0, slope, jnp.zeros((), dt), jnp.zeros((), dt), jnp.asarray(s.step_size, dt),
                 jnp.int32(0), jnp.int32(N), zeros, zeros, zeros, zeros, zeros, zeros, zeros)

    def stage(r: _Run) -> _Run:
        key, k_res, k_move = jax.random.split(r.key, 3)
        loglik = jnp.nan_to_num(-t_max * r.slope, nan=-jnp.inf)           # log-likelihood per unit lambda
        target = jnp.log(N * s.target_ess)
        fun = lambda delta: log_ess(jnp.nan_to_num(delta * loglik, nan=-jnp.inf)) - target
        delta = jnp.clip(dichotomy(fun, 0.0, 1.0 - r.lam), 0.0, 1.0 - r.lam)
        delta = jnp.where(r.lam + delta > 1.0 - 1e-6, 1.0 - r.lam, delta)
        log_w = jnp.nan_to_num(delta * loglik, nan=-jnp.inf)
        log_mean = jax.nn.logsumexp(log_w) - math.log(N)
        ess = jnp.exp(log_ess(log_w)) / N
        P = s.num_mcmc_steps + 1 if s.waste_free else 1
        idx = systematic(k_res, jax.nn.softmax(log_w), N // P)
        z = r.z[idx]
        lam = r.lam + delta
        t = lam * t_max
        w = jax.nn.softmax(log_w)[:, None]
        mean = jnp.sum(w * r.z, axis=0)
        inv_mass = jnp.maximum(jnp.sum(w * (r.z - mean) ** 2, axis=0), 1e-12)        # the weighted variance
        logdensity = lambda q: -potential_gen(*data, t)(q)

        def hmc_step(args):
            k, st, eps = args
            if not s.symmetry_moves:                 # (the key as it was before the moves existed)
                st, info = kernel(k, st, logdensity, eps, inv_mass, s.num_leapfrog)
                return st, info.acceptance_rate, jnp.zeros((), dt)
            k_hmc, k_sym = jax.random.split(k)
            st, info = kernel(k_hmc, st, logdensity, eps, inv_mass, s.num_leapfrog)
            st, flipped = involution_step(k_sym, st, logdensity, moves)
            return st, info.acceptance_rate, flipped.astype(dt)

        def move(carry, k):
            """One HMC move of every particle, then the step size is tuned on its mean acceptance."""
            states, eps = carry
            k_steps, k_jit = jax.random.split(k)
            jitter = eps * jax.random.uniform(k_jit, (M_res,), dt, 0.8, 1.2)
            states, acc, flipped = jax.lax.map(hmc_step, (jax.random.split(k_steps, M_res), states, jitter),
                                               batch_size=s.particle_batch)
            acc = jnp.mean(acc)
            eps = eps * jnp.exp(jnp.clip(2.0 * (acc - s.target_accept_prob), -1.0, 1.0))
            return (states, eps), (states.position, acc, jnp.mean(flipped))

        M_res = len(idx)
        states = jax.lax.map(lambda q: hmc.init(q, logdensity), z, batch_size=s.particle_batch)
        (_, step), (qs, acc, sym) = jax.lax.scan(move, (states, r.step), jax.random.split(k_move, s.num_mcmc_steps))
        moved = jnp.concatenate([z, jnp.swapaxes(qs, 0, 1).reshape(-1, D)]) if s.waste_free else qs[-1]
        acc = jnp.mean(acc)
        slope = jax.lax.map(lambda q: _value_and_slope(potential_gen, data, t, q)[1], moved,
                            batch_size=s.particle_batch)
        i = r.stage
        return _Run(key, moved, slope, lam, r.log_z + log_mean, step, i + 1,
                    r.grads + N + (N // P) * (1 + s.num_mcmc_steps * (s.num_leapfrog + s.symmetry_moves)),
                    r.lam_hist.at[i].set(lam), r.ess_hist.at[i].set(ess), r.acc_hist.at[i].set(acc),
                    r.step_hist.at[i].set(r.step), r.sym_hist.at[i].set(jnp.mean(sym)),
                    r.log_z_hist.at[i].set(r.log_z + log_mean), r.slope_hist.at[i].set(jnp.mean(slope)))

    final = jax.lax.while_loop(lambda r: (r.lam < 1.0) & (r.stage < M), stage, state)
    U = jax.lax.map(lambda q: potential_gen(*data, t_max)(q), final.z, batch_size=s.particle_batch)
    return _Outcome(final, U, jnp.mean(state.slope))


def run_smc(keys, potential_gen, init_z, args, settings: SMCSettings, *, moves=None, devices=None,
            progress=None) -> Draws:
    """Adaptive tempered SMC runs (module docstring); see :func:`slt_relu.sampling.sample`.

    init_z: (C, N, D) prior draws, N = settings.num_particles; the last array of ``args`` is
    each run's t_max (n beta), which the bridge scales from 0.  Returns :class:`Draws` with z
    (C, N, D) the final particles (equally weighted), log_evidence (C,), and ``info`` an
    :class:`SMCInfo` (per run and per stage).  moves: the involution of the symmetry proposals,
    move(key, z) -> (z', log |det dz'/dz|) and hashable (``slt_relu.moves``), needed when
    ``settings.symmetry_moves``."""
    init_z = jnp.asarray(init_z)
    if init_z.ndim != 3 or init_z.shape[1] != settings.num_particles:
        raise ValueError(f"init_z: expected prior draws of shape (runs, {settings.num_particles}, D), "
                         f"got {init_z.shape}")
    if settings.symmetry_moves and moves is None:
        raise ValueError("moves: symmetry_moves needs the symmetry's involution (e.g. slt_relu.moves.OrientationFlip), "
                         "got None")
    start = time.time()
    out = run_sharded(StaticPartial(_run, (settings, potential_gen, moves if settings.symmetry_moves else None)),
                      (init_z, keys, tuple(args)), devices=devices)
    out = jax.tree.map(np.asarray, out)
    f = out.final
    info = SMCInfo(f.stage, f.lam, f.lam_hist, f.ess_hist, f.acc_hist, f.step_hist,
                   f.sym_hist if settings.symmetry_moves else None, f.log_z_hist, f.slope_hist, out.prior_mean_slope)
    return Draws(f.z, out.potential_energy, info, f.grads, f.log_z, int(f.grads.max() // settings.num_particles),
                 time.time() - start)


register(SMCSettings, run_smc, SMCInfo, particles=True)
