"""devinterp's LLC estimator on cases with a known learning coefficient, beside slt_relu's estimate_llc on the
same data, loss and settings, and the free-energy curve's lambda (results/known_lambda_suite).

The cases and settings are devinterp's own accuracy tests (devinterp 1.3's tests/slt), so that its estimator
is read as its authors run it:

- the nine normal crossings (``sampler_accuracy_test.py``): f(x) = x prod_i w_i^(k_i), x ~ N(0, 2^2),
  y = 0.25 N(0, 1), n = 1,000, full batch, mean squared error, w* = 0, SGLD step 4e-4, n beta = n / log n,
  no localization, 10 chains x 5,000 draws; exact lambda = min_i 1 / (2 k_i) over k_i > 0; devinterp's test
  passes when lambda lies within the chains' mean +- 3.5 sd;
- reduced-rank regression with a zero truth (``rrr_test.py``, input-hidden-output 5-3-5, 5-4-5, 4-3-8, 8-3-4,
  3-8-4): y = B A x, x ~ N(0, I), y ~ N(0, I) independent of x, n = 1,000, full batch, mean squared error,
  step 6e-4, localization 1, n beta = n / log n, 3 chains x 400 draws; w* = 0 (a point of W0: K is homogeneous,
  so its local lambda is the global one, ``slt_relu.known_lambda.reduced_rank``; devinterp's test trains w* by
  Adam instead); the test passes when the mean is within 40 % of lambda.

Without localization the normal crossings' tempered posterior exp(-n beta L_n) is improper (w1^2 w2^2 is flat
along both axes): a chain's estimate is then a property of its length, not of the posterior.

devinterp runs in its own environment (never a dependency of slt_relu), made with
benchmarks/requirements-devinterp.txt (see benchmarks/bench_llc.py); this script calls it as a subprocess:

    .venv/bin/python benchmarks/bench_known_lambda_devinterp.py [--draws-scale 1.0] [--cases normal_crossing,rrr]

(about 25 minutes on a 2-core CPU, almost all of it devinterp; --draws-scale 0.01 for a smoke test).

Prints per case the exact lambda, devinterp's estimate (mean +- se over chains, and whether its own test's
criterion passes), estimate_llc's on the same data and settings, both z-scores against the exact value, the
committed free-energy estimate where the suite has the case, and the wall-time ratio devinterp / JAX.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEVINTERP_PYTHON = ROOT / "benchmarks" / ".venv-devinterp" / "bin" / "python"
NORMAL_CROSSINGS = [(0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (0, 3), (1, 3), (2, 3), (3, 3)]
RRR = [(5, 3, 5), (5, 4, 5), (4, 3, 8), (8, 3, 4), (3, 8, 4)]
N = 1000


def cases(which: set, scale: float) -> list[dict]:
    """The benchmark's cases (module docstring) as JSON-able dicts."""
    out = []
    if "normal_crossing" in which:
        out += [{"name": f"w1^{2 * a} w2^{2 * b}" if a else f"w2^{2 * b}", "family": "normal_crossing", "k": [a, b],
                 "lr": 4e-4, "localization": 0.0, "chains": 10, "draws": max(10, int(5000 * scale))}
                for a, b in NORMAL_CROSSINGS]
    if "rrr" in which:
        out += [{"name": f"RRR {m}-{h}-{o}, r = 0", "family": "rrr", "dims": [m, h, o], "lr": 6e-4,
                 "localization": 1.0, "chains": 3, "draws": max(10, int(400 * scale))} for m, h, o in RRR]
    return out


def data(case: dict, seed: int) -> dict:
    """x, y and w* of a case (numpy, float32)."""
    rng = np.random.default_rng(seed)
    if case["family"] == "normal_crossing":
        return {"x": (2.0 * rng.standard_normal((N, 1))).astype(np.float32),
                "y": (0.25 * rng.standard_normal((N, 1))).astype(np.float32),
                "w": np.zeros(len(case["k"]), np.float32)}
    m, h, o = case["dims"]
    return {"x": rng.standard_normal((N, m)).astype(np.float32), "y": rng.standard_normal((N, o)).astype(np.float32),
            "A": np.zeros((h, m), np.float32), "B": np.zeros((o, h), np.float32)}


