"""SMC's stopping rule (slt_relu.posterior.stopping; kind posterior, [convergence]): a point whose independent runs
disagree beyond the targets gets more runs on its data sets (pooled with the first) and, if they still disagree, is
flagged in metrics.json, the warnings, the headline and the figures; a point whose runs agree is left alone; with
convergence.max_particles the runs may be replaced by runs with more particles instead, whichever costs fewer
gradients.  Bad settings are refused."""
import json

import numpy as np
import pytest

from slt_relu.workflow import runner
from slt_relu.workflow.config import ConfigError
from slt_relu.kinds.posterior_headline import headline
from tiny import TINY

CONFIG = runner.EXPERIMENTS_DIR / "dslt4_pt2_smc.toml"   # from any working directory
BASE = {**TINY["dslt4_pt2_smc.toml"], "sweep.truth.v": [1.0]}


def run(tmp_path, name, **overrides):
    out = runner.run_config(CONFIG, tmp_path / name, progress=False, overrides={**BASE, **overrides})
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny PT2 point (2 data sets x 4 runs of 64 particles) under a target no such runs can meet, with
    up to 8 runs per data set, and under one any run meets."""
    tmp = tmp_path_factory.mktemp("stopping")
    strict = run(tmp, "strict", **{"convergence.mass_mcse": 1e-6, "convergence.max_chains_per_dataset": 8,
                                   "convergence.max_particles": None})
    loose = run(tmp, "loose", **{"convergence.mass_mcse": 0.99, "convergence.log_evidence_mcse": 1e3,
                                 "convergence.max_chains_per_dataset": 16, "convergence.max_particles": None})
    return strict, loose


def test_disagreeing_runs_get_more_particles_with_max_particles(tmp_path):
    """With max_particles the rule replaces a point's runs by as many runs with more particles (64 -> 128,
    the bound, in one round as the error is far above the target and more runs are bounded at 4), counts
    the replaced runs' gradients, and flags the point if they still disagree."""
    m = run(tmp_path, "particles", **{"convergence.mass_mcse": 1e-6, "convergence.max_chains_per_dataset": 4})
    c = m["points"][0]["convergence"]
    assert c["converged"] is False and c["runs_per_dataset"] == 4 and c["particles"] == 128
    assert c["targets"]["max_particles"] == 128 and c["worst_ratio"] > 1
    assert m["sampler_totals"]["draws"] == 2 * 4 * 128
    d = m["points"][0]["diagnostics"]
    assert d["grad_evals_replaced"] > 0 and d["grad_evals"] > d["grad_evals_replaced"]
    assert len(d["stages"]) == 8
    assert any("NOT CONVERGED with 4 runs of 128 particles per data set" in w and "at most 128 particles" in w
               for w in m["warnings"])


