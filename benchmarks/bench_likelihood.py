"""Gradients of the two-layer likelihood per second: the fused L_n (slt_relu.fused) against
``jax.vmap(jax.grad(L))`` of the plain formula, and both against the machine's peak, in one run.

For P particles sharing one data set of n points (DSLT4's network: d = 2 nodes, n_in = 2 inputs, float32 by
default), each program evaluates L_n and its gradient at every particle (``jax.vmap`` over the particles,
in ``lax.map`` chunks of at most 2^24 / n particles so that memory stays bounded, as the samplers' chunks
do).  "before" is the formula the samplers differentiated before the fused likelihood,
``gaussian_nll(y - forward_columns(params, x_cols))`` under ``jax.value_and_grad``; "after" is
:func:`slt_relu.fused.two_layer_nll`.  The peak is measured in the same run: a jitted chain of
multiply-adds on an array that stays in cache (FMA-bound, what this JAX and this CPU or GPU can execute),
in floating-point operations per second; a program's fraction of peak is its gradients per second x n x
``two_layer_nll_flops(d, n_in)`` (37 for d = n_in = 2) / the peak.  Each time is the best of repeated
calls after one compiling call.

    .venv/bin/python benchmarks/bench_likelihood.py [--particles 16 64 256 1024 4096] [--n 1000 10000 100000]
        [--dtype float32] [--seconds 0.5]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from slt_relu.fused import two_layer_nll, two_layer_nll_flops
from slt_relu.loss import gaussian_nll
from slt_relu.network import TwoLayer, forward_columns

CHUNK_POINTS = 2 ** 24       # particles x data points one lax.map chunk holds at most


def plain(params, x_cols, y):
    """L_n as the samplers wrote it before the fused likelihood (sigma = 1)."""
    return gaussian_nll(y - forward_columns(params, x_cols), 1.0)


def best_time(fn, *args, seconds: float) -> float:
    """The shortest wall time of fn(*args) over repeated calls for about ``seconds`` (after a compiling call)."""
    jax.block_until_ready(fn(*args))
    best, spent = float("inf"), 0.0
    while spent < seconds or best == float("inf"):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
    return best


def peak_flops(dtype, seconds: float, size: int = 2 ** 15, chain: int = 256) -> float:
    """Floating-point operations per second of a multiply-add chain (2 flops each) on ``size`` elements
    that stay in cache: ``chain`` dependent a = a * s + t per element, unrolled into one fused loop."""
    s, t = jnp.asarray(0.999, dtype), jnp.asarray(1e-3, dtype)

    @jax.jit
    def fma(a):
        for _ in range(chain):
            a = a * s + t
        return a

    a = jnp.linspace(0.0, 1.0, size, dtype=dtype)
    return 2.0 * chain * size / best_time(fma, a, seconds=seconds)


def program(loss, P: int, n: int):
    """(params (P, ...), x_cols, y) -> (values (P,), gradients), P particles in chunks of <= 2^24 / n."""
    chunk = max(1, min(P, CHUNK_POINTS // n))
    value_and_grad = jax.value_and_grad(loss)
    return jax.jit(lambda ps, x, y: jax.lax.map(lambda p: value_and_grad(p, x, y), ps, batch_size=chunk))


def problem(P: int, n: int, dtype, d: int = 2, n_in: int = 2):
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    params = TwoLayer(jax.random.normal(k[0], (P, d, n_in), dtype), jax.random.normal(k[1], (P, d), dtype),
                      jax.random.normal(k[2], (P, d), dtype), jax.random.normal(k[3], (P,), dtype))
    return params, jax.random.normal(k[4], (n_in, n), dtype), jax.random.normal(k[5], (n,), dtype)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--particles", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--seconds", type=float, default=0.5, help="timing budget per program (best of repeats)")
    args = ap.parse_args(argv)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    dtype = jnp.dtype(args.dtype)
    peak = peak_flops(dtype, args.seconds)
    flops = two_layer_nll_flops(2, 2)
    print(f"two-layer L_n and gradient, d = 2, n_in = 2, {args.dtype}, {jax.devices()[0].platform} "
          f"({jax.devices()[0].device_kind}); peak (multiply-add chain) {peak / 1e9:.1f} GFLOP/s; "
          f"{flops} flops per point per gradient")
    print(f"{'n':>7} {'particles':>9} {'before grads/s':>15} {'after grads/s':>14} {'after/before':>12} "
          f"{'before % peak':>13} {'after % peak':>12}")
    rows = []
    for n in args.n:
        for P in args.particles:
            params, x, y = problem(P, n, dtype)
            rates = {}
            for name, loss in (("before", plain), ("after", two_layer_nll)):
                rates[name] = P / best_time(program(loss, P, n), params, x, y, seconds=args.seconds)
            frac = {k: v * n * flops / peak for k, v in rates.items()}
            rows.append(dict(n=n, particles=P, before=rates["before"], after=rates["after"],
                             ratio=rates["after"] / rates["before"], before_peak=frac["before"],
                             after_peak=frac["after"]))
            print(f"{n:>7} {P:>9} {rates['before']:>15,.0f} {rates['after']:>14,.0f} "
                  f"{rates['after'] / rates['before']:>12.2f} {100 * frac['before']:>12.1f}% "
                  f"{100 * frac['after']:>11.1f}%", flush=True)
    return dict(peak_flops=peak, rows=rows)


if __name__ == "__main__":
    main()
