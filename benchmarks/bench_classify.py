"""classify_phase on 10,000 posterior draws: the vectorised classifier against the per-draw loop it replaced, one run.

Draws: the 3-symmetric truth (DSLT4 PT2 at v = 1, width 3, inputs uniform on [-1, 1]^2) with every
coordinate perturbed by N(0, 0.03^2), 10,000 of them.  Rows: the loop that classified one draw at a
time until the phase-labels rebuild (its code is kept below, unchanged, as the baseline; fixed
tolerance 0.1, no population loss), and slt_relu.classify_phase in its resolution mode (n = 10,000,
sigma = 1: labels, K(w) exact on the box, distances), compiled beforehand, in float32 (the DSLT4
configs' dtype) and float64.

    .venv/bin/python benchmarks/bench_classify.py [--draws 10000]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

from slt_relu.phases import PhaseLabel  # noqa: F401  (the loop builds them)


# ----------------------------------------------------------------------------------------
# the baseline: the per-draw loop as it was (slt_relu/phases.py before the rebuild)


def loop_classify_one(w, b, q, c, h0, Q0, c0, tol, scale, half_width=None):
    d, n = w.shape
    m = len(Q0)
    eff = q[:, None] * w
    degenerate = np.linalg.norm(eff, axis=1) <= tol * scale
    dead = np.zeros(d, bool)
    linear = np.zeros(d, bool)
    if half_width is not None:                        # pre-activation range on [-a, a]^n: b +- a |w|_1
        reach = half_width * np.abs(w).sum(1)
        dead = ~degenerate & (b + reach <= 0)
        linear = ~degenerate & (b - reach >= 0)
    hb = np.concatenate([w, b[:, None]], 1)
    norm = np.linalg.norm(hb, axis=1)
    h = hb / np.where(norm > 0, norm, 1.0)[:, None]
    group = np.where(linear, -2, -1)
    orient = np.zeros(d)
    planes = {j: h0[j] for j in range(m)}
    for i in np.flatnonzero(~degenerate & ~dead & ~linear):
        plus = np.linalg.norm(h[i] - h0, axis=1)
        minus = np.linalg.norm(h[i] + h0, axis=1)
        j = int(np.argmin(np.minimum(plus, minus)))
        if min(plus[j], minus[j]) <= tol:
            group[i], orient[i] = j, (1.0 if plus[j] <= minus[j] else -1.0)
            continue
        for g in range(m, m + len(planes) - m):
            if np.linalg.norm(h[i] - planes[g]) <= tol:
                group[i], orient[i] = g, 1.0
                break
            if np.linalg.norm(h[i] + planes[g]) <= tol:
                group[i], orient[i] = g, -1.0
                break
        else:
            g = len(planes)
            planes[g] = h[i]
            group[i], orient[i] = g, 1.0
    truth_counts = tuple((int(np.sum((group == j) & (orient > 0))), int(np.sum((group == j) & (orient < 0))))
                         for j in range(m))
    hidden = tuple(sorted((tuple(sorted((int(np.sum((group == g) & (orient > 0))),
                                          int(np.sum((group == g) & (orient < 0)))), reverse=True))
                           for g in range(m, len(planes))), reverse=True))
    label = PhaseLabel(truth_counts, hidden, int(degenerate.sum() + dead.sum()), int(linear.sum()))
    # distance: effective vectors v_i = q_i (w_i, b_i) against e_i s_i h_g, plus the linear constraints;
    # a node inactive on the box contributes nothing there, a linear node its own linear function
    c_eff = c + float(np.sum(q[degenerate] * np.maximum(b[degenerate], 0.0)))
    live = np.flatnonzero(group >= 0)
    lin_nodes = np.flatnonzero(linear)
    groups = sorted(set(group[live].tolist()))
    unit = {g: (np.mean([orient[i] * h[i] for i in live if group[i] == g], 0) if g >= m else h0[g]) for g in groups}
    unit = {g: u / np.linalg.norm(u) for g, u in unit.items()}
    V = q[live, None] * hb[live]
    a = np.array([orient[i] * (V[k] @ unit[group[i]]) for k, i in enumerate(live)])
    along = np.array([orient[i] * unit[group[i]] for i in live]).reshape(len(live), n + 1)
    perp2 = float(np.sum((V - a[:, None] * along) ** 2)) + float(np.sum(eff[degenerate] ** 2))
    K, L = len(live), len(lin_nodes)
    width = K + 1 + L * (n + 1)                       # unknowns: kinks a (K), c, linear nodes' v_i
    rows, rhs = [], []
    for g in list(range(m)) + [g for g in groups if g >= m]:
        row = np.zeros(width)
        row[:K] = group[live] == g
        rows.append(row)
        rhs.append(Q0[g] if g < m else 0.0)
    lin = np.zeros((n + 1, width))
    for k, i in enumerate(live):
        if orient[i] < 0:
            lin[:, k] = unit[group[i]]
    lin[n, K] = -1.0                                  # sum_rev e h_g - sum_lin v_i - c e_n = -c0 e_n
    for k in range(L):
        lin[:, K + 1 + k * (n + 1): K + 1 + (k + 1) * (n + 1)] = -np.eye(n + 1)
    if not any(g >= m and np.any(orient[live][group[live] == g] < 0) for g in groups):
        rows += list(lin)                             # a hidden group with both sides can turn to carry any
        rhs += [0.0] * n + [-c0]                      # linear part: then these equations are dropped
    M, t = np.array(rows), np.array(rhs)
    x0 = np.concatenate([a, [c_eff], (q[lin_nodes, None] * hb[lin_nodes]).reshape(-1)])
    corr = np.linalg.lstsq(M, t - M @ x0, rcond=None)[0]
    if np.linalg.norm(M @ (x0 + corr) - t) > 1e-8 * max(scale, 1.0):
        return label, np.inf, group, orient
    return label, float(np.sqrt(perp2 + corr @ corr)), group, orient


def loop_classify(w, b, q, c, truth, tol=0.1):
    from slt_relu.phases import check_truth

    h0, Q0 = check_truth(truth)
    q0 = np.asarray(truth.q, np.float64)
    scale = float(np.min(np.abs(q0) * np.linalg.norm(np.asarray(truth.w, np.float64), axis=1)))
    return [loop_classify_one(w[k], b[k], q[k], c[k], h0, Q0, float(truth.c), tol, scale) for k in range(len(c))]


def run(x64: bool, draws: int):
    import jax

    jax.config.update("jax_enable_x64", x64)
    import slt_relu as S

    truth = S.truths.dslt4_pt2(1.0)
    box = S.UniformBox(1.0, 2)
    flat = S.to_flat(truth) + 0.03 * jax.random.normal(jax.random.PRNGKey(0), (draws, 13))
    params = jax.vmap(lambda f: S.from_flat(f, 3, 2))(flat)
    S.classify_phase(params, truth, n=10000, inputs=box)                     # compile
    start = time.time()
    got = S.classify_phase(params, truth, n=10000, inputs=box)
    return time.time() - start, got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=10000)
    ap.add_argument("--worker", choices=["32", "64"])
    args = ap.parse_args()
    if args.worker:
        wall, got = run(args.worker == "64", args.draws)
        print(f"{wall:.4f} {np.mean([str(lab) == '+ + +' for lab in got.label]):.4f}")
        return
    import jax

    jax.config.update("jax_enable_x64", True)
    import slt_relu as S

    truth = S.truths.dslt4_pt2(1.0)
    flat = np.asarray(S.to_flat(truth)) + 0.03 * np.asarray(jax.random.normal(jax.random.PRNGKey(0), (args.draws, 13)))
    w, b, q, c = flat[:, :6].reshape(-1, 3, 2), flat[:, 6:9], flat[:, 9:12], flat[:, 12]
    start = time.time()
    old = loop_classify(w, b, q, c, truth)
    loop = time.time() - start
    share = np.mean([str(lab) == "+ + +" for lab, *_ in old])
    print(f"{args.draws} draws, width 3, PT2 truth at v = 1; share labelled '+ + +' in parentheses")
    print(f"{'per-draw loop (fixed tol 0.1, no K)':44s} {loop:8.3f} s  1.00x  ({share:.3f})")
    for bits in ("32", "64"):
        out = subprocess.run([sys.executable, __file__, "--draws", str(args.draws), "--worker", bits],
                             capture_output=True, text=True, check=True).stdout.split()
        wall, frac = float(out[0]), float(out[1])
        print(f"{'classify_phase, n = 10,000 (labels, K, dist.), float' + bits:44s} {wall:8.3f} s  "
              f"{loop / wall:5.1f}x ({frac:.3f})")


if __name__ == "__main__":
    main()
