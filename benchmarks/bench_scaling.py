"""How the cost grows: wall time and gradient evaluations against chains, data size, devices and processes,
for NUTS (desynchronised and lockstep), tempered SMC and SGLD, with the fitted log-log slopes, in one run.

Target: DSLT4 PT1 at t = 1.2 (d = m = 2, inputs uniform on [-1, 1]^2, sigma = 1, N(0, 1) prior),
n beta = n / log n, float32.  Each MCMC chain (and each SMC run) has its own data set, as in the
posterior kind; SGLD's chains share one (the LLC estimator's layout).  Every measurement runs its
program once to compile and is timed on the second call.

* chains C = 1 ... 512 at n = 1,000 (NUTS: 50 + 50 iterations; SMC: runs of 128 particles, waste-free,
  3 moves of 5 leapfrog steps, C <= 64; SGLD: 500 steps);
* data size n = 1,000 ... 100,000 at C = 16 (every sampler);
* devices 1, 2, 4 for every sampler (host devices, ``XLA_FLAGS=--xla_force_host_platform_device_count``, each in a fresh
  process) at C = 64;
* processes 1 and 2 (``slt-relu run --processes``): a 4-point tiny posterior sweep, the whole command's
  wall time (start-up and compilation included);
* the hardware-independent work ratio of lockstep against desynchronised NUTS: the gradient
  evaluations lockstep spends for the same draws (every chain pays for the longest trajectory of each
  iteration: C x the ticks of its program) over those the desynchronised chains spend (the sum of each
  chain's own), as in the finite-state-machine NUTS of Dance et al. (ICML 2025).

    .venv/bin/python benchmarks/bench_scaling.py [--out runs/bench_scaling] [--max-chains 512]

Prints the tables and slopes; writes scaling.json and scaling.png to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _setup(n: int, datasets: int, seed: int = 0):
    import jax

    import slt_relu as S
    from slt_relu.posterior import draw_datasets

    ex = S.truths.get("dslt4_pt1", t=1.2)
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(seed), datasets), ex.truth, ex.inputs, n, 1.0)
    return ex, x, y


def _timed(fn):
    fn()                                               # compile
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def measure(sampler: str, chains: int, n: int) -> dict:
    """One sampler at C chains and n data points: wall seconds (compiled), gradient evaluations, ticks."""
    import jax

    import slt_relu as S
    from slt_relu.posterior.llc import LLCSettings, llc_two_layer
    from slt_relu.posterior import sample_posterior

    nb = n / math.log(n)
    if sampler == "sgld":
        ex, x, y = _setup(n, 1)
        run = lambda: llc_two_layer(jax.random.PRNGKey(1), ex.truth, x[0], y[0],
                                    LLCSettings(num_chains=chains, num_steps=500, num_burnin=100, step_size=1e-4,
                                                    localization=3.0))
        est, wall = _timed(run)
        return {"wall_s": wall, "grad_evals": chains * 500, "ticks": 500}
    settings = {"nuts": S.NUTSSettings(num_warmup=50, num_samples=50),
                "lockstep": S.NUTSSettings(num_warmup=50, num_samples=50, schedule="lockstep"),
                "smc": S.SMCSettings(num_particles=128, waste_free=True, num_mcmc_steps=3, num_leapfrog=5)}[sampler]
    ex, x, y = _setup(n, chains)
    keys = jax.random.split(jax.random.PRNGKey(1), chains)
    ps, wall = _timed(lambda: sample_posterior(keys, x, y, nb, model=ex.model, settings=settings))
    d = ps.draws
    return {"wall_s": wall, "grad_evals": int(np.sum(d.grad_evals)), "ticks": int(d.ticks)}


def _in_fresh_process(sampler: str, chains: int, n: int, devices: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    res = subprocess.run([sys.executable, __file__, "--worker", sampler, str(chains), str(n)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _processes(count: int, tmp: Path) -> float:
    over = {"posterior.n": 1000, "posterior.datasets": 4, "sampler.num_warmup": 100, "sampler.num_samples": 100,
            "phases.classify_every": 10, "sweep.truth.t": [1.0, 1.2, 1.4, 1.5], "posterior.points_per_program": 1,
            "plots.trace_points": 0}
    cmd = [sys.executable, "-m", "slt_relu.workflow.cli", "run", str(ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"),
           "--out", str(tmp / f"p{count}"), "--no-progress", "--no-cache", "--processes", str(count), "--oversubscribe"]
    cmd += sum((["--set", f"{k}={json.dumps(v)}"] for k, v in over.items()), [])
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def slope(xs, ys) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/bench_scaling")
    ap.add_argument("--max-chains", type=int, default=512)
    ap.add_argument("--worker", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    import jax

    jax.config.update("jax_enable_x64", False)
    if args.worker:
        sampler, chains, n = args.worker
        print(json.dumps({**measure(sampler, int(chains), int(n)), "devices": len(jax.devices())}))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"chains": {}, "n": {}, "devices": {}, "processes": {}}
    chains = [c for c in (1, 4, 16, 64, 256, 512) if c <= args.max_chains]
    print(f"chains (n = 1,000), {jax.devices()[0].platform}: wall seconds (compiled) and gradient evaluations")
    for sampler in ("nuts", "lockstep", "smc", "sgld"):
        rows = [(c, measure(sampler, c, 1000)) for c in chains if sampler != "smc" or c <= 64]
        report["chains"][sampler] = [{"chains": c, **r} for c, r in rows]
        cs, walls = [c for c, _ in rows], [r["wall_s"] for _, r in rows]
        fit = [(c, w) for c, w in zip(cs, walls) if c >= 16]
        s = slope(*zip(*fit)) if len(fit) >= 2 else float("nan")
        report["chains"][sampler + "_slope"] = s
        print(f"  {sampler:9s} " + "  ".join(f"C={c}: {r['wall_s']:.2f} s / {r['grad_evals']:.3g}" for c, r in rows)
              + f"   slope (C >= 16) {s:.2f}")
    ratio = [{"chains": a["chains"], "work_ratio": a["chains"] * b["ticks"] / a["grad_evals"],
              "wall_ratio": b["wall_s"] / a["wall_s"]}
             for a, b in zip(report["chains"]["nuts"], report["chains"]["lockstep"])]
    report["lockstep_over_desynchronised"] = ratio
    print("  lockstep / desynchronised NUTS, gradient evaluations for the same draws: "
          + ", ".join(f"C={r['chains']}: {r['work_ratio']:.2f}x (wall {r['wall_ratio']:.2f}x)" for r in ratio))
    ns = [1000, 3000, 10000, 30000, 100000]
    print("data size n (C = 16): wall seconds")
    for sampler in ("nuts", "lockstep", "smc", "sgld"):
        rows = [(n, measure(sampler, 16, n)) for n in ns]
        report["n"][sampler] = [{"n": n, **r} for n, r in rows]
        s = slope(ns, [r["wall_s"] for _, r in rows])
        report["n"][sampler + "_slope"] = s
        print(f"  {sampler:9s} " + "  ".join(f"n={n}: {r['wall_s']:.2f} s" for n, r in rows) + f"   slope {s:.2f}")
    print("host devices (C = 64, n = 1,000), each in a fresh process: wall seconds")
    for sampler in ("nuts", "lockstep", "smc", "sgld"):
        rows = [(k, _in_fresh_process(sampler, 64, 1000, k)) for k in (1, 2, 4)]
        report["devices"][sampler] = [{"devices": k, **r} for k, r in rows]
        print(f"  {sampler:9s} " + "  ".join(f"{k} devices: {r['wall_s']:.2f} s" for k, r in rows))
    print("processes (a 4-point tiny posterior sweep, the whole command): wall seconds")
    for count in (1, 2):
        report["processes"][str(count)] = _processes(count, out)
        print(f"  {count} process{'es' if count > 1 else ''}: {report['processes'][str(count)]:.1f} s")
    (out / "scaling.json").write_text(json.dumps(report, indent=2))
    _figure(report, out / "scaling.png")
    print(f"written {out / 'scaling.json'}, {out / 'scaling.png'}")


def _figure(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(22, 4.2))
    ax = axes[0]
    for sampler, rows in report["chains"].items():
        if sampler.endswith("_slope"):
            continue
        ax.loglog([r["chains"] for r in rows], [r["wall_s"] for r in rows], "o-",
                  label=f"{sampler} (slope {report['chains'][sampler + '_slope']:.2f})")
    ax.set(xlabel="chains (SMC: runs)", ylabel="wall s (compiled)", title="chains, n = 1,000")
    ax = axes[1]
    for sampler, rows in report["n"].items():
        if sampler.endswith("_slope"):
            continue
        ax.loglog([r["n"] for r in rows], [r["wall_s"] for r in rows], "o-",
                  label=f"{sampler} (slope {report['n'][sampler + '_slope']:.2f})")
    ax.set(xlabel="n", ylabel="wall s (compiled)", title="data size, 16 chains")
    ax = axes[2]
    for sampler, rows in report["devices"].items():
        ax.plot([r["devices"] for r in rows], [r["wall_s"] for r in rows], "o-", label=sampler)
    ax.set(xlabel="host devices", ylabel="wall s (compiled)", title="devices, 64 chains")
    ax = axes[3]
    ratio = report["lockstep_over_desynchronised"]
    ax.semilogx([r["chains"] for r in ratio], [r["work_ratio"] for r in ratio], "o-", label="gradient evaluations")
    ax.semilogx([r["chains"] for r in ratio], [r["wall_ratio"] for r in ratio], "s--", label="wall time")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set(xlabel="chains", ylabel="lockstep / desynchronised", title="NUTS: lockstep against desynchronised")
    ax = axes[4]
    counts = sorted(report["processes"], key=int)
    ax.bar(counts, [report["processes"][k] for k in counts], color="C0", label="a 4-point tiny sweep")
    ax.set(xlabel="processes (slt-relu run --processes)", ylabel="wall s (whole command)", title="processes, this machine")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("slt_relu: cost against chains, data size, devices and processes (DSLT4 PT1, t = 1.2)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
