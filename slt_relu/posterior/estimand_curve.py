"""The estimand of ``estimate_llc`` and WBIC, t E_t[L], by MCMC at several inverse temperatures: a curve
(a :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve`) that
:func:`~slt_relu.posterior.free_energy_curve.fit_learning_coefficient` reads (estimator ``"tempered_loss"``), so that
lambda and m come from an MCMC sampler's estimand the same way they come from SMC's bridge.

At one t the estimand sits below lambda by (m - 1) / log t plus slowly decaying powers of t; over a window
of several decades its shape identifies both (Watanabe 2009, Section 6.2; ``free_energy_curve``):

    t E_t[L] = t L* + lambda - (m - 1) / log t - c2 / log^2 t + ...

:func:`tempered_loss_curve` runs R independent NUTS chains at each of given inverse temperatures (all in one
program, on :class:`~slt_relu.posterior.target.TemperedTarget`; the beta sweep's t = n beta are such temperatures:
``slt_relu.posterior.beta_sweep``); :func:`mcmc_tempered_loss_curve` runs it at G inverse temperatures
t_g = t_max 10^(-decades (G - 1 - g) / (G - 1)) (log-spaced, the window's ends included), from random starts in the
prior's box.  Run r of the curve is chain r at every t_g: its mean of L over its kept draws (the draws themselves in
``draw_loss``).  The runs' spread at each t is the fit's standard error, so a chain that settles on a branch of the
singular set other than the one that carries the posterior's mass (a chain at large t does not leave the basin it
reached during warm-up) widens the error instead of hiding in it.  The runs have no free energy (F needs the
evidence): of the asymptotic fit's estimators only ``"tempered_loss"`` applies.

:func:`sgld_tempered_loss_curve` is the same curve by SGLD, the sampler of
:func:`~slt_relu.posterior.llc.estimate_llc`: full-batch Langevin steps from a point w* of the true set (its chains
start at w*, as estimate_llc's), under the prior N(0, prior_std^2 I) rather than a localization around w*, with an
uncorrected Euler step eps_t at each t.  A direction of curvature a relaxes in about 2 / (eps_t a) steps and its
variance is inflated by 1 / (1 - eps_t a / 4), so the step trades bias against mixing, and no one step suits every
t: the posterior's scale is t^(-1/2) in a regular direction but t^(-1/(2k)) in one where K ~ w^(2k).  By default
each t gets its own step, tuned by the MALA acceptance that estimate_llc reports (``slt_relu.sampling.sgld``): the
largest on a ladder of t eps below the first where a pilot chain's mean acceptance falls under ``accept_target``
(:func:`choose_steps`).  A direction that only the prior confines relaxes in about 2 / eps_t steps, so at large t SGLD
measures the neighbourhood of w* that it reaches (the local estimand at w*, Lau et al. 2023), not the whole
tempered posterior.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .learning_coefficient import TemperedCurve

__all__ = ["SGLDCurve", "choose_steps", "mcmc_tempered_loss_curve", "sgld_tempered_loss_curve", "tempered_loss_curve"]


def _temperatures(t_max, decades, temperatures: int) -> np.ndarray:
    """The window's G log-spaced t, ValueError naming the argument unless every t > 1."""
    from ..network import check_number

    t_max = float(check_number(t_max, "t_max"))
    top = math.log10(max(t_max, 1.0))
    if isinstance(decades, bool) or not isinstance(decades, (int, float)) or not 0 < decades < top:
        raise ValueError(f"decades: expected a number in (0, log10(t_max) = {top:.3g}) "
                         f"(every temperature above 1), got {decades!r}")
    return np.logspace(math.log10(t_max) - decades, math.log10(t_max), temperatures)


