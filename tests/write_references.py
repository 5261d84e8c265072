"""Write tests/reference/NAME.json for shipped configs: their tiny runs (tests/tiny.py) as the numbers
`test_reference.py` compares every later run with, on any machine.

    python tests/write_references.py [NAME ...] [--runs R] [--jobs J]

Each file holds the seed-0 run's ``metrics`` and, for a config whose kind samples, the ``spread`` of each
statistical number (phase masses, log evidences, learning coefficients; `slt_relu.workflow.compare.STATISTICAL`)
over R independent runs (a phase label missing from a run counts as mass 0 there): its standard deviation, at
least the resolution of a mass (the smallest step
between two values of any mass of the config seen in those runs), since a mass that took one value in every
run still moves by whole draws on another machine.  A run on another machine draws the same data sets (their
keys and arithmetic are the same up to rounding) and other trajectories, so the R runs of a ``posterior``
config keep seed 0 and its data and give the chains other keys (run r folds r into every chain key); a
``learning_coefficient`` config's runs use seeds 0 .. R-1, which change its data sets too (a conservative,
wider spread).

Rewrite a file only for a deliberate change of a config's numbers, and say why in tests/reference/README.md.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import jax  # noqa: E402

from tiny import TINY  # noqa: E402


def run_tiny(name: str, replicate: int) -> tuple[dict, dict]:
    """(metrics, manifest) of config NAME's tiny run number ``replicate`` (0: the config as it is)."""
    from slt_relu.workflow import runner
    from slt_relu.kinds import posterior_kind

    overrides = dict(TINY[f"{name}.toml"])
    point_keys = posterior_kind.point_keys
    if replicate and runner.prepare(ROOT / "experiments" / f"{name}.toml", overrides).settings.kind == "posterior":
        def other_chains(*args):                   # the same data sets, other chain keys
            data, chains = point_keys(*args)
            return data, jax.vmap(lambda k: jax.random.fold_in(k, replicate))(chains)
        posterior_kind.point_keys = other_chains
    elif replicate:
        overrides["seed"] = replicate
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = runner.run_config(ROOT / "experiments" / f"{name}.toml", Path(tmp) / "res", progress=False,
                                    overrides=overrides)
            return json.loads((out / "metrics.json").read_text()), json.loads((out / "manifest.json").read_text())
    finally:
        posterior_kind.point_keys = point_keys


def _job(args):
    jax.config.update("jax_enable_x64", True)
    return run_tiny(*args)


def spread(kind: str, runs: list[dict]) -> dict[str, float]:
    """{dotted path: standard deviation over the runs} of every statistical number of the first run."""
    from slt_relu.workflow import compare

    values: dict[tuple, list[float]] = {}
    for r, metrics in enumerate(runs):
        for path, v in compare.leaves(metrics):
            if compare.number_kind(kind, path) == "statistical" and isinstance(v, (int, float)):
                values.setdefault(path, [0.0] * r if "mass" in path else []).append(float(v))
        for path, vs in values.items():          # a label no draw of this run carried: its mass is 0
            if "mass" in path and len(vs) == r:
                vs.append(0.0)
    is_mass = lambda path: "mass" in path
    # one draw's weight: the smallest step between two values of a mass (steps below 1e-9 are float rounding of
    # equal masses summed in another order)
    steps = [abs(a - b) for path, vs in values.items() if is_mass(path) for a in vs for b in vs if abs(a - b) > 1e-9]
    resolution = min(steps, default=0.0)
    return {compare.dotted(path): max(statistics.stdev(vs), resolution if is_mass(path) else 0.0)
            for path, vs in values.items() if len(vs) == len(runs)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="configs (default: all shipped)")
    parser.add_argument("--runs", type=int, default=10, help="independent runs of a sampling config (default 10)")
    parser.add_argument("--jobs", type=int, default=2, help="processes at once (default 2)")
    args = parser.parse_args(argv)
    names = args.names or sorted(n.removesuffix(".toml") for n in TINY)
    ctx = multiprocessing.get_context("spawn")
    from slt_relu.workflow import compare, provenance

    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        for name in names:
            first, manifest = pool.apply(_job, ((name, 0),))
            kind = manifest["kind"]
            entry = {"kind": kind, "dtype": manifest["resolved"]["dtype"], "overrides": manifest["overrides"],
                     "metrics": first,
                     "written_by": {"git_commit": provenance.git_commit(), "machine": manifest["machine"],
                                    "versions": manifest["versions"]}}
            if kind in compare.SAMPLER_KINDS:
                more = pool.map(_job, [(name, s) for s in range(1, args.runs)])
                entry["runs"] = args.runs
                entry["spread"] = spread(kind, [first] + [m for m, _ in more])
            path = ROOT / "tests" / "reference" / f"{name}.json"
            path.write_text(json.dumps(entry, indent=1) + "\n")
            print(f"wrote {path.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
