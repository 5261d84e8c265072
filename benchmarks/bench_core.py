"""K(w) and the Fisher rank at 4096 parameter points: batched JAX (jit + vmap) vs plain NumPy.

Both compute the same math on the same quadrature rule (the NumPy side rebuilds the rule per
point exactly as slt_relu.inputs does), in the same run; the script checks that the numbers
agree and prints the wall-time ratio.  Cases: n_in = 1 (exact breakpoint-split rule, the DSLT3
examples), n_in = 2 on the uniform box (exact trapezoid rule) and n_in = 2 Gaussian (tensor rule).

    .venv/bin/python benchmarks/bench_core.py [--points 4096] [--cells 32]
"""
from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import slt_relu as S  # noqa: E402
from slt_relu.loss import map_params  # noqa: E402


def numpy_box_rule_2d(a, nets):
    """slt_relu.inputs.box_rule_2d in NumPy: slabs between line crossings, trapezoids, 2 x 2 Gauss."""
    W = np.concatenate([n[0] for n in nets])
    B = np.concatenate([n[1] for n in nets])
    i, j = np.triu_indices(len(B), 1)
    with np.errstate(all="ignore"):
        det = W[i, 0] * W[j, 1] - W[i, 1] * W[j, 0]
        xc = (W[i, 1] * B[j] - W[j, 1] * B[i]) / det
        xe = np.concatenate([-(B + W[:, 1] * a) / W[:, 0], -(B - W[:, 1] * a) / W[:, 0]])
        xs = np.concatenate([[-a, a], xc, xe])
        xs = np.sort(np.clip(np.where(np.isfinite(xs), xs, -a), -a, a))
        x0, x1 = xs[:-1], xs[1:]

        line_y = lambda x: -(W[:, 0] * x[:, None] + B) / W[:, 1]
        xm = (x0 + x1) / 2
        ym = line_y(xm)
        inside = np.isfinite(ym) & (np.abs(ym) < a)
        out = np.clip(np.where(np.isfinite(ym), ym, -a), -a, a)
        y0 = np.where(inside, np.clip(line_y(x0), -a, a), out)
        y1 = np.where(inside, np.clip(line_y(x1), -a, a), out)
    e = np.full((len(x0), 1), a)
    order = np.argsort(np.concatenate([-e, np.where(inside, ym, out), e], 1), 1)
    y0 = np.take_along_axis(np.concatenate([-e, y0, e], 1), order, 1)
    y1 = np.take_along_axis(np.concatenate([-e, y1, e], 1), order, 1)
    g = 1 / np.sqrt(3)
    xm, hx = (x0 + x1) / 2, (x1 - x0) / 2
    pts, wts = [], []
    for sx in (-g, g):
        f = (1 + sx) / 2
        x = xm + hx * sx
        y = (1 - f) * y0 + f * y1
        lo, hi = y[:, :-1], y[:, 1:]
        for sy in (-g, g):
            yy = (lo + hi) / 2 + (hi - lo) / 2 * sy
            pts.append(np.stack([np.broadcast_to(x[:, None], yy.shape), yy], -1).reshape(-1, 2))
            wts.append((hx[:, None] * np.maximum(hi - lo, 0) / 2).ravel() / (4 * a * a))
    return np.concatenate(pts), np.concatenate(wts)


def numpy_rule(dist, p, t):
    """The same rule as slt_relu.inputs.expectation_rule, in NumPy."""
    lo, hi = dist.support()
    if dist.n_in == 2 and isinstance(dist, S.UniformBox):
        return numpy_box_rule_2d(dist.half_width, [p, t])
    if dist.n_in == 1:
        bps = []
        for net in (p, t):
            w, b = net[0][:, 0], net[1]
            bps += [(-bi / wi if wi != 0 else lo) for wi, bi in zip(w, b)]
        edges = np.sort(np.concatenate([[lo, hi], np.clip(bps, lo, hi)]))
        order = 3
    else:
        edges = np.linspace(lo, hi, dist.cells + 1)
        order = dist.order
    tt, gg = np.polynomial.legendre.leggauss(order)
    mid, half = (edges[:-1] + edges[1:]) / 2, (edges[1:] - edges[:-1]) / 2
    x = (mid[:, None] + half[:, None] * tt).ravel()
    if isinstance(dist, S.UniformBox):
        wts = (half[:, None] * gg).ravel() / (2 * dist.half_width)
    else:
        wts = (half[:, None] * gg).ravel() * np.exp(-0.5 * (x / dist.std) ** 2) / (dist.std * np.sqrt(2 * np.pi))
    if dist.n_in == 1:
        return x[:, None], wts
    X = np.stack(np.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)
    return X, (wts[:, None] * wts[None, :]).ravel()