def tempered_loss_curve(key, loss_fn, params_init, data, t, *, chains: int = 4, prior_std: float = 1.0,
                        localization: float = 0.0, settings=None, init_radius: float = 2.0,
                        devices=None) -> TemperedCurve:
    """E_t[L] by NUTS (or HMC) at each inverse temperature t >= 0 in ``t`` (K,), ``chains`` independent chains at each,
    all in one program (``slt_relu.sampling.sample``), on :class:`~slt_relu.posterior.target.TemperedTarget`:

        p_t(w) proportional to N(w; 0, prior_std^2 I) exp(-t L(w; data))          (localization = 0),
        p_t(w) proportional to exp(-t L(w; data) - (gamma / 2) |w - w*|^2)        (localization gamma > 0).

    The localized posterior (Lau et al. 2023, as ``estimate_llc``'s, without a prior) is centred at
    w* = params_init and its chains start there; the global one's chains start uniformly in
    [-init_radius, init_radius] on every coordinate.

    Args:
        key: a PRNG key.
        loss_fn: L(params, data) -> scalar mean loss, any JAX function of a parameter pytree and a data pytree whose
            leaves share a leading axis n.
        params_init: a parameter pytree: w* of the localized posterior, else only its structure counts.
        data: the data pytree.
        t: (K,) inverse temperatures n beta >= 0 (0: the prior, for thermodynamic integration).
        chains: R chains per temperature (the curve's runs).
        prior_std: the global posterior's prior N(0, prior_std^2 I).
        localization: gamma >= 0 (0: the global posterior).
        settings: NUTSSettings or HMCSettings (default NUTSSettings()).
        init_radius: the global chains' starting box.
        devices: to shard the chains over (default jax.local_devices()).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` with ``t`` (R, K) the temperatures of every
        run, ``mean_loss`` (R, K) chain r's mean L at t_k, ``draw_loss`` (R, K, S) L at every kept draw (computed in
        chunks, :meth:`~slt_relu.posterior.target.TemperedTarget.losses_at`), ``grad_evals`` the gradients of all
        chains; ``free_energy`` and ``prior_mean_loss`` NaN, no particles.

    References:
        Hoffman and Gelman 2014 (NUTS); Lau, Furman, Wang, Murfet, Wei 2023 (the localized posterior).
    """
    import jax
    import jax.numpy as jnp

    from ..network import check_count, check_number
    from ..pytree import unravel_fn
    from ..sampling import HMCSettings, NUTSSettings, broadcast_chains, check_keys, sample
    from .prior import Prior
    from .target import TemperedTarget, num_data

    key = check_keys(key, "key", batch_ndim=0)
    settings = NUTSSettings() if settings is None else settings
    if type(settings) not in (NUTSSettings, HMCSettings):
        raise TypeError(f"settings: expected NUTSSettings or HMCSettings, got {type(settings).__name__}")
    num_data(data)
    check_number(t, "t", nonnegative=True)                      # t = 0: the prior (thermodynamic integration)
    chains = check_count(chains, "chains")
    check_number(prior_std, "prior_std")
    check_number(localization, "localization", nonnegative=True)
    check_number(init_radius, "init_radius")
    flat0, unravel = unravel_fn(params_init)
    t = np.asarray(t, np.float64).reshape(-1)
    K = t.shape[0]
    C = K * chains
    k_init, k_run = jax.random.split(key)
    if localization:
        z0 = jnp.broadcast_to(flat0, (C, flat0.size))
    else:
        z0 = jax.random.uniform(k_init, (C, flat0.size), flat0.dtype, -init_radius, init_radius)
    target = TemperedTarget(loss_fn, unravel, None if localization else Prior.normal(float(prior_std)))
    args = broadcast_chains(C, data) + (jnp.repeat(jnp.asarray(t, flat0.dtype), chains),)
    if localization:
        args += (jnp.full(C, localization, flat0.dtype),) + broadcast_chains(C, flat0)
    out = sample(jax.random.split(k_run, C), target, z0, args, settings, devices=devices)
    draw_loss = np.asarray(target.losses_at(out.z, data), np.float64).reshape(K, chains, -1).transpose(1, 0, 2)
    nan = np.full((chains, K), np.nan)
    return TemperedCurve(np.broadcast_to(t, (chains, K)).copy(), nan, draw_loss.mean(-1), np.full(chains, np.nan),
                         int(np.sum(out.grad_evals)), None, draw_loss)


