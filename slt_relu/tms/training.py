"""Training trajectories of the toy model of superposition: many runs of Adam or SGD from random
initialisations at several n, the k-gon phase at log-spaced checkpoints (the learning coefficient
along training: ``slt_relu.tms.training_llc``).

The model and losses are ``slt_relu.models.tms``'s: f(x) = ReLU(W^T W x + b), W (2, c), and on a data set of
n inputs x_k = mu_k e_(i_k) (:func:`~slt_relu.models.tms.sample_inputs`)

    L_n(w) = (1/n) sum_k ||x_k - f(x_k; w)||^2.

Training (:func:`train_trajectories`): R runs per n, each from W ~ N(0, init_std^2), b ~ N(0, init_bias_std^2)
per entry (run r starts from the same point at every n, so that runs differ across n by their data alone), and
``steps`` updates of optax's Adam or SGD,

    w_(t+1) = w_t + update(grad L_B(w_t)),

with L_B = L_n (full batch, exact from sorted inputs: ``slt_relu.tms.sorted_loss``) or the mean over a
mini-batch B of ``batch_size`` inputs drawn with replacement at every step.  The data sets are nested: the
data set at n is the first n inputs of one sequence of max(n) inputs.  All runs and all n are one compiled
program (vmap over n and runs; a ``lax.scan`` over the checkpoints, each segment a ``fori_loop`` over its
steps), and the parameters are kept at the checkpoints only: step 0 and log-spaced steps up to ``steps``.
At each checkpoint: L_n, the exact population loss L(w) (:func:`~slt_relu.models.tms.population_loss`) and
the phase, the k-gon label of ``slt_relu.tms.phases.phase_codes`` (the labelling of the Bayesian transition,
``slt_relu.tms.transition``).

The learning coefficient at the checkpoints: ``slt_relu.tms.training_llc``.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301 (the dynamical transitions, the LLC along training); Lau, Furman, Wang,
    Murfet, Wei 2023, "The local learning coefficient" (the estimator); Kingma & Ba 2015 (Adam).
"""
from __future__ import annotations

import time
from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count
from ..models.tms import R_HIDDEN, TMSParams, check_positive, population_loss, sample_inputs
from .phases import phase_codes, phase_names
from .sorted_loss import SortedInputs, sorted_empirical_loss, sorted_inputs

__all__ = ["OPTIMIZERS", "checkpoint_dataset", "checkpoint_steps", "phase_sequence", "train_trajectories"]

OPTIMIZERS = ("adam", "sgd")
"""The optax optimizers :func:`train_trajectories` runs."""


def checkpoint_steps(steps: int, checkpoints: int) -> np.ndarray:
    """Step 0 and ``checkpoints - 1`` steps log-spaced from 1 to ``steps`` (rounded, duplicates dropped).

    Args:
        steps: the last step, >= 1.
        checkpoints: the checkpoints asked for, >= 2 (fewer come back where rounding merges early steps).

    Returns:
        (K,) increasing int steps, K <= checkpoints, first 0, last ``steps``.
    """
    steps, checkpoints = check_count(steps, "steps"), check_count(checkpoints, "checkpoints", 2)
    return np.unique(np.concatenate([[0], np.round(np.geomspace(1, steps, checkpoints - 1)).astype(np.int64)]))


def _optimizer(name: str, learning_rate):
    import optax

    return optax.adam(learning_rate) if name == "adam" else optax.sgd(learning_rate)


def _batch_loss(flat, x):
    """(1/B) sum_k ||x_k - ReLU(W^T W x_k + b)||^2 on flat parameters (W row-major, then b) and x (B, c)."""
    c = x.shape[-1]
    W, b = flat[: R_HIDDEN * c].reshape(R_HIDDEN, c), flat[R_HIDDEN * c:]
    return jnp.mean(jnp.sum((x - jax.nn.relu((x @ W.T) @ W + b)) ** 2, axis=-1))


@partial(jax.jit, static_argnames=("optimizer", "batch_size"))
def _train(flat0, data, x, ns, batch_keys, bounds, learning_rate, *, optimizer: str, batch_size):
    """Parameters at every checkpoint (N, R, K, D) of R runs from flat0 (R, D) at each of N data sets (data: the
    stacked SortedInputs, x (n_max, c) the shared inputs, ns (N,)); bounds (K - 1, 2) the segments' steps."""

    def one_run(w0, sorted_data, n, key):
        opt = _optimizer(optimizer, learning_rate)

        def loss(w, t):
            if batch_size is None:
                return sorted_empirical_loss(w, sorted_data)
            idx = jax.random.randint(jax.random.fold_in(key, t), (batch_size,), 0, n)
            return _batch_loss(w, x[idx])

        def step(t, carry):
            w, state = carry
            updates, state = opt.update(jax.grad(loss)(w, t), state, w)
            return w + updates, state

        def segment(carry, bound):
            carry = jax.lax.fori_loop(bound[0], bound[1], step, carry)
            return carry, carry[0]

        _, ws = jax.lax.scan(segment, (w0, opt.init(w0)), bounds)
        return jnp.concatenate([w0[None], ws])

    runs = jax.vmap(one_run, (0, None, None, 0))
    return jax.vmap(runs, (None, 0, 0, 0))(flat0, data, ns, batch_keys)


