"""The one-shot accelerator check: the toolkit's heavy programs on the accelerator against this machine's CPU,
in one run (``benchmarks/accelerator.sh`` installs what it needs and calls this; docs/howto/sample_on_a_gpu.md).

Five sections, each timed on the default device (the accelerator when JAX sees one) and on the CPU of the
same machine, each printing both numbers and their ratio; the CPU runs the same program, or, where the
accelerator's size would take the CPU minutes, a smaller one (the row says which sizes, and the ratio is of
the size-free rate: gradients or steps per second):

1. likelihood   the fused two-layer L_n and gradient (benchmarks/bench_likelihood.py), P particles on n
                points: gradients per second, before (``vmap(grad)``) and after (slt_relu.fused);
2. PT1 sweep    a reduced DSLT4 PT1 sweep: tempered SMC at several t, several data sets each: wall seconds;
3. NUTS         desynchronised (``schedule="async"``) against lockstep NUTS at 1 ... 4,096 chains, one data
                set per chain: the chains' gradient evaluations per second and the wall ratio lockstep / async;
4. SGLD LLC     the local learning coefficient of a ~1e6-parameter MLP (mini-batch SGLD): steps per second;
5. SMC          one tempered SMC run of 1e5 particles on PT1: particle gradients per second.

Wall times exclude compilation (each program runs once beforehand with the same shapes; the PT1 sweep's
first call, compilation and one t, is printed beside it).

    python benchmarks/accelerator.py [--tiny] [--sections likelihood pt1 nuts sgld smc]

--tiny: sizes for a CPU in a few tens of seconds (tests/test_accelerator.py runs it).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_likelihood as bl  # noqa: E402

import slt_relu as S  # noqa: E402
from slt_relu.fused import two_layer_nll  # noqa: E402
from slt_relu.posterior import draw_datasets, sample_posterior  # noqa: E402

FULL = dict(likelihood=dict(particles=4096, n=100_000, cpu_particles=4096, cpu_n=100_000),
            pt1=dict(ts=(0.6, 0.9, 1.2, 1.5), datasets=4, n=10_000, particles=1024),
            nuts=dict(chains=(1, 16, 256, 4096), cpu_max_chains=256, n=1_000, warmup=100, samples=100),
            sgld=dict(widths=(64, 1024, 960, 1), n=10_000, chains=4, steps=200, cpu_steps=20, batch=256),
            smc=dict(particles=100_000, cpu_particles=10_000, n=1_000, runs=1))
TINY = dict(likelihood=dict(particles=64, n=1_000, cpu_particles=64, cpu_n=1_000),
            pt1=dict(ts=(0.9, 1.5), datasets=2, n=200, particles=64),
            nuts=dict(chains=(2,), cpu_max_chains=2, n=100, warmup=20, samples=20),
            sgld=dict(widths=(4, 32, 1), n=256, chains=2, steps=20, cpu_steps=20, batch=32),
            smc=dict(particles=64, cpu_particles=64, n=200, runs=2))     # the PT1 sweep's program, compiled once


def timed(fn):
    """(result, wall seconds) of fn() with its arrays ready."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - start


def on(device, fn):
    """fn() with ``device`` the default device."""
    with jax.default_device(device):
        return fn()


def row(name: str, accel: float, cpu: float, unit: str, note: str = "") -> dict:
    """Print and return one comparison: the accelerator's number, the CPU's, accel / cpu."""
    ratio = accel / cpu if cpu else float("nan")
    print(f"  {name:<44} accelerator {accel:>12,.1f}  cpu {cpu:>12,.1f}  {unit:<16} ratio {ratio:>7.2f}"
          + (f"  ({note})" if note else ""), flush=True)
    return dict(name=name, accelerator=accel, cpu=cpu, unit=unit, ratio=ratio)


