"""The local learning coefficient (LLC) by SGLD: a reader of lambda at one inverse temperature, at a point w*.

Singular learning theory: the Bayes free energy is F_n = n L_n(w0) + lambda log n + O_p(log log n),
lambda the real log canonical threshold (RLCT) of K at the true parameters.

Local learning coefficient (Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient:
a singularity-aware complexity measure"): the localized tempered posterior around w*,

    p(w) proportional to exp(-n beta L_n(w) - (gamma / 2) |w - w*|^2),  n beta = n / log n by default,

sampled by SGLD (Welling & Teh 2011),

    w_{t+1} = w_t - (eps / 2) (n beta grad L_B(w_t) + gamma (w_t - w*)) + N(0, eps I),

(L_B: the loss on a mini-batch B, or the full L_n), and

    lambda_hat = n beta (E[L_n(w)] - L_n(w*)),

the localized tempered posterior's t E_t[L_n - L_n(w*)] at t = n beta (the estimand along t:
``slt_relu.posterior.estimand_curve``).
:func:`estimate_llc` returns it as a :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate` whose
details (:class:`LocalSGLD`) hold the chains' traces.

Two biases, both visible in ``slt_relu.posterior.llc_tuning.calibrate_llc``: the localization confines directions whose
curvature n beta h is not large against gamma (a quadratic direction contributes
(1/2) n beta h / (n beta h + gamma) instead of 1/2, so a large gamma underestimates), and the Euler
step inflates the stationary variance of a direction of curvature a = n beta h by
1 / (1 - eps a / 4) (an overestimate unless eps a << 1) while small steps mix slowly along flat
directions (relaxation time ~ 2 / (eps a)).  The MALA acceptance of the SGLD proposal (computed at
no extra gradient) measures the step size bias: near 1 it is small.  A third effect is not the
sampler's: at finite n the tempered posterior of a ReLU network need not be in its asymptotic
regime, and the less it is confined the larger the measured lambda (the measurements: docs/notes.md).
The global readers on tempered NUTS posteriors (the beta sweep, WBIC): ``slt_relu.posterior.beta_sweep``.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import diagnostics as dg
from ..network import check_count, check_finite, check_number, check_params
from .._validate import SCALE_BOUND, setting, settings_fields, settings_type
from ..pytree import unravel_fn
from ..sampling import SGLDSettings, broadcast_chains, check_keys, sample
from ..loss import TwoLayerLoss, two_layer_loss
from .learning_coefficient import LambdaEstimate
from .target import TemperedTarget, num_data

__all__ = ["LLCSettings", "LocalSGLD", "Minimum", "RestrictedLoss", "estimate_llc", "free_mask", "llc_two_layer",
           "localized_sgld", "settings_and_n_beta", "minimize_loss", "normal_crossing_expectation", "restricted_two_layer_loss",
           "two_layer_loss_for"]


@settings_type
class LLCSettings(SGLDSettings):
    """The settings of :func:`estimate_llc`: SGLD's (num_steps, num_burnin, thin, step_size, batch_size) and what
    the estimator adds, the chains, the localization gamma and n beta.  A plain frozen type, checked when made."""

    num_chains: int = setting(4, ge=1, description="chains, vmapped in one program")
    localization: float = setting(100.0, ge=0, le=SCALE_BOUND ** 2, description="gamma of exp(-n beta L_n - gamma/2 "
                                  "|w - w*|^2)")
    n_beta: float | None = setting(None, gt=0, le=1e12, description="n beta (default n / log n)")

    def sampler(self) -> SGLDSettings:
        """SGLD's own settings: the compiled program's static argument (chains, gamma and n beta are
        arguments of the program, so a calibration grid over gamma compiles once)."""
        return SGLDSettings(**{f.name: getattr(self, f.name) for f in settings_fields(SGLDSettings)})

    @classmethod
    def of(cls, settings) -> "LLCSettings":
        """settings as LLCSettings: LLCSettings as they are, SGLDSettings with the estimator's defaults; else
        TypeError naming the argument."""
        if isinstance(settings, cls):
            return settings
        if isinstance(settings, SGLDSettings):
            return cls(**{f.name: getattr(settings, f.name) for f in settings_fields(SGLDSettings)})
        raise TypeError(f"settings: expected slt_relu.LLCSettings (or SGLDSettings), got {type(settings).__name__}")


class LocalSGLD(NamedTuple):
    """What a local SGLD estimate rests on (the ``details`` of :func:`estimate_llc`'s estimate).

    Attributes:
        per_chain: (C,) each chain's lambda_hat.
        loss_trace: (C, T) L_n on all the data at each kept step (also when the steps use mini-batches).
        init_loss: L_n(w*).
        n_beta: n beta.
        accept_prob: (C,) each chain's mean MALA acceptance of the SGLD proposals.
        rhat: split R-hat of the loss traces (all chains sample one posterior; NaN with fewer than 8 draws).
        draws: (C, T, F) the kept draws of the F free flat coordinates (``save_draws``), else None.
    """

    per_chain: np.ndarray
    loss_trace: np.ndarray
    init_loss: float
    n_beta: float
    accept_prob: np.ndarray
    rhat: float
    draws: np.ndarray | None = None


NO_M = "not read: an estimate at one t reads no m (its value sits below lambda by (m - 1) / log t)"


def estimate_llc(key, loss_fn: Callable, params_star, data, settings: LLCSettings = LLCSettings(), *,
                 restrict=None, save_draws: bool = False, devices=None) -> LambdaEstimate:
    """Local learning coefficient at params_star by SGLD on the localized tempered posterior
    (module docstring), :class:`~slt_relu.posterior.target.TemperedTarget` without a prior:

        lambda_hat = n_beta (E[L_n(w)] - L_n(w*)),  p(w) proportional to exp(-n_beta L_n(w) - (gamma/2) |w - w*|^2).

    With ``restrict``, the restricted LLC: only the free parameters move, the others stay at w* (the LLC of a layer,
    a neuron, any group; for a loss that separates into independent blocks, each block's restricted LLC is its
    lambda and they sum to the whole).

    Args:
        key: a PRNG key.
        loss_fn: L_n(params, data) -> scalar mean loss over the data given: any JAX function of a
            parameter pytree and a data pytree whose leaves share a leading axis n.
        params_star: the parameters w* (a pytree) to localise at.
        data: the data pytree.
        settings: :class:`LLCSettings` (or :class:`~slt_relu.SGLDSettings`, with the estimator's defaults for
            the rest): num_chains chains vmapped in one program; num_steps SGLD
            steps each, the first num_burnin dropped, then every thin-th kept; step_size eps;
            preconditioner None or "rmsprop" (``slt_relu.sampling.sgld``); localization gamma; n_beta (default
            n / log n); batch_size None for full-batch gradients, else (<= n) mini-batches drawn with replacement
            at every step.
        restrict: None (every parameter free) or a pytree of booleans with params_star's structure and shapes
            (True: free), e.g. ``jax.tree.map(lambda a: jnp.ones(a.shape, bool), params)`` with one layer's
            leaves set to False.
        save_draws: keep the draws (C x T x F numbers, F the free parameters) in the details; without them memory
            does not grow with the parameters times the steps.
        devices: to shard the chains over (default jax.local_devices()).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`: lambda_hat averaged over the chains, its
        standard error across them (sd / sqrt(C), NaN for one chain), m None, method "local_sgld", window
        (n beta, n beta), warnings (why it may not be trusted: non-finite losses, a negative estimate, a split R-hat
        of the loss traces above 1.05, a mean MALA acceptance below 0.9), details :class:`LocalSGLD` (its loss_trace
        (C, T) is L_n on all the data at the kept draws, computed inside the sampler's scan, so that memory does
        not grow with the steps).

    References:
        Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient"; Welling & Teh 2011
        (SGLD); Li, Chen, Carlson & Carin 2016 (RMSProp-preconditioned SGLD).
    """
    key = check_keys(key, "key", batch_ndim=0)
    s, n_beta = settings_and_n_beta(loss_fn, data, settings)
    free = free_mask(restrict, params_star)
    init_loss = float(loss_fn(params_star, data))
    w_star, unravel = unravel_fn(params_star)
    C = s.num_chains
    draws = localized_sgld(key[None], loss_fn, unravel, w_star[None], data, s, n_beta, free, save_draws, devices)
    losses, accept = draws.info.observed, draws.info.accept_prob          # L_n at each kept step (C, T)
    per_chain = n_beta * (losses.astype(np.float64).mean(1) - init_loss)
    est = float(per_chain.mean())
    se = float(per_chain.std(ddof=1) / np.sqrt(C)) if C > 1 else float("nan")
    rhat = dg.rhat(losses) if losses.shape[1] >= 8 else float("nan")        # too few draws: not computed
    warnings = []
    if not np.all(np.isfinite(losses)):
        warnings.append("non-finite losses: the step size is too large")
    if est < 0:
        warnings.append(f"negative estimate {est:.3g}: the chains found lower loss than at w*, which is then no "
                        "local minimum (or the localization is too weak)")
    if losses.shape[1] >= 8 and np.isnan(rhat):
        warnings.append("split R-hat of the loss traces is NaN: undefined (non-finite or constant losses)")
    elif rhat > 1.05:
        warnings.append(f"loss traces not stationary: split R-hat {rhat:.3f} > 1.05 (burn in longer or use a "
                        "larger step)")
    if np.nanmean(accept) < 0.9:                       # on a quadratic, 0.89 already means +28 % (tests)
        warnings.append(f"MALA acceptance {np.nanmean(accept):.2f} < 0.9: the step size biases the estimate "
                        "(use a smaller step)")
    return LambdaEstimate(est, se, None, NO_M, "local_sgld", (float(n_beta), float(n_beta)), tuple(warnings),
                          LocalSGLD(per_chain, losses, init_loss, float(n_beta), accept, float(rhat),
                                    None if draws.z is None else draws.z[..., free]))


def settings_and_n_beta(loss_fn, data, settings) -> tuple[LLCSettings, float]:
    """(settings as LLCSettings, n beta: the setting or n / log n), after the checks every estimate makes
    (loss_fn callable, data with one leading axis n, batch_size <= n); one-line errors naming the argument."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a function loss_fn(params, data), got {type(loss_fn).__name__}")
    s = LLCSettings.of(settings)
    n = num_data(data)
    if s.batch_size is not None and s.batch_size > n:
        raise ValueError(f"batch_size: expected None or an integer in [1, n = {n}], got {s.batch_size!r}")
    if s.n_beta is not None:
        return s, s.n_beta
    if n < 2:
        raise ValueError("n_beta: the default n / log n needs n >= 2 data points")
    return s, n / math.log(n)


def localized_sgld(keys, loss_fn, unravel, centers, data, s: LLCSettings, n_beta: float, free, save_draws: bool,
                devices):
    """The localized tempered posteriors at B centers in one SGLD program of B x C chains (C = s.num_chains), the
    sampler of :func:`estimate_llc` and ``slt_relu.posterior.llc_curve.llc_at_checkpoints``.

    Args:
        keys: (B, 2) raw PRNG keys; chain c of center b has the key ``jax.random.split(keys[b], C)[c]``.
        loss_fn: L_n(params, data) -> scalar.
        unravel: flat (D,) -> params.
        centers: (B, D) the flat w*.
        data: the data pytree.
        s: LLCSettings; n_beta: n beta.
        free: (D,) bool, the coordinates that move.
        save_draws: keep the draws.
        devices: to shard the chains over.

    Returns:
        the sampler's :class:`~slt_relu.sampling.Draws`, chains ordered (b, c), with L_n at the kept draws in
        ``info.observed`` (B C, T).
    """
    from ..sampling.sgld import run_sgld
    from .target import LossAt

    B, C = centers.shape[0], s.num_chains
    dt = centers.dtype
    target = TemperedTarget(loss_fn, unravel)
    z0 = jnp.repeat(centers, C, axis=0)
    chain_keys = jax.vmap(lambda k: jax.random.split(k, C))(keys).reshape((B * C,) + keys.shape[1:])
    args = broadcast_chains(B * C, data, jnp.asarray(n_beta, dt), jnp.asarray(s.localization, dt)) + (z0,)
    return run_sgld(chain_keys, target, z0, args, s.sampler(), observe=LossAt(target), keep_draws=bool(save_draws),
                    free=free, devices=devices)


def free_mask(restrict, params) -> np.ndarray:
    """restrict (a pytree of booleans shaped like params, True = free; None = all free) as a (D,) bool mask in
    params' flat order (``slt_relu.pytree.unravel_fn``); ValueError naming ``restrict`` otherwise, or when no
    parameter is free."""
    leaves, treedef = jax.tree.flatten(params)
    if restrict is None:
        return np.ones(sum(int(np.size(a)) for a in leaves), bool)
    try:
        masks = treedef.flatten_up_to(restrict)
    except (TypeError, ValueError):
        raise ValueError(f"restrict: expected a pytree of booleans with params' structure {treedef}, got "
                         f"{jax.tree.structure(restrict)}") from None
    flat = []
    for a, m in zip(leaves, masks):
        m = np.asarray(m)
        if m.dtype != bool:
            raise ValueError(f"restrict: expected booleans (True = free), got a leaf of dtype {m.dtype}")
        if m.shape != np.shape(a):
            m = np.broadcast_to(m, np.shape(a)) if m.ndim == 0 else None
        if m is None:
            raise ValueError(f"restrict: expected each leaf shaped like params' ({np.shape(a)}) or a scalar, got "
                             f"shape {np.shape(masks[len(flat)])}")
        flat.append(np.ravel(m))
    mask = np.concatenate(flat) if flat else np.zeros(0, bool)
    if not mask.any():
        raise ValueError("restrict: expected at least one free parameter (True), got none")
    return mask


class Minimum(NamedTuple):
    """A local minimum of a loss (:func:`minimize_loss`): params, the parameters (the start's structure), and loss,
    the loss there."""

    params: object
    loss: float


def minimize_loss(loss_fn: Callable, params, data, num_steps: int = 300) -> Minimum:
    """A nearby local minimum of a loss by L-BFGS (optax, zoom line search) from params: the point to localise at.

    lambda_hat = n beta (E[L_n] - L_n(w*)) assumes w* minimises L_n; a true parameter misses the minimiser by
    O(1/sqrt n), which lowers lambda_hat by n beta (L_n(w*) - L_n(w_hat)), about beta chi^2_k / 2 for k regular
    directions.

    Args:
        loss_fn: L(params, data) -> scalar.
        params: the start, a parameter pytree.
        data: loss_fn's data.
        num_steps: L-BFGS steps, >= 1.

    Returns:
        (params, loss): a :class:`Minimum`, the minimum (params' structure) and the loss there (not above the
        start's).
    """
    num_steps = check_count(num_steps, "num_steps")
    flat0, unravel = unravel_fn(params)
    w, value = _lbfgs(loss_fn, unravel, num_steps, flat0, data)
    return Minimum(unravel(w), float(value))


@partial(jax.jit, static_argnums=(0, 1, 2))
def _lbfgs(loss_fn, unravel, num_steps: int, flat0, data):
    import optax

    f = lambda w: loss_fn(unravel(w), data)
    opt = optax.lbfgs()
    vg = optax.value_and_grad_from_state(f)

    def step(carry, _):
        w, state = carry
        value, grad = vg(w, state=state)
        updates, state = opt.update(grad, state, w, value=value, grad=grad, value_fn=f)
        return (optax.apply_updates(w, updates), state), None

    (w, _), _ = jax.lax.scan(step, (flat0, opt.init(flat0)), None, length=num_steps)
    w = jnp.where(f(w) <= f(flat0), w, flat0)
    return w, f(w)


def two_layer_loss_for(sigma: float) -> Callable:
    """two_layer_loss at a fixed sigma; equal sigmas give equal functions, so compiled programs are reused."""
    from ..loss import check_sigma

    return TwoLayerLoss(float(check_sigma(sigma)))


def llc_two_layer(key, params_star, x, y, settings: LLCSettings = LLCSettings(), *, sigma: float = 1.0,
                  free=None, devices=None) -> LambdaEstimate:
    """The local learning coefficient of a two-layer network at params_star: :func:`estimate_llc` on its L_n.

        lambda_hat = n_beta (E[L_n(w)] - L_n(w*))

    Args:
        key: a PRNG key.
        params_star: the TwoLayer w* to localise at (ideally a minimum of L_n: :func:`minimize_loss`).
        x: (n, n_in) inputs.
        y: (n,) outputs.
        settings: :class:`LLCSettings` (or SGLDSettings).
        sigma: the noise standard deviation of L_n, > 0.
        free: optional (D,) bool mask (a Restriction's ``free``): only those coordinates move.
        devices: to shard the chains over (default jax.local_devices()).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`, as :func:`estimate_llc`'s.

    References:
        Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient".
    """
    check_finite(check_params(params_star), "params_star")
    from ..loss import check_data

    x, y = check_data(x, y, params_star.n_in, "params_star")
    loss, theta_star = restricted_two_layer_loss(params_star, free, sigma)
    return estimate_llc(key, loss, theta_star, (x, y), settings, devices=devices)


def restricted_two_layer_loss(params_star, free=None, sigma: float = 1.0):
    """(loss_fn, theta*): L_n of the TwoLayer as a function of its free flat coordinates theta (the
    others held at params_star's values), and params_star's free coordinates.  free: (D,) bool
    mask, default all.  loss_fn is equal (and hashes equal) for equal models, so compiled
    programs are reused."""
    from ..loss import check_sigma
    from ..network import Restriction, to_flat

    free = np.ones(to_flat(params_star).size, bool) if free is None else np.asarray(free, bool)
    model = Restriction(params_star, free)
    return RestrictedLoss(model, float(check_sigma(sigma))), jnp.asarray(np.asarray(to_flat(params_star))[free], params_star.w.dtype)


class RestrictedLoss(NamedTuple):
    """L_n as a function of a restricted model's free coordinates theta: loss(theta, (x, y))."""

    model: object
    sigma: float

    def __call__(self, theta, data):
        from ..network import from_flat

        base = self.model.base
        return two_layer_loss(from_flat(self.model.embed_flat(theta), base.width, base.n_in), data, self.sigma)


def normal_crossing_expectation(exponents: Sequence[int], n_beta: float, localization: float,
                                points: int | None = None) -> float:
    """E[n beta K] for K(w) = prod_i w_i^(2 k_i) under the localized tempered posterior at w* = 0,
    p(w) proportional to exp(-n beta K(w) - localization |w|^2 / 2): the exact finite-n value
    that lambda_hat estimates there (its limit as n beta -> infinity is lambda = 1 / (2 max k)).

    Quadrature in log coordinates w_i = +-e^{s_i}, s_i in [-25, 4] (p points per axis; 2 or 3
    coordinates).  With a unique largest k the value nears lambda like a power of 1/(n beta); with
    m coordinates sharing the largest k (e.g. K = w^2 q^2, m = 2) the density of states carries
    log^{m-1} and the value stays about (m - 1) / log(n beta / localization) below lambda (the derivative
    of log Z = -lambda log t + (m - 1) log log t + c: ``slt_relu.posterior.free_energy_curve``).
    """
    k = np.asarray(exponents, np.float64)
    if k.ndim != 1 or not 1 <= k.size <= 3 or np.any(k < 1):
        raise ValueError(f"exponents: expected 1 to 3 positive integers, got {exponents!r}")
    check_number(n_beta, "n_beta")
    check_number(localization, "localization", nonnegative=True)
    if points is not None:
        check_count(points, "points", minimum=2)
    pts = points or {1: 20000, 2: 1500, 3: 240}[k.size]
    s = np.linspace(-25.0, 4.0, pts)
    grids = np.meshgrid(*([s] * k.size), indexing="ij", sparse=True)
    logK = sum(2 * ki * g for ki, g in zip(k, grids))
    logw = -n_beta * np.exp(logK) - 0.5 * localization * sum(np.exp(2 * g) for g in grids) + sum(grids)
    p = np.exp(logw - logw.max())
    return float(np.sum(n_beta * np.exp(logK) * p) / np.sum(p))
