"""A sweep's Dataset (slt_relu.posterior.sweep_results) from points whose per-point dimensions differ in length:
SMC's stopping rule gives some points more runs than others, a swept posterior.datasets more data sets.  Small
synthetic points (slt_relu.posterior.point.PosteriorPoint), no sampling."""
import numpy as np
import pytest

from slt_relu.posterior import evidence, masses, point, sweep_results as sr
from slt_relu.posterior.stopping import RunAgreement, StoppingRule

PHASES = ("a", "b")


def _point(runs: int, datasets: int, seed: int, beta: float = 1.0, labels=("x", "y", "z"), trial_filter=False,
           smc=True) -> point.PosteriorPoint:
    """One point's results as posterior_report makes them, from synthetic SMC runs: ``runs`` independent runs of
    16 particles on ``datasets`` data sets (or ``runs`` MCMC chains of 16 draws)."""
    rng = np.random.default_rng(seed)
    dataset = np.arange(runs) % datasets
    loss = rng.normal(1.0, 0.1, (runs, 16)) + 0.05 * dataset[:, None]
    codes = rng.integers(0, 2, (runs, 16))
    classified = np.asarray(rng.choice(labels, (runs, 16)), object)
    lz = rng.normal(-10.0, 0.3, runs) if smc else None
    trials = point.filter_trials(loss, dataset, np.full(datasets, 0.9), z=1.2, applied=trial_filter)
    rule_masses = point.point_masses(codes, PHASES, dataset, trials, lz)
    labelled = point.point_masses(classified, None, dataset, trials, lz)
    table = point.cross_table(codes, PHASES, classified, dataset, lz)
    names = {lab: f"phase {lab}" for lab in labels}
    if not smc:
        diagnostics = masses.chain_diagnostics(loss, dataset, loss[..., None], None, np.full(runs, 100))
        return point.PosteriorPoint(100, beta, 100 * beta, trials, rule_masses, labelled, names, table, None,
                                    diagnostics)
    agreement = RunAgreement(runs > 4, dict(zip(PHASES, rule_masses.mcse.tolist())), 0.1, runs // datasets, runs, 16,
                             0.5, [runs / datasets] * datasets, StoppingRule(mass_mcse=0.05))
    diagnostics = evidence.SMCDiagnostics(np.full(runs, 3), 0.5, 0.7, 0.6, 1.0, 100 * runs)
    return point.PosteriorPoint(100, beta, 100 * beta, trials, rule_masses, labelled, names, table,
                                evidence.point_evidence(lz, dataset, loss, (codes, PHASES), classified), diagnostics,
                                agreement)


def _sweep(sweep: dict, points: list, attrs=None):
    values = [dict(zip(sweep, v)) for v in np.array(np.meshgrid(*sweep.values(), indexing="ij")).reshape(
        len(sweep), -1).T.tolist()] if sweep else [{}]
    return sr.sweep_dataset(sweep, [p.to_dataset() for p in points], values, attrs)


def _same(combined, alone):
    """Each variable of a point's own Dataset equals the combined Dataset's at that point on the point's entries,
    and the combined Dataset is NaN (a fill: 0 for a label the point lacks) on the entries it lacks."""
    for name, da in alone.data_vars.items():
        got = combined[name].sel({d: alone[d] for d in da.dims})
        np.testing.assert_array_equal(got.values, da.values, err_msg=name)
        for dim in ("dataset", "run"):
            if dim in da.dims and combined.sizes[dim] > alone.sizes[dim]:
                pad = combined[name].isel({dim: slice(alone.sizes[dim], None)})
                assert (pad.isnull() if pad.dtype.kind == "f" else ~pad.astype(bool)).all(), name