def test_disagreeing_runs_get_more_runs_then_are_flagged(runs):
    strict, _ = runs
    c = strict["points"][0]["convergence"]
    assert c["converged"] is False and c["runs_per_dataset"] == 8 and c["runs_needed"] > 8
    assert strict["converged"] == [False] and strict["runs_per_dataset"] == [8]
    # the first 4 runs per data set and the 4 added are pooled: 2 data sets x 8 runs of 64 particles
    assert strict["sampler_totals"]["draws"] == 2 * 8 * 64
    assert strict["points"][0]["diagnostics"]["stages"].__len__() == 16
    assert any("NOT CONVERGED with 8 runs of 64 particles per data set" in w for w in strict["warnings"])
    assert headline(strict)[0].startswith("truth.v = 1: NOT CONVERGED")
    over = {nm: v > 1e-6 for nm, v in c["mass_mcse"].items()}             # a phase no run ever visits: 0, met
    assert headline(strict)[0].count("> target: runs disagree") == sum(over.values()) >= 1
    assert strict["converged_phase"] == {nm: [not bad] for nm, bad in over.items()}
    assert set(c["mass_mcse"]) == set(strict["mass"]) and c["targets"]["mass_mcse"] == 1e-6
    assert len(c["effective_runs"]) == 2 and all(1 <= e <= 8 + 1e-9 for e in c["effective_runs"])
    for nm, v in c["mass_mcse"].items():                    # what the rule saw is what the row reports
        assert v == pytest.approx(strict["points"][0]["mass_mcse"][nm], rel=1e-9)
    # each run's masses and data set are in the row: pooled by the runs' evidence they give the masses and
    # their jackknife errors again (the trial filter is off in this config)
    from slt_relu.posterior.masses import run_weights, runs_mcse
    row = strict["points"][0]
    ds, lz = np.array(row["dataset_per_run"]), np.array(row["log_evidence_per_run"])
    assert not row["trial_filter"]["applied"] and np.bincount(ds).tolist() == [8, 8]
    per_run = np.stack([row["mass_per_run"][nm] for nm in row["mass"]], -1)
    w = run_weights(lz, ds)
    pooled = [np.mean([w[ds == k] @ per_run[ds == k, i] for k in (0, 1)]) for i in range(per_run.shape[1])]
    np.testing.assert_allclose(pooled, list(row["mass"].values()), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(runs_mcse(per_run, ds, w), list(row["mass_mcse"].values()), rtol=1e-9, atol=1e-12)


def test_agreeing_runs_are_left_alone(runs):
    _, loose = runs
    c = loose["points"][0]["convergence"]
    assert c["converged"] is True and c["runs_per_dataset"] == 4 and c["runs_needed"] == 4
    assert loose["sampler_totals"]["draws"] == 2 * 4 * 64
    assert not any("NOT CONVERGED" in w for w in loose["warnings"])
    assert "NOT CONVERGED" not in headline(loose)[0] and "runs disagree" not in headline(loose)[0]
    assert loose["converged_phase"] == {nm: [True] for nm in loose["mass"]}
    assert np.isfinite(c["log_evidence_mcse"]) and c["log_evidence_mcse"] <= 1e3


@pytest.mark.parametrize("overrides, message", [
    ({"sampler": {"name": "nuts"}}, 'convergence: the stopping rule adds independent SMC runs; expected sampler.name'),
    ({"posterior.chains_per_dataset": 2}, "posterior.chains_per_dataset: the convergence targets need at least 4"),
    ({"phases.rule": "none", "phases.crossover": None},
     "convergence.mass_mcse: the masses it bounds are the rule's"),
    ({"convergence.mass_mcse": 0}, "convergence.mass_mcse: expected a number in (0, 1)"),
    ({"convergence.max_chains_per_dataset": 3, "convergence.max_particles": None},
     "convergence.max_chains_per_dataset: expected at least posterior.chains_per_dataset = 4"),
    ({"convergence.max_chains_per_dataset": 3},
     "convergence.max_chains_per_dataset: expected at least posterior.chains_per_dataset = 4"),
    ({"convergence.max_particles": 96}, "convergence.max_particles: expected sampler.num_particles = 64 times a "
                                        "power of 2 (at least 2), got 96"),
    ({"convergence.max_particles": 64}, "convergence.max_particles: expected sampler.num_particles = 64 times"),
    ({"sampler": {"name": "nuts"}, "convergence.mass_mcse": None, "convergence.log_evidence_mcse": None},
     'convergence.max_particles: grows the particles of SMC runs under the stopping rule; expected sampler.name'),
])
def test_bad_convergence_settings_are_refused_in_one_line(overrides, message):
    import jax

    try:
        with pytest.raises(ConfigError) as err:
            runner.prepare(CONFIG, {**BASE, **overrides})
    finally:
        jax.config.update("jax_enable_x64", True)           # prepare set the config's float32 before refusing
    assert message in str(err.value) and "\n" not in str(err.value)


def _sizes(points, size):
    """(particles, runs per data set) of each point a stub sampler is asked for: a point is its own (particles,
    runs) at round 0, the rule's growth size = (runs, particles) later."""
    return [pt if size is None else (size[1], size[0]) for pt in points]


def _stub_sample(spread):
    """A sampler of 2 data sets x 4 runs whose log Z spread on each data set is spread(particles): the runs'
    log Z are spread * (-1.5, -0.5, 0.5, 1.5); every run costs `particles` gradients.  Records its calls."""
    calls = []

    def sample(points, round_, size):
        out = []
        for N, R in _sizes(points, size):
            calls.append((round_, N, R))
            lz = np.tile(spread(N) * (np.arange(R) - (R - 1) / 2), 2)
            out.append({"log_evidence": lz, "dataset": np.repeat([0, 1], R), "flat": np.zeros((2 * R, N, 1)),
                        "grad_evals": np.full(2 * R, float(N)), "program_ticks": 1, "program_chains": 2 * R,
                        "stats": {}})
        return out
    return sample, calls


@pytest.mark.parametrize("spread, grown, converged", [
    (lambda N: 64.0 / N, [64, 256], True),                    # error 1 / N: r = 2.6 -> x4, then r = 0.75: met
    (lambda N: 8.0 / np.sqrt(N), [64, 256, 512, 1024], True),  # 1 / sqrt(N): r = 2.9, 1.46, 1.05, 0.73 (3 rounds)
    (lambda N: 2.0, [64, 256, 1024], False),                  # no better with particles (r = 3.9): the bound
])
def test_particle_growth_rounds_by_stub(spread, grown, converged):
    """until_runs_agree with max_particles and no room for more runs on a stub sampler (log Z target 0.15
    only): the particles grow by 2^ceil(log2 error/target), at most max_particles, in at most MAX_ROUNDS
    rounds, each round with its own round index (new keys); the runs are replaced, the replaced runs'
    gradients counted."""
    from slt_relu.posterior.stopping import StoppingRule, until_runs_agree

    conv = StoppingRule(log_evidence_mcse=0.15, max_particles=1024, max_chains_per_dataset=4)
    sample, calls = _stub_sample(spread)
    res = until_runs_agree([(64, 4)], sample, conv)[0]
    assert [N for _, N, _ in calls] == grown and [r for r, _, _ in calls] == list(range(len(grown)))
    assert all(R == 4 for _, _, R in calls)
    c = res["convergence"]
    assert c["converged"] is converged and c["particles"] == grown[-1] and c["runs_per_dataset"] == 4
    assert res["grad_evals_replaced"] == pytest.approx(8 * sum(grown[:-1]))
    assert res["program_chains"] == 8 * len(grown)


def test_one_run_carrying_a_data_set_is_not_converged():
    """Each data set's evidence rests on one run (log Z 10 nats above the other three): whatever the targets,
    fewer than MIN_EFFECTIVE_RUNS effective runs is not converged, and the warning says why."""
    from slt_relu.posterior.stopping import MIN_EFFECTIVE_RUNS, StoppingRule, agreement_warnings, run_agreement

    conv = StoppingRule(log_evidence_mcse=1e3)
    res = {"log_evidence": np.tile([0.0, -10.0, -10.0, -10.0], 2), "dataset": np.repeat([0, 1], 4),
           "flat": np.zeros((8, 64, 1))}
    a = run_agreement(conv, res)
    assert a.log_evidence_mcse < 1e3 and max(a.effective_runs) < MIN_EFFECTIVE_RUNS
    assert a.converged is False and a.runs_needed == 16 and a.targets == conv
    warning = agreement_warnings(a, "v = 1")
    assert len(warning) == 1 and "one run carries a data set's evidence: 1.00 effective runs" in warning[0]
    res["log_evidence"] = np.tile([0.0, -0.1, 0.1, 0.05], 2)
    assert run_agreement(conv, res).converged is True


def test_a_data_set_whose_evidence_is_in_one_run_grows_to_the_bound():
    """Every run but one on a data set has Z = 0 (log Z = -inf): the pool without that run is undefined, so the
    masses' jackknife error is infinite (not NaN, which more runs cannot mend): the point is not converged, asks
    for more runs than the bound and grows to it; a NaN log Z instead stops it where it is."""
    from slt_relu.posterior.masses import runs_mcse
    from slt_relu.posterior.stopping import StoppingRule, growth, run_agreement

    lz = np.array([0.0, -np.inf, -np.inf, -np.inf, 0.0, -0.1, 0.1, 0.05])
    ds = np.repeat([0, 1], 4)
    x = np.linspace(0.1, 0.8, 8)
    assert np.isinf(runs_mcse(x, ds, np.exp(lz) / np.repeat([1.0, np.exp(lz[4:]).sum()], 4)))
    conv = StoppingRule(mass_mcse=0.01, max_chains_per_dataset=12, max_particles=256)
    codes = (np.random.default_rng(0).random((8, 64)) < x[:, None]).astype(int)       # phase b with share x_r
    flat = np.zeros((8, 64, 1))
    a = run_agreement(conv, {"log_evidence": lz, "dataset": ds, "flat": flat}, (codes, ("a", "b")))
    assert a.converged is False and a.worst_ratio == np.inf and a.runs_needed == 13
    assert growth(a, conv) == ("particles", 4, 256)                  # neither way meets it: particles first
    assert growth(a._replace(particles=256), conv) == ("runs", 8, 256)
    lz[5] = np.nan
    b = run_agreement(conv, {"log_evidence": lz, "dataset": ds, "flat": flat}, (codes, ("a", "b")))
    assert b.converged is False and b.runs_needed is None and growth(b, conv) is None


def _agreement(r, R=4, N=1024):
    """run_agreement's verdict on R runs of N particles per data set with worst error / target r."""
    from slt_relu.posterior.stopping import RunAgreement, StoppingRule

    return RunAgreement(converged=r <= 1, mass_mcse={}, log_evidence_mcse=0.1, runs_per_dataset=R,
                        runs_needed=R if r <= 1 else int(np.ceil(R * r**2)) if np.isfinite(r) else None, particles=N,
                        worst_ratio=r, effective_runs=[float(R)], targets=StoppingRule(log_evidence_mcse=0.1))


@pytest.mark.parametrize("r, R, N, max_particles, expected", [
    # r = 1.05: 5 runs meet it, 1 more run (1,024 gradients per unit) against 4 runs of 2,048 (8,192)
    (1.05, 4, 1024, 4096, ("runs", 1, 1024)),
    # r = 1.5: 9 runs, 5 more (5,120) against 4 x 2,048 (8,192): runs
    (1.5, 4, 1024, 4096, ("runs", 5, 1024)),
    # r = 1.9: 15 runs, 11 more (11,264) against 4 x 2,048 (8,192): particles, twice
    (1.9, 4, 1024, 4096, ("particles", 4, 2048)),
    # r = 2.5: 25 runs, above max_chains_per_dataset 16; particles x 2^ceil(log2 2.5) = 4
    (2.5, 4, 1024, 4096, ("particles", 4, 4096)),
    # r = 3: x 4 would be 8,192, bounded at 4,096, and 36 runs are above 16: neither meets it, particles first
    (3.0, 4, 2048, 4096, ("particles", 4, 4096)),
    # r = 1.7: 12 runs, 8 more (8,192) against 4 x 2,048 (8,192): a tie, runs
    (1.7, 4, 1024, 4096, ("runs", 8, 1024)),
    # r = 2 exactly: x 2^ceil(log2 2) = 2 (8,192) against 12 more runs (12,288)
    (2.0, 4, 1024, 4096, ("particles", 4, 2048)),
    # at the particle bound: 1 more run; far above the target, as many runs as the bound allows
    (1.05, 4, 4096, 4096, ("runs", 1, 4096)),
    (2.5, 4, 4096, 4096, ("runs", 12, 4096)),
    # at both bounds, converged, or an error NaN: no growth
    (2.5, 16, 4096, 4096, None),
    (0.9, 4, 1024, 4096, None),
    (np.inf, 4, 1024, 4096, None),
    # without max_particles: runs only (9 for r = 1.5; up to the bound 16 for r = 3)
    (1.5, 4, 1024, None, ("runs", 5, 1024)),
    (3.0, 4, 1024, None, ("runs", 12, 1024)),
])
def test_growth_takes_the_cheaper_way(r, R, N, max_particles, expected):
    """growth compares the gradients of more runs (the missing R r^2 - R runs of N particles) with those of R
    new runs of N 2^ceil(log2 r) particles, and takes the cheaper; more runs short of the target only where
    the particles are at their bound."""
    from slt_relu.posterior.stopping import StoppingRule, growth

    conv = StoppingRule(log_evidence_mcse=0.15, max_particles=max_particles, max_chains_per_dataset=16)
    assert growth(_agreement(r, R, N), conv) == expected


def test_particles_then_runs_by_stub():
    """On a stub whose log Z spread falls as 1 / sqrt(particles), from 64 particles (r = 2.9: 34 runs needed,
    above the bound 16) the rule grows the particles x 4, then (r = 1.46 at 256: 9 runs, 5 more, cost 1,280
    against 4 x 512 = 2,048) adds runs at 256 particles, pooled with the 4 it has; the 9 runs' spread
    leaves r = 1.03 (the stub's new runs spread wider), so round 3 adds one more and the 10 meet it."""
    from slt_relu.posterior.stopping import StoppingRule, until_runs_agree

    conv = StoppingRule(log_evidence_mcse=0.15, max_particles=1024, max_chains_per_dataset=16)
    sample, calls = _stub_sample(lambda N: 8.0 / np.sqrt(N))
    res = until_runs_agree([(64, 4)], sample, conv)[0]
    assert calls == [(0, 64, 4), (1, 256, 4), (2, 256, 5), (3, 256, 1)]
    c = res["convergence"]
    assert c["converged"] is True and c["particles"] == 256 and c["runs_per_dataset"] == 10
    assert res["grad_evals_replaced"] == pytest.approx(2 * 4 * 64)         # the 64-particle runs, replaced
    assert res["program_chains"] == 2 * (4 + 4 + 5 + 1) and len(res["log_evidence"]) == 2 * 10


def test_growth_prefers_a_way_that_meets_the_target():
    """r = 3 at 2,048 particles with room for 64 runs: x 2 particles (bounded at 4,096, short of the x 4 the 1 / N
    law needs) costs 4 x 4,096 = 16,384 against 32 more runs of 2,048 (65,536), but only the runs meet the
    target."""
    from slt_relu.posterior.stopping import StoppingRule, growth

    conv = StoppingRule(log_evidence_mcse=0.15, max_particles=4096, max_chains_per_dataset=64)
    assert growth(_agreement(3.0, 4, 2048), conv) == ("runs", 32, 2048)


def _scripted_sample(spreads):
    """A stub sampler of 2 data sets whose k-th call returns runs with log Z spread spreads[k] (as _stub_sample,
    the same pattern on both data sets); records (round, particles, runs) of each call."""
    calls = []

    def sample(points, round_, size):
        out = []
        for N, R in _sizes(points, size):
            spread = spreads[len(calls)]
            calls.append((round_, N, R))
            lz = np.tile(spread * (np.arange(R) - (R - 1) / 2), 2)
            out.append({"log_evidence": lz, "dataset": np.repeat([0, 1], R), "flat": np.zeros((2 * R, N, 1)),
                        "grad_evals": np.full(2 * R, float(N)), "program_ticks": 1, "program_chains": 2 * R,
                        "stats": {"num_stages": np.full(2 * R, 3)}})
        return out
    return sample, calls


def test_runs_then_particles_by_stub():
    """First runs a little too far apart (r about 1.2: 2 more runs of 64 particles, 128 gradients, against 4 x 128),
    then the 2 new runs far apart (the pool's r far above 2, beyond 16 runs: particles, bounded at 128, for all
    6 runs the point now has), then runs that agree: the replaced runs' gradients are the 6 runs of 64, the
    stats joined along the runs."""
    from slt_relu.posterior.stopping import StoppingRule, until_runs_agree

    conv = StoppingRule(log_evidence_mcse=0.15, max_particles=128, max_chains_per_dataset=16)
    sample, calls = _scripted_sample([0.41, 5.0, 0.01])
    res = until_runs_agree([(64, 4)], sample, conv)[0]
    assert calls == [(0, 64, 4), (1, 64, 2), (2, 128, 6)]
    c = res["convergence"]
    assert c["converged"] is True and c["particles"] == 128 and c["runs_per_dataset"] == 6
    assert res["grad_evals_replaced"] == pytest.approx(2 * 6 * 64)
    assert res["program_chains"] == 2 * (4 + 2 + 6) and res["stats"]["num_stages"].shape == (12,)


@pytest.mark.parametrize("rule, match", [
    ({"mass_mcse": 1.5}, r"rule\.mass_mcse: expected None or a number in \(0, 1\), got 1\.5"),
    ({"log_evidence_mcse": -1.0}, r"rule\.log_evidence_mcse: expected None or a positive finite number"),
    ({"log_evidence_mcse": 0.1, "max_chains_per_dataset": 1}, r"rule\.max_chains_per_dataset: expected an integer"),
    ({"log_evidence_mcse": 0.1, "max_particles": 0.5}, r"rule\.max_particles: expected None or a positive integer"),
])
def test_a_bad_stopping_rule_is_refused_in_one_line(rule, match):
    """The library's stopping rule is a plain NamedTuple, checked where it enters (run_agreement, growth,
    until_runs_agree); without labels a mass target cannot be read."""
    from slt_relu.posterior.stopping import StoppingRule, growth, run_agreement, until_runs_agree

    res = {"log_evidence": np.zeros(8), "dataset": np.repeat([0, 1], 4), "flat": np.zeros((8, 64, 1))}
    for call in (lambda: run_agreement(StoppingRule(**rule), res), lambda: growth({}, StoppingRule(**rule)),
                 lambda: until_runs_agree([], None, StoppingRule(**rule))):
        with pytest.raises(ValueError, match=f"^{match}") as err:
            call()
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="^rule: expected a StoppingRule, got dict$"):
        run_agreement({"mass_mcse": 0.1}, res)
    with pytest.raises(ValueError, match="^labels: expected the particles' phase codes and names"):
        run_agreement(StoppingRule(mass_mcse=0.1), res)


def test_the_kinds_convergence_table_builds_the_library_rule():
    """[convergence] (pydantic, the posterior kind's schema) becomes the library's StoppingRule with the same
    numbers; without a target there is no rule."""
    import jax

    from slt_relu.posterior.stopping import StoppingRule

    try:
        prep = runner.prepare(CONFIG, {**BASE, "convergence.mass_mcse": 0.02, "convergence.max_chains_per_dataset": 8})
        none = runner.prepare(CONFIG, {**BASE, "convergence.mass_mcse": None, "convergence.log_evidence_mcse": None,
                                       "convergence.max_particles": None})
    finally:
        jax.config.update("jax_enable_x64", True)           # prepare set the config's float32
    rule = prep.resolved.points[0].settings.convergence
    assert rule == StoppingRule(mass_mcse=0.02, log_evidence_mcse=prep.settings.convergence.log_evidence_mcse,
                                max_chains_per_dataset=8, max_particles=prep.settings.convergence.max_particles)
    assert rule._asdict() == prep.settings.convergence.model_dump()
    assert none.resolved.points[0].settings.convergence is None