def exact(case: dict) -> Fraction:
    from slt_relu import known_lambda

    if case["family"] == "normal_crossing":
        return known_lambda.normal_crossing([k for k in case["k"] if k > 0])[0]
    m, h, o = case["dims"]
    return known_lambda.reduced_rank(m, h, o, 0)[0]


def devinterp_worker(spec_path: str) -> None:
    """Runs inside the devinterp environment: one JSON line per case with the chains' estimates and the wall time."""
    import torch
    from devinterp.optim.sgld import SGLD
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(2)
    spec = json.loads(Path(spec_path).read_text())
    for case in spec["cases"]:
        z = np.load(case["npz"])
        x, y = torch.tensor(z["x"]), torch.tensor(z["y"])
        if case["family"] == "normal_crossing":
            class Model(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = torch.nn.Parameter(torch.tensor(z["w"]))
                    self.register_buffer("k", torch.tensor(case["k"], dtype=torch.float32))

                def forward(self, inp):
                    return inp * torch.prod(self.w ** self.k)
        else:
            class Model(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.A = torch.nn.Parameter(torch.tensor(z["A"]))
                    self.B = torch.nn.Parameter(torch.tensor(z["B"]))

                def forward(self, inp):
                    return inp @ self.A.T @ self.B.T

        def evaluate(model, batch):
            inp, out = batch
            return torch.nn.functional.mse_loss(model(inp), out), {}

        loader = DataLoader(TensorDataset(x, y), batch_size=N, shuffle=False)
        kwargs = dict(lr=case["lr"], localization=case["localization"], nbeta=N / math.log(N))
        start = time.time()
        stats = estimate_learning_coeff_with_summary(
            Model(), loader=loader, evaluate=evaluate, sampling_method=SGLD, optimizer_kwargs=kwargs,
            num_chains=case["chains"], num_draws=case["draws"], num_burnin_steps=0, num_steps_bw_draws=1,
            device="cpu", verbose=False, seed=0)
        wall = time.time() - start
        per_chain = [float(stats[f"llc-chain/{i}"]) for i in range(case["chains"])]
        print(json.dumps({"name": case["name"], "wall": wall, "per_chain": per_chain}), flush=True)


def jax_estimate(case: dict, z: dict, seed: int):
    """estimate_llc on the same data, loss (mean squared error) and settings: (per-chain estimates, wall s with the
    first call's compilation, wall s of a second call)."""
    import jax
    import jax.numpy as jnp

    from slt_relu.posterior.llc import LLCSettings, estimate_llc

    if case["family"] == "normal_crossing":
        k = jnp.asarray(case["k"], jnp.float32)
        params = jnp.asarray(z["w"])

        def loss(w, d):
            return jnp.mean((d[0] * jnp.prod(w ** k) - d[1]) ** 2)
    else:
        params = {"A": jnp.asarray(z["A"]), "B": jnp.asarray(z["B"])}

        def loss(p, d):
            return jnp.mean((d[0] @ p["A"].T @ p["B"].T - d[1]) ** 2)

    settings = LLCSettings(num_chains=case["chains"], num_steps=case["draws"], step_size=case["lr"],
                               localization=case["localization"], n_beta=N / math.log(N))
    d = (jnp.asarray(z["x"]), jnp.asarray(z["y"]))
    start = time.time()
    estimate_llc(jax.random.PRNGKey(seed), loss, params, d, settings)
    first = time.time() - start
    start = time.time()
    est = estimate_llc(jax.random.PRNGKey(seed + 1), loss, params, d, settings)
    return np.asarray(est.details.per_chain), first, time.time() - start


def suite_estimates() -> dict:
    """The committed free-energy estimates of results/known_lambda_suite by case name: (lambda, se)."""
    path = ROOT / "results" / "known_lambda_suite" / "metrics.json"
    if not path.exists():
        return {}
    rows = json.loads(path.read_text())["cases"]
    return {r["name"]: (r["estimators"]["free_energy"]["lambda"], r["estimators"]["free_energy"]["lambda_se"])
            for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="normal_crossing,rrr", help="comma-separated: normal_crossing, rrr")
    ap.add_argument("--draws-scale", type=float, default=1.0, help="scale devinterp's test's draws (for a quick run)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        devinterp_worker(args.worker)
        return
    todo = cases(set(args.cases.split(",")), args.draws_scale)
    suite = suite_estimates()
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(todo):
            z = data(case, seed=i)
            case["npz"] = str(Path(tmp) / f"case{i}.npz")
            np.savez(case["npz"], **z)
        dev = {}
        if DEVINTERP_PYTHON.exists():
            spec = Path(tmp) / "spec.json"
            spec.write_text(json.dumps({"cases": todo}))
            got = subprocess.run([str(DEVINTERP_PYTHON), __file__, "--worker", str(spec)], capture_output=True,
                                 text=True, cwd=ROOT)
            if got.returncode != 0:
                print(got.stderr[-3000:])
                raise SystemExit("devinterp worker failed")
            dev = {d["name"]: d for d in map(json.loads, got.stdout.strip().splitlines())}
        else:
            print(f"(no devinterp environment at {DEVINTERP_PYTHON}; see the docstring)")
        print(f"n = {N}, full batch, n beta = n / log n = {N / math.log(N):.2f}, float32; se: sd over chains / sqrt(chains)")
        print(f"{'case':18s} {'lambda':>7s} | {'devinterp':>17s} {'z':>6s} {'its test':>8s} | "
              f"{'estimate_llc':>17s} {'z':>6s} | {'SMC free energy':>17s} | {'wall dev / JAX':>14s}")
        walls = []
        for i, case in enumerate(todo):
            lam = float(exact(case))
            z = dict(np.load(case["npz"]))
            jx, first, second = jax_estimate(case, z, seed=100 + i)
            jm, js = jx.mean(), jx.std(ddof=1) / math.sqrt(len(jx))
            line = f"{case['name']:18s} {lam:7.4f} | "
            if case["name"] in dev:
                d = np.asarray(dev[case["name"]]["per_chain"])
                dm, dsd = d.mean(), d.std(ddof=1)
                ds = dsd / math.sqrt(len(d))
                passes = (abs(dm - lam) <= 3.5 * dsd) if case["family"] == "normal_crossing" else abs(dm - lam) <= 0.4 * lam
                line += f"{dm:8.4f} +- {ds:6.4f} {(dm - lam) / ds:6.1f} {'pass' if passes else 'fail':>8s} | "
                walls.append((dev[case["name"]]["wall"], second))
            else:
                line += f"{'-':>17s} {'-':>6s} {'-':>8s} | "
            line += f"{jm:8.4f} +- {js:6.4f} {(jm - lam) / js:6.1f} | "
            fe = suite.get(case["name"])
            line += f"{fe[0]:8.4f} +- {fe[1]:6.4f} | " if fe else f"{'-':>17s} | "
            line += f"{walls[-1][0] / walls[-1][1]:14.1f}" if case["name"] in dev else f"{'-':>14s}"
            print(line, flush=True)
        if walls:
            tot_dev, tot_jax = sum(w[0] for w in walls), sum(w[1] for w in walls)
            print(f"wall time, all cases: devinterp {tot_dev:.1f} s, estimate_llc {tot_jax:.1f} s (second calls; "
                  f"ratio {tot_dev / tot_jax:.1f}x)")


if __name__ == "__main__":
    sys.exit(main())