@pytest.mark.parametrize("trial_filter", [False, True])
def test_points_with_4_and_8_runs_combine_and_their_metrics_are_each_points_own(trial_filter):
    sweep = {"posterior.beta": [0.5, 1.0], "truth.t": [1.0, 2.0]}
    runs = {(0.5, 1.0): 4, (0.5, 2.0): 8, (1.0, 1.0): 8, (1.0, 2.0): 8}
    datasets = {1.0: 2, 2.0: 4}                                     # posterior.datasets along t, shared along beta
    grid = [(b, t) for b in sweep["posterior.beta"] for t in sweep["truth.t"]]
    points = [_point(runs[b, t], datasets[t], seed=i, beta=b, trial_filter=trial_filter,
                     labels=("x", "y") if i == 3 else ("x", "y", "z"))            # point 3 lacks label z
              for i, (b, t) in enumerate(grid)]
    assert any(p.trials.applied and not p.trials.kept.all() for p in points) == trial_filter
    ds = _sweep(sweep, points)
    assert ds.sizes["run"] == 8 and ds.sizes["dataset"] == 4
    np.testing.assert_array_equal(ds["num_runs"].values, [[4, 8], [8, 8]])
    np.testing.assert_array_equal(ds["trials"].values, [[2, 4], [2, 4]])
    np.testing.assert_array_equal(sr.present(ds, "run").sel({"posterior.beta": 0.5, "truth.t": 1.0}),
                                  [True] * 4 + [False] * 4)

    combined = sr.grids(sr.with_crossover(ds, sweep, PHASES, "truth.t"), sweep)
    for k, ((b, t), pt) in enumerate(zip(grid, points)):
        at = {"posterior.beta": b, "truth.t": t}
        _same(ds.sel(at), pt.to_dataset())
        z = 0.0 if k == 3 else pt.classified.mass[pt.classified.names.index("z")]     # a label absent at a point: 0
        assert ds["classify_mass"].sel({**at, "label": "z"}).item() == z
        alone = sr.grids(_sweep({}, [pt]), {})
        i, j = sweep["posterior.beta"].index(b), sweep["truth.t"].index(t)
        for key, field in (("mass", "mass"), ("mass_se", "se"), ("mass_mcse", "mcse")):
            for p, nm in enumerate(PHASES):
                value = getattr(pt.masses, field)[p]
                assert combined[key][nm][i][j] == alone[key][nm] == value and np.isfinite(value)
        for field in ("mass", "mass_se", "mass_mcse"):
            for lab, v in alone["classify_phase"][field].items():
                assert combined["classify_phase"][field][lab][i][j] == v
        assert combined["log_evidence"][i][j] == alone["log_evidence"] == pt.evidence.log_evidence
        assert combined["log_evidence_mcse"][i][j] == alone["log_evidence_mcse"]
        for key in ("free_energy", "free_energy_classify_phase"):
            assert combined[key]["total"][i][j] == alone[key]["total"]
            for field in sr.FREE_ENERGY_FIELDS:
                for nm, v in alone[key][field].items():
                    np.testing.assert_equal(combined[key][field][nm][i][j], v)
        for nm, per_label in alone["cross_table"].items():
            for lab, v in per_label.items():
                assert combined["cross_table"][nm][lab][i][j] == v
        # who leads: the mean over the point's own (kept) data sets of mass_a - mass_b
        kept = pt.masses.per_trial[pt.trials.used]
        assert combined["lead"]["difference"][i][j] == pytest.approx(np.mean(kept[:, 0] - kept[:, 1]), rel=1e-12)

    # the crossover along t for each beta from the points' own data sets, as crossover_bootstrap sees them
    rng = np.random.default_rng(0)
    for i in range(2):
        pts = points[2 * i: 2 * i + 2]
        a, b = ([p.masses.per_trial[p.trials.used][:, k] for p in pts] for k in range(2))
        want = masses.crossover_bootstrap(np.asarray(sweep["truth.t"]), a, b, rng)
        np.testing.assert_equal([combined["crossover_t"][i], combined["crossover_t_se"][i],
                                 combined["crossover_t_bootstrap_fraction"][i]], list(want))

    # lambda along beta at each t: the slopes over that t's own data sets
    for j, t in enumerate(sweep["truth.t"]):
        pts = points[j::2]
        F = np.array([p.evidence.free_energy.phase_free_energy for p in pts])
        L = np.array([p.evidence.min_loss_per_trial for p in pts])
        want = evidence.free_energy_slopes([p.n_beta for p in pts], F, L)
        got = sr.lambda_along_beta(ds, sweep)[j]
        assert isinstance(got, sr.PhaseLambdas) and tuple(got.lambdas) == PHASES
        assert got.values == {"truth.t": t} and np.all(np.isfinite([e.lambda_ for e in got.lambdas.values()]))
        np.testing.assert_allclose([e.lambda_ for e in got.lambdas.values()], [e.lambda_ for e in want.lambdas],
                                   rtol=1e-12)
        np.testing.assert_allclose([e.se for e in got.lambdas.values()], [e.se for e in want.lambdas], rtol=1e-12)
        np.testing.assert_allclose(got.n_beta, [p.n_beta for p in pts], rtol=1e-12)
        np.testing.assert_allclose(got.excess[PHASES[0]], want.excess[:, :, 0].mean(1), rtol=1e-12)
        # metrics.json's entry (the posterior kind converts in one place): the keys and numbers it always had
        from slt_relu.kinds.posterior_report import lambda_entry

        entry = lambda_entry(got)
        assert list(entry) == ["values", "n_beta", "lambda", "lambda_se", "excess", "excess_se"]
        assert entry["lambda"] == {nm: e.lambda_ for nm, e in got.lambdas.items()}
        assert entry["excess"][PHASES[0]] == got.excess[PHASES[0]].tolist()


def test_samplers_with_different_runs_combine(tmp_path):
    """[compare]: the same points with 4 runs, with 8 runs and by MCMC (no runs; other labels), one Dataset along
    ``sampler``; it round-trips."""
    from slt_relu.netcdf import read_tree, write_tree

    sweep = {"truth.t": [1.0, 2.0]}
    make = lambda runs, **kw: _sweep(sweep, [_point(runs, 2, seed=i, **kw) for i in range(2)], {"sampler": "smc"})
    four, eight, mcmc = make(4), make(8), make(4, smc=False, labels=("x", "w"))
    both = sr.by_sampler(four, eight, mcmc.assign_attrs(sampler="nuts"))
    assert both.sizes["run"] == 8 and both["sampler"].values.tolist() == ["smc (0)", "smc (1)", "nuts (2)"]
    np.testing.assert_array_equal(both["num_runs"].values, [[4, 4], [8, 8], [np.nan, np.nan]])  # (no step sizes)
    assert both["stages"].isel(sampler=2).isnull().all() and both["rhat_loss"].isel(sampler=0).isnull().all()
    assert both["log_evidence_per_run"].isel(sampler=0, run=slice(4, None)).isnull().all()
    assert both["label_name"].to_series().to_dict() == {lab: f"phase {lab}" for lab in both["label"].values}
    for i, alone in enumerate((four, eight, mcmc)):
        _same(both.isel(sampler=i), alone)
    write_tree(both, tmp_path / "results.nc")
    back = read_tree(tmp_path / "results.nc").to_dataset()
    np.testing.assert_array_equal(back["log_evidence_per_run"].values, both["log_evidence_per_run"].values)