def likelihood(size, accel, cpu) -> list[dict]:
    print(f"1. likelihood: d = 2, n_in = 2, float32; accelerator {size['particles']} particles x n = {size['n']:,}, "
          f"cpu {size['cpu_particles']} x {size['cpu_n']:,}")
    out = []
    for name, loss in (("vmap(grad) (before)", bl.plain), ("fused (slt_relu.fused)", two_layer_nll)):
        rates = []
        for device, P, n in ((accel, size["particles"], size["n"]), (cpu, size["cpu_particles"], size["cpu_n"])):
            def rate():
                params, x, y = bl.problem(P, n, jnp.float32)
                return P / bl.best_time(bl.program(loss, P, n), params, x, y, seconds=0.5)
            rates.append(on(device, rate))
        out.append(row(f"{name} gradients/s", rates[0], rates[1], "grads/s"))
    return out


def pt1(size, accel, cpu) -> list[dict]:
    print(f"2. reduced PT1 sweep: SMC at t = {size['ts']}, {size['datasets']} data sets each, n = {size['n']:,}, "
          f"{size['particles']} particles, waste-free, float32 (wall seconds after a compiling call)")
    settings = S.SMCSettings(num_particles=size["particles"], waste_free=True, num_mcmc_steps=7)
    n = size["n"]

    def sweep(device, ts):
        keys = jax.random.split(jax.random.PRNGKey(0), size["datasets"])
        masses = []
        for t in ts:
            ex = S.truths.get("dslt4_pt1", t=t)
            x, y = draw_datasets(keys, ex.truth, ex.inputs, n, 1.0)
            ps = sample_posterior(keys, x, y, n / math.log(n), model=ex.model,
                                  settings=settings, devices=[device])
            masses.append(float(np.mean(np.asarray(S.radius_rule(ps.params, eps=0.3)) == 2)))
        return masses

    # compile: one t, the same shapes as every t (on a machine with no accelerator the second call reuses the first's)
    compile_s = [timed(lambda: on(device, lambda: sweep(device, size["ts"][:1])))[1] for device in (accel, cpu)]
    accel_masses, accel_wall = timed(lambda: on(accel, lambda: sweep(accel, size["ts"])))
    cpu_masses, cpu_wall = timed(lambda: on(cpu, lambda: sweep(cpu, size["ts"])))
    print(f"  non-degenerate masses: accelerator {np.round(accel_masses, 3).tolist()}, cpu "
          f"{np.round(cpu_masses, 3).tolist()} (the same sampler: equal within Monte Carlo error); first call "
          f"(compilation + one t): accelerator {compile_s[0]:.1f} s, cpu {compile_s[1]:.1f} s")
    return [row("sweep speed (1 / wall seconds)", 1 / accel_wall, 1 / cpu_wall, "1/s",
                f"wall: accelerator {accel_wall:.1f} s, cpu {cpu_wall:.1f} s")]


def nuts(size, accel, cpu) -> list[dict]:
    print(f"3. NUTS, desynchronised against lockstep: PT1 t = 1.2, n = {size['n']:,}, one data set per chain, "
          f"{size['warmup']} warm-up + {size['samples']} draws, float32 (the cpu runs up to "
          f"{size['cpu_max_chains']} chains)")
    ex = S.truths.get("dslt4_pt1", t=1.2)
    model = ex.model
    out = []
    for C in size["chains"]:
        results = {}
        for device in (accel, cpu) if C <= size["cpu_max_chains"] else (accel,):
            for schedule in ("async", "lockstep"):
                def run():
                    keys = jax.random.split(jax.random.PRNGKey(1), C)
                    x, y = draw_datasets(keys, ex.truth, ex.inputs, size["n"], 1.0)
                    s = S.NUTSSettings(num_warmup=size["warmup"], num_samples=size["samples"], schedule=schedule)
                    go = lambda: sample_posterior(keys, x, y, size["n"] / math.log(size["n"]), model=model,
                                                  settings=s, devices=[device])
                    go()                                         # compile
                    ps, wall = timed(go)
                    return float(np.sum(ps.draws.grad_evals)) / wall, wall
                results[(device.platform, schedule)] = on(device, run)
        a = results[(accel.platform, "async")]
        lock = results[(accel.platform, "lockstep")]
        print(f"  {C:>5} chains on the accelerator: async {a[0]:,.0f} grads/s, lockstep {lock[0]:,.0f} grads/s, "
              f"wall lockstep / async {lock[1] / a[1]:.2f}", flush=True)
        if (cpu.platform, "async") in results and accel is not cpu:
            out.append(row(f"async NUTS, {C} chains, gradients/s", a[0], results[(cpu.platform, "async")][0],
                           "grads/s"))
        out.append(dict(name=f"lockstep / async wall, {C} chains", accelerator=lock[1] / a[1]))
    return out


