"""The posterior kind's metrics.json from given sweep results, without sampling: every key in its place and every
number as tests/reference/posterior_metrics.json holds it.  That file was written by this module's
:func:`metrics_of` with the code before each point's results were typed (commit 5351199, which built the rows as
dicts and parsed them back into the sweep's Dataset): the typed results (``slt_relu.posterior.point``) and the
rows derived from them keep metrics.json as it was.  Rewrite it (``python tests/test_posterior_metrics.py``) only
for a deliberate change of metrics.json, and say why in tests/reference/README.md.

The results are what a sweep's checkpoints hold (``slt_relu.kinds.posterior_kind.sample_program``,
``slt_relu.posterior.stopping``), made up from a seeded generator: draws near the truth and far from it (several
phases and labels), SMC runs with the stopping rule's verdict and a replaced run's gradients, NUTS chains with
divergences, a trial filter that drops trials."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "reference" / "posterior_metrics.json"
TINY_SMC = {"posterior.n": 200, "posterior.datasets": 2, "posterior.chains_per_dataset": 4,
            "sampler.num_particles": 32, "phases.classify_every": 4, "convergence.max_chains_per_dataset": 4}
CASES = {
    # SMC runs under the stopping rule, NUTS beside them ([compare]), the crossover along t, both labellings
    "smc": ("dslt4_pt1_smc.toml", {**TINY_SMC, "compare.num_warmup": 30, "compare.num_samples": 16,
                                   "sweep.truth.t": [1.0, 1.5707963267948966]}),
    # NUTS chains, DSLT4's trial filter dropping trials (mass_unfiltered), the sector rule
    "nuts_filtered": ("dslt4_pt2_orientation_reversal.toml",
                      {"posterior.n": 200, "posterior.datasets": 4, "posterior.chains_per_dataset": 2,
                       "sampler.num_warmup": 30, "sampler.num_samples": 16, "phases.classify_every": 4,
                       "posterior.trial_filter": True, "posterior.trial_filter_z": 0.8, "sweep.truth.v": [1.0, 3.0]}),
    # SMC runs without a rule (classify_phase's labels only), the filter applied
    "smc_labels_only": ("dslt4_pt2_smc.toml",
                        {**TINY_SMC, "posterior.datasets": 3, "phases.rule": "none", "phases.crossover": None,
                         "convergence.mass_mcse": None,
                         "convergence.log_evidence_mcse": None, "convergence.max_particles": None,
                         "posterior.trial_filter": True, "posterior.trial_filter_z": 1.0,
                         "sweep.truth.v": [1.0, 3.0]}),
}


def _draws(rng, truth, C: int, S: int) -> np.ndarray:
    """(C, S, D) flat parameters: chains near the truth (in W0) and chains spread around it."""
    scale = np.resize([0.005, 0.4, 1.0, 0.05], C)[:, None, None]
    return (truth + scale * rng.standard_normal((C, S, truth.size))).astype(np.float32)


def _smc_stats(rng, C: int, M: int = 12) -> dict:
    stages = rng.integers(3, 6, C).astype(np.int32)
    used = np.arange(M)[None] < stages[:, None]
    f32 = lambda a: np.where(used, a, 0).astype(np.float32)
    return {"num_stages": stages, "final_lambda": np.ones(C, np.float32), "lambda": f32(rng.random((C, M))),
            "ess": f32(0.5 + 0.1 * rng.random((C, M))), "accept_prob": f32(0.5 + 0.4 * rng.random((C, M))),
            "step_size": f32(0.1 * rng.random((C, M))), "log_evidence": f32(-rng.random((C, M))),
            "mean_slope": f32(rng.random((C, M))), "prior_mean_slope": rng.random(C).astype(np.float32)}


def _nuts_stats(rng, C: int, S: int, D: int) -> dict:
    steps = rng.choice([3, 7, 15, 1023], (C, S), p=[0.3, 0.4, 0.28, 0.02]).astype(np.int32)
    return {"num_steps": steps, "tree_depth": (np.floor(np.log2(steps)) + 1).astype(np.int32),
            "accept_prob": (0.6 + 0.4 * rng.random((C, S))).astype(np.float32), "diverging": rng.random((C, S)) < 0.02,
            "energy": rng.normal(5.0, 1.0, (C, S)).astype(np.float32),
            "step_size": (0.1 + 0.2 * rng.random(C)).astype(np.float32),
            "inverse_mass_matrix": rng.random((C, D)).astype(np.float32),
            "warmup_divergences": rng.integers(0, 3, C).astype(np.int32)}


def _results(points, seed: int) -> dict:
    """{point index: a sweep point's results as its checkpoint holds them}."""
    from slt_relu.network import to_flat
    from slt_relu.sampling import SMCSettings

    rng = np.random.default_rng(seed)
    out = {}
    for i, pt in enumerate(points):
        p = pt.settings
        smc = isinstance(p.sampler, SMCSettings)
        K, R = p.datasets, p.chains_per_dataset
        C, S = K * R, p.sampler.num_particles if smc else p.sampler.num_samples
        truth = np.asarray(to_flat(p.example.truth), np.float64)
        flat = _draws(rng, truth, C, S)
        dataset = np.repeat(np.arange(K), R)
        res = {"flat": flat, "loss": (1.45 + 0.05 * dataset[:, None] + 0.02 * rng.random((C, S))).astype(np.float32),
               "dataset": dataset.astype(np.int64),
               "potential_energy": rng.normal(300.0, 5.0, (C, S)).astype(np.float32),
               "grad_evals": rng.integers(500, 2000, C).astype(np.int32),
               "truth_loss": (1.45 + 0.03 * rng.random(K)).astype(np.float32),
               "program_ticks": 60 + i, "program_chains": C * len(points), "program_wall_s": 1.5 + 0.25 * i,
               "program_points": len(points)}
        if smc:
            res["stats"] = _smc_stats(rng, C)
            res["log_evidence"] = rng.normal(-58.0, 0.4, C).astype(np.float32)
            if p.convergence is not None:
                res["convergence"] = {
                    "converged": i % 2 == 1, "mass_mcse": {} if p.convergence.mass_mcse is None else
                    {nm: float(v) for nm, v in zip(("other", "degenerate", "non_degenerate"), rng.random(3) / 30)},
                    "log_evidence_mcse": float(rng.random() / 5), "runs_per_dataset": R, "runs_needed": 6 + i,
                    "particles": S, "worst_ratio": 1.0 + float(rng.random()),
                    "effective_runs": (R * (0.8 + 0.2 * rng.random(K))).tolist(), "targets": p.convergence._asdict()}
            if i == 0:
                res["grad_evals_replaced"] = 12345.0
        else:
            res["stats"] = _nuts_stats(rng, C, S, flat.shape[-1])
        out[pt.index] = res
    return out


def analysis(config: str, overrides: dict):
    """(the resolved config, the kind's Output, {point index: results}) of a shipped config's sweep (and its
    [compare] sampler's) analysed from made-up results (``posterior_report.analyze``)."""
    from slt_relu.kinds.posterior_report import analyze
    from slt_relu.workflow import runner

    import jax

    x64 = jax.config.read("jax_enable_x64")
    try:                                             # a config's dtype is set while it is prepared and analysed
        r = runner.prepare(ROOT / "experiments" / config, overrides).resolved
        compare_points = compare = None
        if r.settings.compare is not None:
            compare_points = [pt._replace(settings=pt.settings._replace(sampler=r.settings.compare.build(),
                                                                        convergence=None)) for pt in r.points]
            compare = _results(compare_points, seed=1)
        results = _results(r.points, seed=0)
        output = analyze(r, results, compare_points, compare)
    finally:
        jax.config.update("jax_enable_x64", x64)
    return r, output, results


def metrics_of(case: str) -> dict:
    """metrics.json of CASES[case]'s sweep (and its [compare] sampler's) from made-up results, as JSON reads it."""
    from slt_relu.workflow.output import to_json

    return json.loads(json.dumps(to_json(analysis(*CASES[case])[1].metrics)))


def differences(want, got, path: str = "") -> list[str]:
    """Where got differs from want: keys (and their order), types, lengths, strings, integers and booleans exactly;
    floats to a relative 1e-9 (they are deterministic: the same arrays through NumPy, SciPy and arviz-stats,
    whose last bits may differ on another CPU; float64 rounding of ~1e3 operations is ~1e-13)."""
    if isinstance(want, float) and isinstance(got, float):
        return [] if got == pytest.approx(want, rel=1e-9, abs=1e-12) else [f"{path}: {want!r} -> {got!r}"]
    if type(want) is not type(got):
        return [f"{path}: {type(want).__name__} -> {type(got).__name__}"]
    if isinstance(want, dict):
        if list(want) != list(got):
            return [f"{path}: keys {list(want)} -> {list(got)}"]
        return [d for k in want for d in differences(want[k], got[k], f"{path}.{k}")]
    if isinstance(want, list):
        if len(want) != len(got):
            return [f"{path}: length {len(want)} -> {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: {want!r} -> {got!r}"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_metrics_json_is_as_before(case):
    want = json.loads(GOLDEN.read_text())[case]
    got = metrics_of(case)
    found = differences(want, got)
    assert not found, f"{len(found)} differences, e.g. {found[:8]}"


def test_the_comparison_finds_a_moved_key_and_a_changed_number():
    """The check above fails when a key moves or a number changes (it would pass nothing silently)."""
    want = {"a": 1, "b": {"x": [0.5, 2], "y": None}}
    assert differences(want, {"a": 1, "b": {"x": [0.5, 2], "y": None}}) == []
    assert differences(want, {"b": {"x": [0.5, 2], "y": None}, "a": 1}) == [": keys ['a', 'b'] -> ['b', 'a']"]
    assert differences(want, {"a": 1, "b": {"x": [0.5 + 1e-6, 2], "y": None}}) == [".b.x[0]: 0.5 -> 0.500001"]
    assert differences(want, {"a": 1.0, "b": {"x": [0.5, 2], "y": None}}) == [".a: int -> float"]


if __name__ == "__main__":                 # write the golden file: python tests/test_posterior_metrics.py
    GOLDEN.write_text(json.dumps({case: metrics_of(case) for case in sorted(CASES)}, indent=1) + "\n")
    sys.exit(0)