def _flat_init(init, R: int, c: int, dtype):
    """(R, 3 c) flat starting points from a TMSParams of one point or of R points (ValueError naming ``init``)."""
    if not isinstance(init, TMSParams):
        raise ValueError(f"init: expected None or slt_relu.tms.TMSParams, got {type(init).__name__}")
    W, b = jnp.asarray(init.W, dtype), jnp.asarray(init.b, dtype)
    if W.shape == (R_HIDDEN, c) and b.shape == (c,):
        W, b = jnp.broadcast_to(W, (R, R_HIDDEN, c)), jnp.broadcast_to(b, (R, c))
    if W.shape != (R, R_HIDDEN, c) or b.shape != (R, c) or not bool(jnp.all(jnp.isfinite(W)) & jnp.all(jnp.isfinite(b))):
        raise ValueError(f"init: expected finite W of shape (2, {c}) or ({R}, 2, {c}) and b to match, got {W.shape} "
                         f"and {b.shape}")
    return jnp.concatenate([W.reshape(R, -1), b], axis=1)


def _check_ns(ns) -> list[int]:
    try:
        out = [check_count(v, "ns") for v in ns]
    except TypeError:
        raise ValueError(f"ns: expected a sequence of sample sizes, got {ns!r}") from None
    if not out or any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"ns: expected increasing sample sizes, got {out}")
    return out


def train_trajectories(key, num_features: int, ns: Sequence[int], *, runs: int = 16, steps: int = 10_000,
                       optimizer: str = "adam", learning_rate: float = 0.01, batch_size: int | None = None,
                       init_std: float = 1.0, init_bias_std: float = 0.0, checkpoints: int = 16, inputs=None,
                       init: TMSParams | None = None):
    """Train R runs of the TMS at each n from random initialisations; the loss and phase at every checkpoint.

        w_0: W ~ N(0, init_std^2), b ~ N(0, init_bias_std^2) per entry (run r: the same w_0 at every n);
        w_(t+1) = w_t + optax update of grad L_B(w_t),  L_B = L_n or a mini-batch mean (module docstring).

    Args:
        key: a PRNG key, split once: data, initialisations, mini-batches.
        num_features: c >= 2.
        ns: increasing sample sizes; the data set at n is the first n of max(ns) inputs.
        runs: R >= 1 runs per n.
        steps: optimiser steps per run, >= 1.
        optimizer: "adam" (optax.adam) or "sgd" (optax.sgd).
        learning_rate: > 0.
        batch_size: None for full-batch gradients (the exact L_n), else 1 .. min(ns) inputs per step.
        init_std: the initial W's standard deviation, > 0 (1: the prior N(0, 1) of ``slt_relu.tms.transition``).
        init_bias_std: the initial b's standard deviation, >= 0 (0: b = 0).
        checkpoints: checkpoints asked for, >= 2 (:func:`checkpoint_steps`).
        inputs: (n_0, c) inputs to use instead of drawing them (n_0 >= max(ns)).
        init: start every run here instead (TMSParams with W (2, c), b (c,), or W (R, 2, c), b (R, c) per run);
            init_std and init_bias_std are then unused.

    Returns:
        xarray.Dataset with dims n (N), run (R), checkpoint (K), hidden (2), feature (c), sample (max(ns)),
        variant (the phase names of ``phase_names(c)``): ``W`` (n, run, checkpoint, hidden, feature), ``b``
        (n, run, checkpoint, feature), ``train_loss`` L_n and ``population_loss`` L (n, run, checkpoint),
        ``phase`` (n, run, checkpoint) the variant's name ("6-gon", "5-gon -", ..., "none"), ``phase_code`` its
        index along ``variant``, ``phase_group`` the k-gon without the variant ("5-gon"), ``inputs`` (sample,
        feature) the data; coordinate ``step`` (checkpoint); attrs c, optimizer, learning_rate, batch_size
        (0: full batch), steps, init_std, init_bias_std, wall_s.

    References:
        Chen et al. 2023 (arXiv 2310.06301), the dynamical transitions of SGD training.
    """
    from ..sampling import check_keys

    start = time.time()
    key = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    c = check_count(num_features, "num_features", 2)
    ns = _check_ns(ns)
    R = check_count(runs, "runs")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer: expected one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    lr = check_positive(learning_rate, "learning_rate")
    if batch_size is not None and check_count(batch_size, "batch_size") > ns[0]:
        raise ValueError(f"batch_size: expected None or at most the smallest n = {ns[0]}, got {batch_size}")
    init_std = check_positive(init_std, "init_std")
    init_bias_std = check_positive(init_bias_std, "init_bias_std", allow_zero=True)
    ck = checkpoint_steps(steps, checkpoints)
    dtype = jnp.zeros(()).dtype
    k_data, k_init, k_batch = jax.random.split(key, 3)
    N = ns[-1]
    if inputs is None:
        x = np.asarray(sample_inputs(k_data, N, c, dtype))
    else:
        x = np.asarray(inputs)
        if x.ndim != 2 or x.shape[1] != c or x.shape[0] < N:
            raise ValueError(f"inputs: expected shape (>= {N}, {c}), got {x.shape}")
        x = x[:N].astype(dtype)
    data = jax.tree.map(lambda *a: jnp.stack(a), *[sorted_inputs(x[:n], N) for n in ns])

    def draw_init(k):
        kw, kb = jax.random.split(k)
        return jnp.concatenate([init_std * jax.random.normal(kw, (R_HIDDEN * c,), dtype),
                                init_bias_std * jax.random.normal(kb, (c,), dtype)])

    flat0 = jax.vmap(draw_init)(jax.random.split(k_init, R)) if init is None else _flat_init(init, R, c, dtype)
    batch_keys = jax.vmap(lambda k: jax.random.split(k, R))(jax.random.split(k_batch, len(ns)))
    bounds = jnp.asarray(np.stack([ck[:-1], ck[1:]], 1))
    flat = np.asarray(_train(flat0, data, jnp.asarray(x), jnp.asarray(ns), batch_keys, bounds,
                             jnp.asarray(lr, dtype), optimizer=optimizer, batch_size=batch_size))
    ds = checkpoint_dataset(flat, ns, ck, x, data)
    ds.attrs.update(optimizer=optimizer, learning_rate=lr, batch_size=int(batch_size or 0), steps=int(ck[-1]),
                    init_std=init_std, init_bias_std=init_bias_std, wall_s=time.time() - start)
    return ds