def sgld(size, accel, cpu) -> list[dict]:
    model = S.models.mlp(size["widths"], dtype=jnp.float32)
    print(f"4. SGLD LLC of an MLP {size['widths']} ({model.num_params:,} parameters), n = {size['n']:,}, "
          f"{size['chains']} chains, mini-batches of {size['batch']}; accelerator {size['steps']} steps, cpu "
          f"{size['cpu_steps']}")
    loss = S.models.gaussian_loss(model)
    rates = []
    for device, steps in ((accel, size["steps"]), (cpu, size["cpu_steps"])):
        def run():
            k = jax.random.split(jax.random.PRNGKey(2), 3)
            params = model.init(k[0], scale=1.0 / math.sqrt(max(size["widths"])))
            x = jax.random.normal(k[1], (size["n"], size["widths"][0]), jnp.float32)
            y = model.apply(params, x) + 0.1 * jax.random.normal(k[2], (size["n"], size["widths"][-1]), jnp.float32)
            s = S.LLCSettings(num_chains=size["chains"], num_steps=steps, step_size=1e-6, batch_size=size["batch"])
            S.estimate_llc(k[0], loss, params, (x, y), s, devices=[device])          # compile
            _, wall = timed(lambda: S.estimate_llc(k[0], loss, params, (x, y), s, devices=[device]).lambda_)
            return size["chains"] * steps / wall
        rates.append(on(device, run))
    return [row("SGLD chain steps/s", rates[0], rates[1], "steps/s")]


def smc(size, accel, cpu) -> list[dict]:
    print(f"5. tempered SMC on PT1 t = 1.2, n = {size['n']:,}, {size['runs']} run(s): accelerator "
          f"{size['particles']:,} particles, cpu {size['cpu_particles']:,} (particle gradients per second)")
    ex = S.truths.get("dslt4_pt1", t=1.2)
    model = ex.model
    rates = []
    for device, N in ((accel, size["particles"]), (cpu, size["cpu_particles"])):
        def run():
            keys = jax.random.split(jax.random.PRNGKey(3), size["runs"])
            x, y = draw_datasets(keys, ex.truth, ex.inputs, size["n"], 1.0)
            s = S.SMCSettings(num_particles=N, waste_free=True, num_mcmc_steps=7,
                              particle_batch=N if device.platform != "cpu" else 16)
            go = lambda: sample_posterior(keys, x, y, size["n"] / math.log(size["n"]), model=model, settings=s,
                                          devices=[device])
            go()
            ps, wall = timed(go)
            return float(np.sum(ps.draws.grad_evals)) / wall
        rates.append(on(device, run))
    return [row("SMC particle gradients/s", rates[0], rates[1], "grads/s")]


SECTIONS = dict(likelihood=likelihood, pt1=pt1, nuts=nuts, sgld=sgld, smc=smc)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="CPU-sized problems (seconds), for the test")
    ap.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    args = ap.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    try:
        cpu = jax.devices("cpu")[0]
    except RuntimeError:
        raise SystemExit("accelerator.py: JAX has no CPU backend to compare with; let JAX_PLATFORMS include cpu "
                         "(e.g. JAX_PLATFORMS=cuda,cpu) or unset it") from None
    accel = jax.devices()[0]
    print(f"accelerator check: jax {jax.__version__}, default device {accel.device_kind} ({accel.platform}), "
          f"cpu {cpu.device_kind}; {'tiny' if args.tiny else 'full'} sizes")
    if accel.platform == "cpu":
        print("  no accelerator: both columns are this CPU (ratios near 1)")
    start = time.perf_counter()
    results = {}
    for name in args.sections:
        results[name] = SECTIONS[name](sizes[name], accel, cpu)
    print(f"total {time.perf_counter() - start:.0f} s")
    return results


if __name__ == "__main__":
    main()