def numpy_forward(p, x):
    w, b, q, c = p
    return c + np.maximum(x @ w.T + b, 0) @ q


def numpy_k_and_rank(p, t, dist, sigma=1.0):
    x, wts = numpy_rule(dist, p, t)
    K = np.sum(wts * (numpy_forward(p, x) - numpy_forward(t, x)) ** 2) / (2 * sigma**2)
    if dist.n_in == 1:
        xr, wr = numpy_rule(dist, p, p)
    elif isinstance(dist, S.UniformBox):
        xr, wr = numpy_box_rule_2d(dist.half_width, [p])
    else:
        xr, wr = x, wts
    w, b, q, c = p
    a = xr @ w.T + b
    on = (a > 0).astype(float)
    J = np.concatenate([((q * on)[:, :, None] * xr[:, None, :]).reshape(len(xr), -1), q * on, np.maximum(a, 0),
                        np.ones((len(xr), 1))], axis=1)
    s = np.linalg.svd(np.sqrt(wr)[:, None] * J / sigma, compute_uv=False) ** 2
    D = J.shape[1]
    return K, int(np.sum(s > D * np.finfo(float).eps * s.max()))


def run_case(name, truth, dist, width, points):
    key = jax.random.PRNGKey(0)
    flats = jax.random.normal(key, (points, S.num_params(width, dist.n_in)))
    fn = lambda p: (S.population_loss(p, truth, dist), S.fisher_rank(p, dist))
    t0 = time.perf_counter()
    jax.block_until_ready(map_params(fn, flats, width, dist.n_in, chunk=512))
    compile_and_run = time.perf_counter() - t0
    t0 = time.perf_counter()
    K_jax, r_jax = jax.block_until_ready(map_params(fn, flats, width, dist.n_in, chunk=512))
    t_jax = time.perf_counter() - t0

    tn = tuple(np.asarray(a) for a in truth)
    flats_np = np.asarray(flats)
    t0 = time.perf_counter()
    out = [numpy_k_and_rank(tuple(np.asarray(a) for a in S.from_flat(f, width, dist.n_in)), tn, dist) for f in flats_np]
    t_np = time.perf_counter() - t0
    K_np = np.array([o[0] for o in out])
    r_np = np.array([o[1] for o in out])
    assert np.allclose(K_np, K_jax, rtol=1e-9, atol=1e-12), "K disagrees"
    agree = float(np.mean(r_np == np.asarray(r_jax)))
    print(f"{name}: {points} points, width {width}, n_in {dist.n_in}")
    print(f"  numpy loop     {t_np:8.3f} s")
    print(f"  jax jit+vmap   {t_jax:8.3f} s   (first call incl. compile {compile_and_run:.2f} s)")
    print(f"  ratio numpy / jax = {t_np / t_jax:.1f}x   (ranks agree at {agree:.4f} of points)")
    return t_np / t_jax


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=4096)
    ap.add_argument("--cells", type=int, default=32, help="cells per axis of the n_in = 2 Gaussian tensor rule")
    args = ap.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()}")
    ex = S.truths.get("dslt3_example_3_3")
    run_case("n_in = 1, exact rule (Example 3.3 truth)", ex.truth, S.UniformBox(2.0, 1), 3, args.points)
    run_case("n_in = 2, uniform box, exact trapezoid rule (3-symmetric truth)", S.truths.m_symmetric(3),
             S.UniformBox(1.0, 2), 3, args.points)
    run_case("n_in = 2, Gaussian, tensor rule (3-symmetric truth)", S.truths.m_symmetric(3),
             S.Gaussian(1.0, 2, args.cells), 3, args.points)


if __name__ == "__main__":
    main()
