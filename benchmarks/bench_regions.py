"""Activation patterns on a grid and the functional dimension: batched JAX vs plain NumPy, one run.

Cases (the issue's): activation patterns of a width-64, 3-hidden-layer network (2, 64, 64, 64, 1)
on a 1000 x 1000 grid of [-1, 1]^2, and the functional dimension of (10, 10, 10, 10, 1) on 2,000
Gaussian points.  The NumPy side computes the same math: the pattern by layer-wise matrix products
(already vectorised over points, as one would write it in NumPy), and the parameter Jacobian by a
hand-written backward pass per point followed by numpy.linalg.svd.  The script checks that the
results agree and prints the wall-time ratios (JAX timed after one warm-up call that compiles).

    .venv/bin/python benchmarks/bench_regions.py [--grid 1000] [--points 2000]
"""
from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import slt_relu as S  # noqa: E402
from slt_relu.mlp import activation_patterns  # noqa: E402
from slt_relu.regions import functional_dimension_bound, parameter_jacobian  # noqa: E402


def numpy_patterns(layers, x):
    h, out = x, []
    for w, b in layers[:-1]:
        z = h @ w.T + b
        out.append(z > 0)
        h = np.maximum(z, 0.0)
    return np.concatenate(out, 1)


def numpy_param_jacobian(layers, points):
    """d f(z) / d theta per point by a backward pass (flatten_mlp order: per layer w row-major, then b)."""
    rows = []
    for z in points:
        hs, masks, h = [z], [], z
        for w, b in layers[:-1]:
            pre = w @ h + b
            masks.append(pre > 0)
            h = np.maximum(pre, 0.0)
            hs.append(h)
        grads = []
        delta = np.ones(1)                          # d f / d (output pre-activation)
        for k in range(len(layers) - 1, -1, -1):
            w, _ = layers[k]
            grads.append(np.concatenate([np.outer(delta, hs[k]).reshape(-1), delta]))
            if k:
                delta = (w.T @ delta) * masks[k - 1]
        rows.append(np.concatenate(grads[::-1]))
    return np.array(rows)


def timed(fn, repeat=1):
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - start) / repeat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, default=1000)
    ap.add_argument("--points", type=int, default=2000)
    args = ap.parse_args()

    net = S.init_mlp(jax.random.PRNGKey(0), (2, 64, 64, 64, 1), bias_std=0.3)
    layers = [(np.asarray(l.w), np.asarray(l.b)) for l in net.layers]
    g = np.linspace(-1, 1, args.grid)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    jit_patterns = jax.jit(activation_patterns)
    gx = jax.numpy.asarray(grid)
    jit_patterns(net, gx).block_until_ready()
    pj, tj = timed(lambda: np.asarray(jit_patterns(net, gx).block_until_ready()), 3)
    pn, tn = timed(lambda: numpy_patterns(layers, grid), 3)
    assert np.array_equal(pj, pn)
    regions = len(np.unique(np.packbits(pj, axis=1), axis=0))
    print(f"activation patterns, (2, 64, 64, 64, 1) on a {args.grid} x {args.grid} grid ({regions} regions): "
          f"NumPy {tn:.3f} s, JAX {tj:.3f} s, ratio {tn / tj:.1f}x")

    widths = (10, 10, 10, 10, 1)
    net = S.init_mlp(jax.random.PRNGKey(1), widths, bias_std=0.1)
    layers = [(np.asarray(l.w), np.asarray(l.b)) for l in net.layers]
    z = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (args.points, 10)))
    S.functional_dimension(net, z)
    dj, tj = timed(lambda: S.functional_dimension(net, z), 3)

    def numpy_dim():
        J = numpy_param_jacobian(layers, z)
        s = np.linalg.svd(J, compute_uv=False)
        return int(np.sum(s > max(J.shape) * np.finfo(float).eps * s[0])), J

    (dn, Jn), tn = timed(numpy_dim)
    np.testing.assert_allclose(Jn, np.asarray(parameter_jacobian(net, z)), atol=1e-10)
    assert dj == dn
    print(f"functional dimension, {widths} on {args.points} points (dim {dj}, bound "
          f"{functional_dimension_bound(widths)}): NumPy {tn:.3f} s, JAX {tj:.3f} s, ratio {tn / tj:.1f}x")


if __name__ == "__main__":
    main()
