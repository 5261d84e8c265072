"""Hessian spectra and loss slices of a ReLU MLP: PyHessian 0.1 and loss-landscapes 3.0.6 (PyTorch) beside
slt_relu.hessian and slt_relu.landscape (JAX) on the same network, data, loss and directions, with the dense
Hessian (float64 eigh) as the arbiter, one run.

Network: a ReLU MLP 10-32-32-1 (D = 10*32 + 32 + 32*32 + 32 + 32 + 1 = 1,441 parameters), He-initialised weights
drawn in NumPy (float32) and loaded into both frameworks (PyTorch's ``Linear.weight`` is (out, in), as the JAX
side's ``w``; no transpose), at that random point; data n = 1,000, x ~ N(0, I_10), y from another random network
of the same widths plus N(0, 0.1^2) noise; loss: mean squared error, ``torch.nn.MSELoss()`` = mean (f(x) - y)^2.

Quantities (each side at its library's defaults unless stated):

- the top-5 Hessian eigenvalues: PyHessian ``hessian.eigenvalues(top_n=5)`` (power iteration with deflation,
  maxIter 100, tol 1e-3) against ``slt_relu.hessian.top_eigenvalues(k=5)`` (Lanczos, 2k + 20 = 30 steps, full
  reorthogonalisation), each against the dense eigenvalues (relative difference);
- the trace: PyHessian ``trace()`` (Hutchinson, Rademacher probes, up to 100 of them, stopping when the running mean
  moves by less than 1e-3 relatively) against ``slt_relu.hessian.trace(num_samples=100)``: each estimate's distance
  from the dense tr H in its own standard errors, sd / sqrt(probes);
- the spectral density, by stochastic Lanczos quadrature, 10 probes x 50 Lanczos steps on both sides
  (PyHessian ``density(iter=50, n_v=10)``, ``slt_relu.hessian.spectral_density(num_probes=10, num_steps=50)``):
  the moments (1/P) sum_pj w_pj theta_pj^q, q = 1, 2, against tr(H)/D and tr(H^2)/D from the dense spectrum (z: in
  standard errors over the probes);
- a 1-D and a 2-D slice along the same two filter-normalised directions u, v (``slt_relu.landscape.random_direction``,
  saved and loaded into PyTorch): loss-landscapes ``linear_interpolation(params - u, params + u, steps=51)`` (its
  points t = -1 + 2 (i + 1) / 51, i = 0..50) against ``slice_1d`` at the same t, and ``planar_interpolation(params - u
  - v, params + u - v, params - u + v, steps=25)`` against ``slice_2d``; also a direct PyTorch loop
  (``torch.func.functional_call`` at each point of the documented 25 x 25 grid) as a second PyTorch baseline.
  loss-landscapes 3.0.6's planar loop (``planar_interpolation`` and ``random_plane``) walks rows alternately up and
  down and evaluates after each step, so even rows i hold the offsets (j + 1) of the second direction, j = 0..24, and
  odd rows j (its docstring: j for every row); the table gives the relative difference against both readings.

Times: PyTorch wall seconds over slt_relu's compiled call (each the least of 3 runs, on a shared machine; the
ratio with slt_relu's first call, compilation included, in brackets); torch on one intra-op thread, its fastest
setting for these small matrices (on a shared 2-core CPU two threads spin-waited: PyHessian's probes ran 3.7x
slower), JAX as it comes.  PyHessian's ``density`` calls ``torch.eig``, removed from PyTorch in 1.13
(pytorch/pytorch#70982; the oldest PyTorch with wheels for Python 3.11 is 1.13.0, so none works here): the worker
defines ``torch.eig`` for the symmetric tridiagonal T from ``torch.linalg.eigh`` (same values and vectors, in its
old (n, 2) real/imaginary layout), in its own process only; PyHessian's code is not changed.

PyHessian and loss-landscapes run in their own environment (never a dependency of slt_relu), made with
benchmarks/requirements-landscape.txt; this script calls it as a subprocess:

    python3 -m venv benchmarks/.venv-landscape
    benchmarks/.venv-landscape/bin/pip install -r benchmarks/requirements-landscape.txt
    .venv/bin/python benchmarks/bench_landscape_pytorch.py

(about a minute on a 2-core CPU).  Without that environment it prints the JAX side and the dense values alone.

Prints one table: quantity, dense value, PyHessian / loss-landscapes value, slt_relu value, the agreement of each
with the dense value or with each other (relative difference, or z in standard errors), and the time ratio
PyTorch / JAX.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LANDSCAPE_PYTHON = ROOT / "benchmarks" / ".venv-landscape" / "bin" / "python"
WIDTHS = (10, 32, 32, 1)
N = 1000
TOP_K = 5
TRACE_PROBES = 100
SLQ_PROBES, SLQ_STEPS = 10, 50
STEPS_1D, STEPS_2D = 51, 25
REPEATS = 3                  # each time the least of 3 runs (a shared machine); values from the first run


def make_problem(seed: int = 0) -> dict:
    """Weights (PyTorch layout: w (out, in), b (out,)), data, float32 NumPy."""
    rng = np.random.default_rng(seed)

    def init():
        return [(rng.standard_normal((o, i)) * np.sqrt(2.0 / i), 0.1 * rng.standard_normal(o))
                for i, o in zip(WIDTHS[:-1], WIDTHS[1:])]

    params, teacher = init(), init()
    x = rng.standard_normal((N, WIDTHS[0]))
    h = x
    for w, b in teacher[:-1]:
        h = np.maximum(h @ w.T + b, 0)
    y = h @ teacher[-1][0].T + teacher[-1][1] + 0.1 * rng.standard_normal((N, 1))
    out = {"x": x, "y": y}
    for k, (w, b) in enumerate(params):
        out[f"w{k}"], out[f"b{k}"] = w, b
    return {key: np.asarray(a, np.float32) for key, a in out.items()}


# ----------------------------------------------------------------------------------------------------------------
# the PyTorch side (runs inside benchmarks/.venv-landscape)


def torch_worker(npz: str, out_json: str) -> None:
    import loss_landscapes
    import pyhessian
    import torch
    from loss_landscapes.metrics import Loss

    torch.set_num_threads(1)     # its fastest here: 2 intra-op threads ran 3.7x slower on a shared 2-core CPU
    torch.manual_seed(0)
    z = np.load(npz)
    layers = len(WIDTHS) - 1

    def eig(A, eigenvectors=False):                    # torch.eig's old API for a symmetric A (module docstring)
        w, V = torch.linalg.eigh(A)
        return torch.stack([w, torch.zeros_like(w)], 1), (V if eigenvectors else torch.empty(0))
    torch.eig = eig

    def model_at(offset=None):
        mods = []
        for k in range(layers):
            lin = torch.nn.Linear(WIDTHS[k], WIDTHS[k + 1])
            with torch.no_grad():
                w, b = z[f"w{k}"].copy(), z[f"b{k}"].copy()
                if offset is not None:
                    w, b = w + offset[f"w{k}"], b + offset[f"b{k}"]
                lin.weight.copy_(torch.tensor(w))
                lin.bias.copy_(torch.tensor(b))
            mods += [lin, torch.nn.ReLU()]
        return torch.nn.Sequential(*mods[:-1])

    x, y = torch.tensor(z["x"]), torch.tensor(z["y"])
    criterion = torch.nn.MSELoss()
    res = {"torch": torch.__version__}

    def hess():
        return pyhessian.hessian(model_at(), criterion, data=(x, y), cuda=False)

    def best(fn):
        """fn() REPEATS times: (the first result, the least wall s, and each run's result)."""
        outs, walls = [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            outs.append(fn())
            walls.append(time.perf_counter() - start)
        return outs[0], min(walls), outs, walls

    values, wall, _, _ = best(lambda: hess().eigenvalues(top_n=TOP_K)[0])
    res["eig"] = {"values": [float(v) for v in values], "wall": wall}

    vhv, _, runs, walls = best(lambda: hess().trace())                # its probes vary: per-probe time
    res["trace"] = {"vhv": [float(v) for v in vhv], "per_probe": min(w / len(r) for w, r in zip(walls, runs)),
                    "probes": [len(r) for r in runs]}

    (nodes, weights), wall, _, _ = best(lambda: hess().density(iter=SLQ_STEPS, n_v=SLQ_PROBES))
    res["density"] = {"nodes": np.asarray(nodes, float).tolist(), "weights": np.asarray(weights, float).tolist(),
                      "wall": wall}

    u = {k[2:]: z[k] for k in z.files if k.startswith("u_")}
    v = {k[2:]: z[k] for k in z.files if k.startswith("v_")}
    scaled = lambda a, sa, b=None, sb=0.0: {k: sa * a[k] + (sb * b[k] if b is not None else 0) for k in a}
    metric = Loss(criterion, x, y)

    line, wall, _, _ = best(lambda: loss_landscapes.linear_interpolation(
        model_at(scaled(u, -1)), model_at(scaled(u, 1)), metric, steps=STEPS_1D))
    res["slice_1d"] = {"values": np.asarray(line, float).tolist(), "wall": wall}

    plane, wall, _, _ = best(lambda: loss_landscapes.planar_interpolation(
        model_at(scaled(u, -1, v, -1)), model_at(scaled(u, 1, v, -1)), model_at(scaled(u, -1, v, 1)), metric,
        steps=STEPS_2D))
    res["slice_2d"] = {"values": np.asarray(plane, float).tolist(), "wall": wall}

    # a direct PyTorch loop over the documented grid: L(params + s_i u + t_j v), s_i = t_i = -1 + 2 i / steps
    base = model_at()
    names = [f"{k}.{p}" for k in range(0, 2 * layers, 2) for p in ("weight", "bias")]
    p0 = [torch.tensor(z[f"{p}{k}"]) for k in range(layers) for p in ("w", "b")]
    tu = [torch.tensor(u[f"{p}{k}"]) for k in range(layers) for p in ("w", "b")]
    tv = [torch.tensor(v[f"{p}{k}"]) for k in range(layers) for p in ("w", "b")]
    grid = (-1 + 2 * np.arange(STEPS_2D) / STEPS_2D).astype(np.float32)

    def loop():
        out = np.empty((STEPS_2D, STEPS_2D))
        with torch.no_grad():
            for i, s in enumerate(grid):
                for j, t in enumerate(grid):
                    point = {n: a + float(s) * du + float(t) * dv for n, a, du, dv in zip(names, p0, tu, tv)}
                    out[i, j] = criterion(torch.func.functional_call(base, point, (x,)), y).item()
        return out
    values, wall, _, _ = best(loop)
    res["loop_2d"] = {"values": values.tolist(), "wall": wall}
    Path(out_json).write_text(json.dumps(res))


# ----------------------------------------------------------------------------------------------------------------
# the JAX side


def mlp(params, x):
    import jax
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"].T + layer["b"])
    return h @ params[-1]["w"].T + params[-1]["b"]


def mse(params, data):
    """Module-level (hashable) loss: mean (f(x) - y)^2, as torch.nn.MSELoss()."""
    x, y = data
    return ((mlp(params, x) - y) ** 2).mean()


def timed(fn, *args, **kwargs):
    """(result, the first call's wall s (with compilation), the least wall s of REPEATS more calls)."""
    import jax

    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    first = time.perf_counter() - start
    walls = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        walls.append(time.perf_counter() - start)
    return out, first, min(walls)


def moments(nodes, weights, q):
    """(mean over probes of sum_j w_pj theta_pj^q, its standard error over probes)."""
    per_probe = np.sum(np.asarray(weights) * np.asarray(nodes) ** q, axis=1)
    return per_probe.mean(), per_probe.std(ddof=1) / np.sqrt(len(per_probe))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        torch_worker(*args.worker)
        return

    import jax
    jax.config.update("jax_enable_x64", True)           # the dense arbiter in float64; the compared runs in float32
    import jax.numpy as jnp

    from slt_relu.hessian import hessian, spectral_density, top_eigenvalues, trace
    from slt_relu.landscape import random_direction, slice_1d, slice_2d

    z = make_problem()
    layers = len(WIDTHS) - 1
    params = [{"w": jnp.asarray(z[f"w{k}"]), "b": jnp.asarray(z[f"b{k}"])} for k in range(layers)]
    data = (jnp.asarray(z["x"]), jnp.asarray(z["y"]))
    D = sum(p["w"].size + p["b"].size for p in params)
    ku, kv, k_eig, k_tr, k_slq = jax.random.split(jax.random.PRNGKey(0), 5)
    u, v = random_direction(ku, params), random_direction(kv, params)
    for k in range(layers):
        for p in ("w", "b"):
            z[f"u_{p}{k}"], z[f"v_{p}{k}"] = np.asarray(u[k][p]), np.asarray(v[k][p])

    torch_res = None
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = str(Path(tmp) / "problem.npz"), str(Path(tmp) / "torch.json")
        np.savez(npz, **z)
        if LANDSCAPE_PYTHON.exists():
            start = time.perf_counter()
            got = subprocess.run([str(LANDSCAPE_PYTHON), __file__, "--worker", npz, out], capture_output=True,
                                 text=True, cwd=ROOT)
            if got.returncode != 0:
                print(got.stderr[-3000:])
                raise SystemExit("PyTorch worker failed")
            torch_res = json.loads(Path(out).read_text())
            torch_res["process"] = time.perf_counter() - start
        else:
            print(f"(no PyTorch environment at {LANDSCAPE_PYTHON}; see the docstring: the JAX side alone)")

    # dense arbiter, float64
    p64 = jax.tree.map(lambda a: a.astype(jnp.float64), params)
    d64 = jax.tree.map(lambda a: a.astype(jnp.float64), data)
    lam = np.linalg.eigvalsh(np.asarray(hessian(mse, p64, d64)))[::-1]
    tr_dense, tr2_dense = lam.sum(), np.sum(lam ** 2)

    eig, eig_t1, eig_t2 = timed(top_eigenvalues, mse, params, data, TOP_K, k_eig)
    (tr_est, tr_se), tr_t1, tr_t2 = timed(trace, mse, params, data, k_tr, TRACE_PROBES)
    (nodes, weights), slq_t1, slq_t2 = timed(spectral_density, mse, params, data, k_slq, SLQ_PROBES, SLQ_STEPS)
    ts = -1 + 2 * np.arange(1, STEPS_1D + 1) / STEPS_1D                  # linear_interpolation's points
    line, s1_t1, s1_t2 = timed(slice_1d, mse, params, data, u, ts)
    grid = -1 + 2 * np.arange(STEPS_2D + 1) / STEPS_2D                   # the documented grid is grid[:-1]
    documented, s2_t1, s2_t2 = timed(slice_2d, mse, params, data, u, v, grid[:-1], grid[:-1])
    beyond = slice_2d(mse, params, data, u, v, grid[:-1], grid[-1:])    # one step beyond: the even rows' last offset
    line, documented = np.asarray(line), np.asarray(documented)
    plane = np.concatenate([documented, np.asarray(beyond)], axis=1)     # (STEPS_2D, STEPS_2D + 1)

    import platform
    print(f"ReLU MLP {'-'.join(map(str, WIDTHS))}, D = {D:,}, n = {N:,}, MSE, float32 (dense arbiter float64); "
          f"jax {jax.__version__}" + (f", torch {torch_res['torch']}" if torch_res else "") +
          f"; {platform.processor() or platform.machine()}")
    print(f"dense spectrum: lambda_max {lam[0]:.5g}, lambda_min {lam[-1]:.5g}, "
          f"{np.sum(lam < -1e-6 * lam[0])} negative of {D}")
    head = (f"{'quantity':24s} {'dense':>11s} {'PyTorch':>11s} {'slt_relu':>11s}  {'agreement':44s} "
            f"{'time PyTorch/JAX':>18s}")
    print(f"time: PyTorch wall s / slt_relu's compiled call (each the least of {REPEATS} runs); in brackets, "
          "/ slt_relu's first call (with compilation)")
    print(head)
    print("-" * len(head))

    def row(name, dense, theirs, ours, agree, ratio):
        fmt = lambda a: f"{a:11.5g}" if isinstance(a, (float, np.floating)) else f"{a:>11s}"
        print(f"{name:24s} {fmt(dense)} {fmt(theirs)} {fmt(ours)}  {agree:44s} {ratio:>18s}")

    def ratio(wall, first, second):
        return f"{wall / second:.1f}x ({wall / first:.2f}x)" if wall is not None else "-"

    # top eigenvalues
    ph = sorted(torch_res["eig"]["values"], reverse=True) if torch_res else [None] * TOP_K
    for i in range(TOP_K):
        ours_rel = abs(eig[i] - lam[i]) / abs(lam[i])
        agree = f"rel: slt_relu {ours_rel:.1e}"
        if ph[i] is not None:
            agree = f"rel: PyHessian {abs(ph[i] - lam[i]) / abs(lam[i]):.1e}, " + agree[5:]
        row(f"lambda_{i + 1}", lam[i], ph[i] if ph[i] is not None else "-", eig[i], agree,
            ratio(torch_res["eig"]["wall"], eig_t1, eig_t2) if torch_res and i == 0 else "")

    # trace
    if torch_res:
        vhv = np.asarray(torch_res["trace"]["vhv"])
        ph_tr, ph_se = vhv.mean(), (vhv.std(ddof=1) / np.sqrt(len(vhv)) if len(vhv) > 1 else np.inf)
        per_probe = torch_res["trace"]["per_probe"] / (tr_t2 / TRACE_PROBES)
        per_probe1 = torch_res["trace"]["per_probe"] / (tr_t1 / TRACE_PROBES)
        agree = f"z: PyHessian {(ph_tr - tr_dense) / ph_se:+.2f}, slt_relu {(tr_est - tr_dense) / tr_se:+.2f}"
        row("tr H (Hutchinson)", tr_dense, ph_tr, tr_est, agree, f"{per_probe:.1f}x ({per_probe1:.2f}x)/probe")
        row("  its se, probes", "", f"{ph_se:.3g}, {len(vhv)}", f"{tr_se:.3g}, {TRACE_PROBES}", "", "")
    else:
        row("tr H (Hutchinson)", tr_dense, "-", tr_est, f"z: slt_relu {(tr_est - tr_dense) / tr_se:+.2f}", "-")

    # spectral density moments
    for q, dense in ((1, tr_dense / D), (2, tr2_dense / D)):
        m, se = moments(nodes, weights, q)
        agree = f"z: slt_relu {(m - dense) / se:+.2f} (se {se:.2g})"
        theirs = "-"
        if torch_res:
            pm, pse = moments(torch_res["density"]["nodes"], torch_res["density"]["weights"], q)
            agree = f"z: PyHessian {(pm - dense) / pse:+.2f} (se {pse:.2g}), " + agree[3:]
            theirs = pm
        row(f"SLQ tr(H^{q})/D", dense, theirs, m, agree,
            ratio(torch_res["density"]["wall"], slq_t1, slq_t2) if torch_res and q == 1 else "")

    # slices
    if torch_res:
        ll1 = np.asarray(torch_res["slice_1d"]["values"])
        row(f"1-D slice ({STEPS_1D} pts) max", "", ll1.max(), line.max(),
            f"max rel diff {np.max(np.abs(ll1 - line) / np.abs(line)):.1e}",
            ratio(torch_res["slice_1d"]["wall"], s1_t1, s1_t2))
        ll2 = np.asarray(torch_res["slice_2d"]["values"])
        actual = np.where((np.arange(STEPS_2D) % 2 == 0)[:, None], plane[:, 1:], plane[:, :-1])
        loop = np.asarray(torch_res["loop_2d"]["values"])
        row(f"2-D slice ({STEPS_2D}x{STEPS_2D}) max", "", ll2.max(), documented.max(),
            f"max rel diff {np.max(np.abs(ll2 - documented) / np.abs(documented)):.1e} (documented grid)",
            ratio(torch_res["slice_2d"]["wall"], s2_t1, s2_t2))
        row("", "", "", "", f"max rel diff {np.max(np.abs(ll2 - actual) / np.abs(actual)):.1e} (even rows +1 step)", "")
        row("2-D, PyTorch loop", "", loop.max(), documented.max(),
            f"max rel diff {np.max(np.abs(loop - documented) / np.abs(documented)):.1e}",
            ratio(torch_res["loop_2d"]["wall"], s2_t1, s2_t2))
        walls = {k: torch_res[k]["wall"] for k in ("eig", "density", "slice_1d", "slice_2d", "loop_2d")}
        print("PyTorch wall s: " + ", ".join(f"{k} {w:.3f}" for k, w in walls.items()) +
              f", trace {1e3 * torch_res['trace']['per_probe']:.2f} ms per probe (probes in its {REPEATS} runs: "
              f"{torch_res['trace']['probes']}); the worker process {torch_res['process']:.1f} s with imports")
    print(f"slt_relu wall s (first call with compilation / least of {REPEATS} more): top_eigenvalues "
          f"{eig_t1:.3f} / {eig_t2:.3f}, trace {tr_t1:.3f} / {tr_t2:.3f}, spectral_density {slq_t1:.3f} / "
          f"{slq_t2:.3f}, slice_1d {s1_t1:.3f} / {s1_t2:.3f}, slice_2d {s2_t1:.3f} / {s2_t2:.3f}")


if __name__ == "__main__":
    sys.exit(main())