def mcmc_tempered_loss_curve(key, loss, dim: int, t_max: float, *, decades: float = 3.0, temperatures: int = 8,
                             chains: int = 8, prior_std: float = 1.0, settings=None, data=None) -> TemperedCurve:
    """t E_t[L] by MCMC at ``temperatures`` log-spaced t over the last ``decades`` decades up to t_max
    (module docstring), ``chains`` independent chains at each, under the prior N(0, prior_std^2 I)
    (:func:`tempered_loss_curve` at those t):

        p_t(w) proportional to phi(w) exp(-t L(w; data)).

    Args:
        key: a PRNG key.
        loss: L(w, data) -> scalar on flat w (dim,), hashable (as for
            :func:`~slt_relu.posterior.free_energy_curve.smc_free_energy_curve`); K itself where there is no
            data (``data`` None: L gets a dummy (1,)).
        dim: the number of parameters D.
        t_max: the largest inverse temperature, > 1.
        decades: the window's width in decades, 0 < decades < log10(t_max) (every t > 1).
        temperatures: G >= 2 temperatures.
        chains: R >= 2 chains per temperature (the curve's runs).
        prior_std: the Gaussian prior's standard deviation.
        settings: NUTSSettings (default) or HMCSettings.
        data: a pytree with a leading axis n, shared by the chains, or None.

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` with R = chains runs at the G
        temperatures: ``t`` (R, G), ``mean_loss`` (R, G) each chain's mean L, ``draw_loss`` (R, G, S),
        ``free_energy`` and ``prior_mean_loss`` NaN, ``grad_evals`` the gradients of all chains, no particles.
    """
    import jax.numpy as jnp

    from ..network import check_count

    dim = check_count(dim, "dim")
    temperatures = check_count(temperatures, "temperatures", 2)
    chains = check_count(chains, "chains", 2)
    t = _temperatures(t_max, decades, temperatures)
    dtype = jnp.zeros(()).dtype
    data = jnp.zeros((1,), dtype) if data is None else data
    return tempered_loss_curve(key, loss, jnp.zeros(dim, dtype), data, t, chains=chains, prior_std=prior_std,
                               settings=settings)


STEP_LADDER = tuple(10.0 ** (k / 2) for k in range(-6, 11))      # t eps_t from 1e-3 to 1e5, half a decade apart


class SGLDCurve(NamedTuple):
    """:func:`sgld_tempered_loss_curve`'s curve and what its steps were.

    Attributes:
        curve: the :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` (R runs at G temperatures).
        accept_prob: (R, G) each chain's mean MALA acceptance after its burn-in.
        step_scale: (G,) t eps_t at each t.
    """

    curve: TemperedCurve
    accept_prob: np.ndarray
    step_scale: np.ndarray


class _Rescaled(NamedTuple):
    """A chain's potential in the coordinates z = w / s: V(z) = U(s z), U the TemperedTarget's at t.  SGLD with the
    step 1 on z is SGLD with the step s^2 on w (hashable: a static argument of the program)."""

    target: object

    def __call__(self, data, n_beta, scale):
        U = self.target(data, n_beta)
        return lambda z: U(scale * z)


