"""A 2-D loss-landscape slice of a ReLU MLP: slt_relu.landscape.slice_2d (one compiled program, chunked) against a
Python loop over a jitted single evaluation, same loss, same directions, same grid, one run.

Model: a ReLU MLP of widths 64-256-256-1 (D = 64*256 + 256 + 256*256 + 256 + 256 + 1 = 82,689 parameters,
weights ``w (n_out, n_in)`` and biases ``b (n_out,)``, He-initialised), float32, at a random point; data
n = 10,000 inputs x ~ N(0, I_64), targets from another random network of the same widths plus N(0, 0.1^2) noise;
loss: mean squared error.  Directions: two filter-normalised Gaussian directions (Li et al. 2018,
``slt_relu.landscape.random_direction``: each row of each weight rescaled to that row's norm, biases zero).
Grid: s, t in linspace(-1, 1, 51), 51 x 51 = 2,601 points:

    slice_2d:  L(params + s_i u + t_j v) for all (i, j), one compiled program (``jax.lax.map`` over chunks of
               points, vmapped inside a chunk; the default chunk), called twice: the first call's wall time
               includes compilation, the second is the run alone;
    loop:      for each (i, j): point_loss(params, u, v, s_i, t_j, data).block_until_ready(), point_loss the
               jitted single evaluation L(params + s u + t v) (s, t traced scalars: compiled once, before timing).

Run:

    .venv/bin/python benchmarks/bench_slice.py [--grid 51] [--n 10000] [--widths 64,256,256,1] [--chunk K]

(2.5 to 4 minutes on a 2-core CPU, three passes over the grid at about 1.65 GFLOP a point; --grid 11
--n 1000 for a smoke test).

Prints D, n and the grid, the wall times (slice_2d first call = compile + run, with its compilation time
from ``jax.monitoring``'s compile events; second call = run; the loop),
the ratio loop / slice_2d (second call), and the largest relative difference between the two surfaces
(float32 rounding where the batched and the single evaluations sum in different orders; none here at n = 10,000).
"""
from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from slt_relu.landscape import random_direction, slice_2d


def mlp(params, x):
    """f(x) = W_L relu(... relu(W_1 x + b_1) ...) + b_L for x (n, n_in) -> (n,)."""
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"].T + layer["b"])
    return (h @ params[-1]["w"].T + params[-1]["b"])[:, 0]


def mse(params, data):
    """Module-level (hashable) loss: mean (f(x) - y)^2."""
    x, y = data
    return jnp.mean((mlp(params, x) - y) ** 2)


@jax.jit
def point_loss(params, u, v, s, t, data):
    """L(params + s u + t v), one point: the loop's jitted single evaluation."""
    return mse(jax.tree.map(lambda p, a, b: p + s * a + t * b, params, u, v), data)


def init(rng, widths):
    return [{"w": jnp.asarray(rng.standard_normal((o, i)) * np.sqrt(2.0 / i), jnp.float32),
             "b": jnp.asarray(0.1 * rng.standard_normal(o), jnp.float32)} for i, o in zip(widths[:-1], widths[1:])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", type=int, default=51, help="points per axis")
    ap.add_argument("--n", type=int, default=10_000, help="data points")
    ap.add_argument("--widths", default="64,256,256,1", help="layer widths, input first, output 1")
    ap.add_argument("--chunk", type=int, default=None, help="slice_2d's points per chunk (default: its own)")
    args = ap.parse_args()
    widths = tuple(int(w) for w in args.widths.split(","))
    rng = np.random.default_rng(0)
    params, teacher = init(rng, widths), init(rng, widths)
    x = jnp.asarray(rng.standard_normal((args.n, widths[0])), jnp.float32)
    y = mlp(teacher, x) + jnp.asarray(0.1 * rng.standard_normal(args.n), jnp.float32)
    data = (x, y)
    D = sum(layer["w"].size + layer["b"].size for layer in params)
    ku, kv = jax.random.split(jax.random.PRNGKey(1))
    u, v = random_direction(ku, params), random_direction(kv, params)
    s = t = np.linspace(-1.0, 1.0, args.grid)
    print(f"ReLU MLP {'-'.join(map(str, widths))}: D = {D:,} parameters; n = {args.n:,}; float32; "
          f"grid {args.grid} x {args.grid} = {args.grid ** 2:,} points; {jax.devices()[0].platform} "
          f"({len(jax.devices())} device)")

    compile_events = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, secs, **kw: compile_events.append(secs) if name.startswith("/jax/core/compile/") else None)
    start = time.perf_counter()
    first = slice_2d(mse, params, data, u, v, s, t, chunk=args.chunk).block_until_ready()
    t_first = time.perf_counter() - start
    t_compile = sum(compile_events)
    start = time.perf_counter()
    surface = np.asarray(slice_2d(mse, params, data, u, v, s, t, chunk=args.chunk).block_until_ready())
    t_slice = time.perf_counter() - start
    assert np.array_equal(np.asarray(first), surface)

    s32, t32 = jnp.asarray(s, jnp.float32), jnp.asarray(t, jnp.float32)
    start = time.perf_counter()
    point_loss(params, u, v, s32[0], t32[0], data).block_until_ready()
    t_loop_compile = time.perf_counter() - start
    loop = np.empty((args.grid, args.grid), np.float32)
    start = time.perf_counter()
    for i in range(args.grid):
        for j in range(args.grid):
            loop[i, j] = point_loss(params, u, v, s32[i], t32[j], data).block_until_ready()
    t_loop = time.perf_counter() - start

    rel = np.max(np.abs(surface - loop) / np.abs(loop))
    print(f"{'':34s} {'wall s':>9s} {'ms / point':>10s}")
    print(f"{'slice_2d, first call (compile+run)':34s} {t_first:9.2f} {1e3 * t_first / args.grid ** 2:10.2f}")
    print(f"{'slice_2d, second call (run)':34s} {t_slice:9.2f} {1e3 * t_slice / args.grid ** 2:10.2f}")
    print(f"{'  of the first: compilation':34s} {t_compile:9.2f}   (tracing, lowering, XLA: jax.monitoring)")
    print(f"{'loop of jitted evaluations':34s} {t_loop:9.2f} {1e3 * t_loop / args.grid ** 2:10.2f}"
          f"   (its compilation {t_loop_compile:.2f} s, not counted)")
    print(f"ratio loop / slice_2d: {t_loop / t_slice:.2f}x (run only); {t_loop / t_first:.2f}x against the first call")
    print(f"max relative difference |slice - loop| / |loop|: {rel:.2e} (loss range {loop.min():.4g} .. "
          f"{loop.max():.4g}; at the centre {surface[args.grid // 2, args.grid // 2]:.6g})")


if __name__ == "__main__":
    sys.exit(main())