@jax.jit
def _evaluate(flat, data):
    """(L_n, L) of flat (N, R, K, D) parameters on the stacked data sets (N, ...)."""
    def per_n(f, d):
        train = jax.vmap(jax.vmap(lambda w: sorted_empirical_loss(w, d)))(f)
        c = d.mu.shape[0]
        pop = jax.vmap(jax.vmap(lambda w: population_loss(TMSParams(w[: R_HIDDEN * c].reshape(R_HIDDEN, c),
                                                                    w[R_HIDDEN * c:]))))(f)
        return train, pop

    return jax.vmap(per_n)(flat, data)


def checkpoint_dataset(flat, ns, steps, x, data: SortedInputs):
    """The Dataset of :func:`train_trajectories` from the flat parameters (N, R, K, D) at the checkpoints."""
    import xarray as xr

    flat = np.asarray(flat)
    N, R, K, D = flat.shape
    c = x.shape[1]
    W = flat[..., : R_HIDDEN * c].reshape(N, R, K, R_HIDDEN, c)
    b = flat[..., R_HIDDEN * c:]
    train, pop = (np.asarray(a) for a in _evaluate(jnp.asarray(flat), data))
    codes, groups = phase_codes(TMSParams(jnp.asarray(W), jnp.asarray(b)))
    variants, group_names, _ = phase_names(c)
    nrk = ("n", "run", "checkpoint")
    return xr.Dataset(
        {"W": (nrk + ("hidden", "feature"), W, {"long_name": "W at the checkpoint"}),
         "b": (nrk + ("feature",), b, {"long_name": "b at the checkpoint"}),
         "train_loss": (nrk, train, {"long_name": "L_n, the training loss (1/n) sum ||x - f(x)||^2"}),
         "population_loss": (nrk, pop, {"long_name": "L, the exact population loss E ||x - f(x)||^2"}),
         "phase": (nrk, np.asarray(variants, dtype=object)[codes].astype(str),
                   {"long_name": "the k-gon phase and variant (slt_relu.tms.phases.phase_codes)"}),
         "phase_code": (nrk, np.asarray(codes, np.int64), {"long_name": "index of the phase along variant"}),
         "phase_group": (nrk, np.asarray(group_names, dtype=object)[groups].astype(str)),
         "inputs": (("sample", "feature"), np.asarray(x), {"long_name": "the inputs; the data set at n: the first n"})},
        coords={"n": np.asarray(ns, np.int64), "run": np.arange(R), "checkpoint": np.arange(K),
                "step": ("checkpoint", np.asarray(steps, np.int64)), "variant": list(variants)},
        attrs={"c": c})


def phase_sequence(phases: Sequence[str], *, skip: Sequence[str] = ()) -> tuple[str, ...]:
    """The distinct phases in the order a trajectory visits them (repeats collapsed), leaving out ``skip``.

    Args:
        phases: the phase names at the checkpoints, in order.
        skip: names to drop before collapsing (e.g. ("none",): the k-gons only).

    Returns:
        e.g. ("none", "5-gon -", "6-gon").
    """
    for name, value in (("phases", phases), ("skip", skip)):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError(f"{name}: expected a sequence of phase names, got {value!r}")
    skip = {str(v) for v in skip}
    out: list[str] = []
    for p in phases:
        p = str(p)
        if p not in skip and (not out or out[-1] != p):
            out.append(p)
    return tuple(out)
