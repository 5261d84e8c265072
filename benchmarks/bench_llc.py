"""Local learning coefficient by SGLD: devinterp (PyTorch, chains one after another) vs
slt_relu.estimate_llc (JAX, chains vmapped in one program), same model, data, settings, one run.

Model: the two-layer ReLU network of DSLT4 PT2's truth at v = 2 (d = m = 3, n_in = 2, D = 13,
lambda = 5), at the truth; data n = 10,000 (inputs uniform on [-1, 1]^2, sigma = 1), full-batch
gradients, n beta = n / log n, SGLD step 1e-4, localization 100 (the issue's settings), the same
chains and steps on both sides.  Loss: mean (y - f)^2 / 2 + log sqrt(2 pi) on both sides.

devinterp runs in its own environment (never a dependency of slt_relu), made with
benchmarks/requirements-devinterp.txt; this script calls it as a subprocess:

    python3 -m venv benchmarks/.venv-devinterp
    benchmarks/.venv-devinterp/bin/pip install -r benchmarks/requirements-devinterp.txt
    .venv/bin/python benchmarks/bench_llc.py [--chains 4] [--draws 300] [--jax-chains 64] [--cache-dir DIR]

Prints both estimates (mean +- standard error across chains), the wall times and their ratio;
--jax-chains also times estimate_llc with that many chains (e.g. 64, the issue's GPU case);
--cache-dir uses JAX's persistent compilation cache there: run twice to see the first call's
compilation replaced by a load from the cache.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEVINTERP_PYTHON = ROOT / "benchmarks" / ".venv-devinterp" / "bin" / "python"


def devinterp_worker(npz: str, chains: int, draws: int, lr: float, gamma: float, nbeta: float) -> None:
    """Runs inside the devinterp environment: prints a JSON line with the estimate and the wall time."""
    import torch
    from devinterp.optim.sgld import SGLD
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(2)
    z = np.load(npz)
    x, y = torch.tensor(z["x"], dtype=torch.float32), torch.tensor(z["y"], dtype=torch.float32)

    class TwoLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(z["w"], dtype=torch.float32))
            self.b = torch.nn.Parameter(torch.tensor(z["b"], dtype=torch.float32))
            self.q = torch.nn.Parameter(torch.tensor(z["q"], dtype=torch.float32))
            self.c = torch.nn.Parameter(torch.tensor(z["c"], dtype=torch.float32))

        def forward(self, inp):
            return torch.relu(inp @ self.w.T + self.b) @ self.q + self.c

    def evaluate(model, data):
        inp, out = data
        return ((out - model(inp)) ** 2).mean() / 2 + 0.5 * math.log(2 * math.pi), {}

    loader = DataLoader(TensorDataset(x, y), batch_size=len(y), shuffle=False)
    start = time.time()
    stats = estimate_learning_coeff_with_summary(
        TwoLayer(), loader=loader, evaluate=evaluate, sampling_method=SGLD,
        optimizer_kwargs=dict(lr=lr, localization=gamma, nbeta=nbeta), num_chains=chains, num_draws=draws,
        num_burnin_steps=0, num_steps_bw_draws=1, device="cpu", verbose=False, seed=0)
    wall = time.time() - start
    per_chain = np.array([stats[f"llc-chain/{i}"] for i in range(chains)], float)
    print(json.dumps({"wall": wall, "mean": float(stats["llc/mean"]), "std": float(stats["llc/std"]),
                      "per_chain": per_chain.tolist()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--localization", type=float, default=100.0)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--jax-chains", type=int, default=0)
    ap.add_argument("--cache-dir", default=None, help="use JAX's persistent compilation cache in this folder "
                    "(as slt-relu run does): a second run of the script loads the program instead of compiling it")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        npz, chains, draws, lr, gamma, nbeta = args.worker
        devinterp_worker(npz, int(chains), int(draws), float(lr), float(gamma), float(nbeta))
        return

    import jax

    import slt_relu as S
    from slt_relu.posterior.llc import LLCSettings, llc_two_layer

    if args.cache_dir:
        from slt_relu.workflow.runner import enable_compilation_cache

        enable_compilation_cache(args.cache_dir)

    ex = S.truths.get("dslt4_pt2", v=2.0)
    n = args.n
    x, y = S.sample_dataset(jax.random.PRNGKey(0), ex.truth, ex.inputs, n, 1.0)
    nbeta = n / math.log(n)
    truth = ex.truth
    print(f"two-layer ReLU d = 3, n = {n}, full batch, n beta = {nbeta:.1f}, step {args.lr:g}, localization "
          f"{args.localization:g}, {args.chains} chains x {args.draws} steps; float32")
    rows = []
    if DEVINTERP_PYTHON.exists():
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "data.npz"
            np.savez(npz, x=np.asarray(x), y=np.asarray(y), w=np.asarray(truth.w), b=np.asarray(truth.b),
                     q=np.asarray(truth.q), c=np.asarray(truth.c))
            got = subprocess.run([str(DEVINTERP_PYTHON), __file__, "--worker", str(npz), str(args.chains),
                                  str(args.draws), str(args.lr), str(args.localization), str(nbeta)],
                                 capture_output=True, text=True, cwd=ROOT)
            if got.returncode != 0:
                print(got.stderr[-3000:])
                raise SystemExit("devinterp worker failed")
            d = json.loads(got.stdout.strip().splitlines()[-1])
            se = float(np.std(d["per_chain"], ddof=1) / np.sqrt(args.chains))
            rows.append(("devinterp 1.3.2 (PyTorch)", d["wall"], d["mean"], se, args.chains))
    else:
        print(f"(no devinterp environment at {DEVINTERP_PYTHON}; see the docstring)")

    def jax_run(chains):
        settings = LLCSettings(num_chains=chains, num_steps=args.draws, step_size=args.lr,
                                   localization=args.localization, n_beta=nbeta)
        est = llc_two_layer(jax.random.PRNGKey(1), truth, x, y, settings)
        return est

    start = time.time()
    jax_run(args.chains)                                                              # compile (or load) + run
    first = time.time() - start
    print(f"first call (compilation{' or the persistent cache' if args.cache_dir else ''} + sampling): {first:.2f} s")
    start = time.time()
    est = jax_run(args.chains)
    rows.append(("slt_relu.estimate_llc (JAX)", time.time() - start, est.lambda_, est.se, args.chains))
    if args.jax_chains:
        jax_run(args.jax_chains)
        start = time.time()
        big = jax_run(args.jax_chains)
        rows.append((f"slt_relu.estimate_llc, {args.jax_chains} chains", time.time() - start, big.lambda_, big.se,
                     args.jax_chains))
    print(f"{'sampler':40s} {'chains':>6s} {'wall s':>9s} {'steps/s':>10s} {'lambda_hat':>16s}")
    for name, wall, mean, se, chains in rows:
        print(f"{name:40s} {chains:6d} {wall:9.3f} {chains * args.draws / wall:10.0f} {mean:8.3f} +- {se:.3f}")
    if len(rows) >= 2 and rows[0][0].startswith("devinterp"):
        print(f"wall-time ratio devinterp / JAX (same chains and steps): {rows[0][1] / rows[1][1]:.0f}x compiled, "
              f"{rows[0][1] / first:.0f}x counting JAX's first call with its compilation ({first:.2f} s); "
              f"estimates differ by {abs(rows[0][2] - rows[1][2]):.3f} "
              f"(combined standard error {math.hypot(rows[0][3], rows[1][3]):.3f})")


if __name__ == "__main__":
    sys.exit(main())