def _run(key, target, start, t_chain, eps_chain, data, settings):
    """SGLD chains from ``start`` with chain c at t_chain[c] and the step eps_chain[c] on w, in one program (each
    chain in its coordinates z = w / sqrt(eps_c), where the step is 1): (kept w (C, S, D), MALA acceptance (C,),
    gradients (C,))."""
    import jax
    import jax.numpy as jnp

    from ..sampling import broadcast_chains, sample

    C = t_chain.shape[0]
    scale = jnp.sqrt(eps_chain)
    out = sample(jax.random.split(key, C), _Rescaled(target), start[None, :] / scale[:, None],
                 broadcast_chains(C, data) + (t_chain, scale), settings.replace(step_size=1.0))
    return jnp.asarray(out.z) * scale[:, None, None], np.asarray(out.info.accept_prob, np.float64), out.grad_evals


def choose_steps(accept, target: float) -> np.ndarray:
    """Each t's rung on the step ladder: the last before the first rung where a pilot's mean MALA acceptance falls
    below target (acceptance need not fall monotonically with the step, so a pass above a failure is not taken);
    the first rung where even it fails.

    Args:
        accept: (G, L, P) the mean acceptance of P pilot chains at G temperatures and L rungs (increasing steps).
        target: the least acceptance.

    Returns:
        (G,) rung indices.
    """
    failed = np.asarray(accept).min(-1) < target
    first = np.where(failed.any(-1), failed.argmax(-1), failed.shape[-1])
    return np.maximum(first - 1, 0)


