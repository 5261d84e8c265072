"""The estimand of ``estimate_llc`` and WBIC, t E_t[L], by MCMC at several inverse temperatures: a curve
that :func:`~slt_relu.posterior.free_energy_curve.fit_learning_coefficient` reads (estimator
``"tempered_loss"``), so that lambda and m come from an MCMC sampler's estimand the same way they come
from SMC's bridge.

At one t the estimand sits below lambda by (m - 1) / log t plus slowly decaying powers of t; over a window
of several decades its shape identifies both (Watanabe 2009, Section 6.2; ``free_energy_curve``):

    t E_t[L] = t L* + lambda - (m - 1) / log t - c2 / log^2 t + ...

G inverse temperatures t_g = t_max 10^(-decades (G - 1 - g) / (G - 1)) (log-spaced, the window's ends
included), and R independent chains at each (all G R chains in one program,
:func:`slt_relu.posterior.llc.tempered_sample`, from random starts in the prior's box).  Run r of the curve
is chain r at every t_g: its mean of L over its kept draws.  The runs' spread at each t is the fit's
standard error, so a chain that settles on a branch of the singular set other than the one that carries
the posterior's mass (a chain at large t does not leave the basin it reached during warm-up) widens the
error instead of hiding in it.  The runs have no free energy (F needs the evidence): only the
``"tempered_loss"`` estimator applies.
"""
from __future__ import annotations

import math

import numpy as np

from .free_energy_curve import FreeEnergyCurve


def mcmc_tempered_loss_curve(key, loss, dim: int, t_max: float, *, decades: float = 3.0, temperatures: int = 8,
                             chains: int = 8, prior_std: float = 1.0, settings=None, data=None) -> FreeEnergyCurve:
    """t E_t[L] by MCMC at ``temperatures`` log-spaced t over the last ``decades`` decades up to t_max
    (module docstring), ``chains`` independent chains at each, under the prior N(0, prior_std^2 I):

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
        :class:`~slt_relu.posterior.free_energy_curve.FreeEnergyCurve` with R = chains runs at the G
        temperatures: ``t`` (R, G), ``mean_loss`` (R, G) each chain's mean L, ``free_energy`` and
        ``prior_mean_loss`` NaN, ``grad_evals`` the gradients of all chains, no particles.
    """
    import jax.numpy as jnp

    from ..network import check_count, check_number
    from .llc import tempered_sample

    dim = check_count(dim, "dim")
    temperatures = check_count(temperatures, "temperatures", 2)
    chains = check_count(chains, "chains", 2)
    t_max = float(check_number(t_max, "t_max"))
    if isinstance(decades, bool) or not isinstance(decades, (int, float)) or not 0 < decades < math.log10(max(t_max, 1.0)):
        raise ValueError(f"decades: expected a number in (0, log10(t_max) = {math.log10(max(t_max, 1.0)):.3g}) "
                         f"(every temperature above 1), got {decades!r}")
    t = np.logspace(math.log10(t_max) - decades, math.log10(t_max), temperatures)
    dtype = jnp.zeros(()).dtype
    data = jnp.zeros((1,), dtype) if data is None else data
    losses, draws = tempered_sample(key, loss, jnp.zeros(dim, dtype), data, t, chains_per_beta=chains,
                                    prior_std=prior_std, settings=settings)
    mean_loss = losses.astype(np.float64).mean(-1).T                       # (R, G)
    nan = np.full(mean_loss.shape, np.nan)
    return FreeEnergyCurve(np.broadcast_to(t, mean_loss.shape).copy(), nan, mean_loss, np.full(chains, np.nan),
                           int(np.sum(draws.grad_evals)))
