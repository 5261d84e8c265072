"""The local learning coefficient of a ReLU MLP along its training on real data, per layer: scikit-learn's 8x8
digits (offline), a 64-32-32-10 MLP trained by Adam on the softmax cross-entropy, and at log-spaced checkpoints

    lambda_hat(w*) = n beta (E[L_n(w)] - L_n(w*)),  p(w) proportional to exp(-n beta L_n(w) - (gamma/2) |w - w*|^2),

n beta = n / log n, L_n the mean cross-entropy on the n training digits, by RMSProp-preconditioned SGLD on
mini-batches of 128 at the settings ``slt_relu.choose_llc_settings`` picks (with a MALA acceptance of at least 0.9:
the default 0.999 is for a few parameters; the rejections of D = 3,466 directions add up) at the final checkpoint (all parameters free), for the whole network and
for each layer alone (``restrict``: the other layers held at the checkpoint), every checkpoint in one compiled
program per restriction (``slt_relu.llc_at_checkpoints``), beside the training and test losses.

    .venv/bin/python benchmarks/llc_digits_training.py [--figure llc_digits.png] [--steps 3000] [--checkpoints 10]

Prints the chosen settings with the chooser's reasons, then a row per checkpoint: step, training loss, test loss,
test accuracy, and lambda_hat +- se for the network and per layer; the layers' sum beside the whole (the
restricted LLCs need not add up: the layers interact); the wall time.  Before training nears a minimum the estimate
is negative (the chains find lower loss than at w*, which is no local minimum there): read the curve from there on.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import slt_relu as S
from slt_relu.datasets import load_digits
from slt_relu.mlp import MLP, Dense, init_mlp, mlp_forward

WIDTHS = (64, 32, 32, 10)


def cross_entropy(params, data):
    """L_n: the mean softmax cross-entropy of the logits at the data (x (n, 64), y (n,) integer labels)."""
    x, y = data
    logits = mlp_forward(params, x)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))


def train(key, x, y, steps: int, checkpoints: int, learning_rate: float = 3e-3, batch: int = 64):
    """Adam on mini-batches; the parameters at log-spaced steps (0 included), stacked along a leading axis."""
    k_init, k_batch = jax.random.split(key)
    params = init_mlp(k_init, WIDTHS, dtype=x.dtype)
    opt = optax.adam(learning_rate)
    at = np.unique(np.concatenate([[0], np.geomspace(10, steps, checkpoints - 1).astype(int)]))

    @jax.jit
    def run(params, state, keys):
        def step(carry, k):
            p, s = carry
            idx = jax.random.choice(k, x.shape[0], (batch,), replace=False)
            g = jax.grad(cross_entropy)(p, (x[idx], y[idx]))
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), None
        return jax.lax.scan(step, (params, state), keys)[0]

    state, saved, done = opt.init(params), [], 0
    keys = jax.random.split(k_batch, steps)
    for t in at:
        if t > done:
            params, state = run(params, state, keys[done:t])
            done = t
        saved.append(params)
    return at, jax.tree.map(lambda *a: jnp.stack(a), *saved)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--checkpoints", type=int, default=10)
    ap.add_argument("--figure", default=None)
    args = ap.parse_args()
    start = time.time()
    d = load_digits(key=0)
    x, y = jnp.asarray(d.x_train, jnp.float32), jnp.asarray(d.y_train)
    xt, yt = jnp.asarray(d.x_test, jnp.float32), jnp.asarray(d.y_test)
    steps, ckpts = train(jax.random.PRNGKey(0), x, y, args.steps, args.checkpoints)
    B = steps.size
    last = jax.tree.map(lambda a: a[-1], ckpts)
    settings, why = S.choose_llc_settings(jax.random.PRNGKey(1), cross_entropy, last, (x, y),
                                          S.LLCSettings(num_chains=4, preconditioner="rmsprop", num_burnin=100,
                                                        batch_size=128),
                                          localizations=(300.0, 100.0, 30.0), pilot_steps=1000, target_ess=200,
                                          min_accept=0.9, max_steps=8000)
    print(f"digits: n = {x.shape[0]} training, {xt.shape[0]} test; MLP {'-'.join(map(str, WIDTHS))}, "
          f"{sum(a[0].size for a in jax.tree.leaves(ckpts))} parameters; {B} checkpoints")
    print("settings:", {k: getattr(settings, k) for k in ("step_size", "localization", "num_steps", "num_burnin",
                                                         "num_chains")})
    for r in why.reasons:
        print("  ", r)
    layers = len(WIDTHS) - 1
    restricts = {"all": None}
    for k in range(layers):                    # layer k free (True), the others held at the checkpoint
        restricts[f"layer {k + 1}"] = MLP(tuple(Dense(np.full(L.w.shape, j == k), np.full(L.b.shape, j == k))
                                                for j, L in enumerate(last.layers)))
    keys = jax.random.split(jax.random.PRNGKey(2), B)
    curves = {name: S.llc_at_checkpoints(keys, cross_entropy, ckpts, (x, y), settings, restrict=r)
              for name, r in restricts.items()}
    train_loss = np.asarray(jax.vmap(lambda p: cross_entropy(p, (x, y)))(ckpts))
    test_loss = np.asarray(jax.vmap(lambda p: cross_entropy(p, (xt, yt)))(ckpts))
    test_acc = np.asarray(jax.vmap(lambda p: jnp.mean(jnp.argmax(mlp_forward(p, xt), 1) == yt))(ckpts))
    head = f"{'step':>6} {'train':>7} {'test':>7} {'acc':>6} " + " ".join(f"{n:>15}" for n in curves) + \
        f" {'sum of layers':>13} {'MALA*':>6}"
    print(head)
    for b in range(B):
        cells = " ".join(f"{c.estimate[b]:8.2f} +- {c.se[b]:4.2f}" for c in curves.values())
        total = sum(curves[f"layer {k + 1}"].estimate[b] for k in range(layers))
        print(f"{steps[b]:6d} {train_loss[b]:7.4f} {test_loss[b]:7.4f} {test_acc[b]:6.3f} {cells} {total:13.2f} "
              f"{curves['all'].accept_prob[b]:6.3f}")
    print("* the whole's mean MALA acceptance on mini-batches: U at both ends of a step on different batches, so not the "
          "step's bias (the chooser's full-batch pilots measure that)")
    print(f"wall time {time.time() - start:.1f} s (JAX {jax.__version__}, {jax.default_backend()})")
    if args.figure:
        from slt_relu.plots import save_figure
        from slt_relu.plots._style import subplots

        fig, axes = subplots(1, 2, figsize=(12, 4.5))
        for name, c in curves.items():
            axes[0].errorbar(np.maximum(steps, 1), c.estimate, yerr=2 * c.se, marker="o", capsize=2, label=name)
        axes[1].plot(np.maximum(steps, 1), train_loss, "o-", label="training loss")
        axes[1].plot(np.maximum(steps, 1), test_loss, "s-", label="test loss")
        for ax, ylab in ((axes[0], "lambda_hat (+- 2 se)"), (axes[1], "cross-entropy")):
            ax.set_xscale("log")
            ax.set_xlabel("training step (step 0 drawn at 1)")
            ax.set_ylabel(ylab)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
        axes[1].set_yscale("log")
        axes[0].set_yscale("symlog", linthresh=1.0)       # negative before the network nears a minimum
        fig.suptitle("Digits MLP 64-32-32-10: the local learning coefficient along training, whole and per layer",
                     fontsize=9)
        save_figure(fig, args.figure)


if __name__ == "__main__":
    main()