def sgld_tempered_loss_curve(key, loss, start, t_max: float, *, decades: float = 3.0, temperatures: int = 8,
                             chains: int = 8, prior_std: float = 1.0, step_scale: float | None = None,
                             accept_target: float = 0.999, pilot_steps: int = 2_000, num_steps: int = 10_000,
                             num_burnin: int = 2_000, thin: int = 10, data=None) -> SGLDCurve:
    """t E_t[L] by full-batch SGLD at ``temperatures`` log-spaced t over the last ``decades`` decades up to t_max,
    ``chains`` chains at each, every chain from ``start`` (w*, a point of the true set), on

        p_t(w) proportional to N(w; 0, prior_std^2 I) exp(-t L(w; data)),
        w_{k+1} = w_k - (eps_t / 2) grad U_t(w_k) + N(0, eps_t I)

    (module docstring), the step eps_t = step_scale / t, or where step_scale is None the t eps_t on STEP_LADDER
    that :func:`choose_steps` picks: the last rung before the first one where either of its two pilot chains of
    ``pilot_steps`` steps from w* has a mean MALA acceptance over its second half below accept_target.  All chains of a stage run in one program.

    Args:
        key: a PRNG key.
        loss: L(w, data) -> scalar on flat w, hashable; K itself where ``data`` is None.
        start: w* (D,), the chains' common start.
        t_max: the largest inverse temperature, > 1.
        decades: the window's width in decades, 0 < decades < log10(t_max) (every t > 1).
        temperatures: G >= 2 temperatures.
        chains: R >= 2 chains per temperature (the curve's runs).
        prior_std: the Gaussian prior's standard deviation.
        step_scale: t eps_t > 0, or None (chosen per t by the pilot chains).
        accept_target: the pilots' least mean MALA acceptance, in (0, 1).
        pilot_steps: each pilot chain's steps (>= 2).
        num_steps: SGLD's steps per chain.
        num_burnin: its first steps, dropped (below num_steps).
        thin: every thin-th step after them is kept.
        data: a pytree with a leading axis n, shared by the chains, or None.

    Returns:
        :class:`SGLDCurve`: the :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` with R = chains runs
        at the G temperatures (``mean_loss`` (R, G) each chain's mean L over its kept steps, ``draw_loss`` (R, G, S)
        L at its kept steps, ``free_energy`` and ``prior_mean_loss`` NaN, ``grad_evals`` the gradients of all
        chains, pilots included), each chain's mean MALA acceptance after its burn-in (R, G), and t eps_t at each t
        (G,).

    References:
        Welling and Teh 2011 (SGLD); Lau, Furman, Wang, Murfet, Wei 2023 (its estimand at one t).
    """
    import jax
    import jax.numpy as jnp

    from ..network import check_count, check_finite, check_number
    from ..pytree import unravel_fn
    from ..sampling import SGLDSettings, check_keys
    from .prior import Prior
    from .target import TemperedTarget

    key = check_keys(key, "key", batch_ndim=0)
    temperatures = check_count(temperatures, "temperatures", 2)
    chains = check_count(chains, "chains", 2)
    check_number(prior_std, "prior_std")
    if step_scale is not None and (isinstance(step_scale, bool) or not isinstance(step_scale, (int, float))
                                   or not 0 < step_scale < math.inf):
        raise ValueError(f"step_scale: expected a positive number (t eps_t) or None, got {step_scale!r}")
    if isinstance(accept_target, bool) or not isinstance(accept_target, (int, float)) or not 0 < accept_target < 1:
        raise ValueError(f"accept_target: expected a number in (0, 1), got {accept_target!r}")
    pilot_steps = check_count(pilot_steps, "pilot_steps", 2)
    num_steps = check_count(num_steps, "num_steps")
    if isinstance(num_burnin, bool) or not isinstance(num_burnin, int) or not 0 <= num_burnin < num_steps:
        raise ValueError(f"num_burnin: expected an integer in [0, num_steps = {num_steps}), got {num_burnin!r}")
    settings = SGLDSettings(num_steps=num_steps, num_burnin=num_burnin, thin=check_count(thin, "thin"))
    t = _temperatures(t_max, decades, temperatures)
    dtype = jnp.zeros(()).dtype
    start = jnp.asarray(check_finite(start, "start"), dtype)
    if start.ndim != 1:
        raise ValueError(f"start: expected a flat point (D,), got shape {start.shape}")
    data = jnp.zeros((1,), dtype) if data is None else data
    try:
        jax.eval_shape(lambda w: loss(w, data), start)
    except (TypeError, ValueError) as err:
        raise ValueError(f"start: expected a point the loss takes, got shape {start.shape} "
                         f"({str(err).splitlines()[0][:120]})") from None
    target = TemperedTarget(loss, unravel_fn(start)[1], Prior.normal(float(prior_std)))
    k_pilot, k_run = jax.random.split(key)
    grads = 0
    if step_scale is None:
        ladder = np.asarray(STEP_LADDER)
        t_p = np.repeat(t, 2 * ladder.size)                          # (t, rung, pilot) in that order
        kappa_p = np.tile(np.repeat(ladder, 2), temperatures)
        _, accept_p, g = _run(k_pilot, target, start, jnp.asarray(t_p, dtype), jnp.asarray(kappa_p / t_p, dtype),
                              data, SGLDSettings(num_steps=pilot_steps, num_burnin=pilot_steps // 2,
                                                 thin=pilot_steps))          # one kept draw: the acceptance is all
        grads += int(np.sum(g))
        kappa = ladder[choose_steps(accept_p.reshape(temperatures, ladder.size, 2), accept_target)]
    else:
        kappa = np.full(temperatures, float(step_scale))
    t_chain, kappa_chain = np.repeat(t, chains), np.repeat(kappa, chains)   # chain c = g R + r
    w, accept, g = _run(k_run, target, start, jnp.asarray(t_chain, dtype), jnp.asarray(kappa_chain / t_chain, dtype),
                        data, settings)
    grads += int(np.sum(g))
    losses = np.asarray(target.losses_at(w, data), np.float64)           # (C, S)
    mean_loss = losses.mean(-1).reshape(temperatures, chains).T         # (R, G)
    nan = np.full(mean_loss.shape, np.nan)
    draw_loss = losses.reshape(temperatures, chains, -1).transpose(1, 0, 2)
    curve = TemperedCurve(np.broadcast_to(t, mean_loss.shape).copy(), nan, mean_loss, np.full(chains, np.nan), grads,
                          None, draw_loss)
    return SGLDCurve(curve, accept.reshape(temperatures, chains).T, kappa)
