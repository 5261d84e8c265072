"""Tiny settings of every shipped config: each runs in seconds in the tests (`test_reference.py`,
`test_cli.py`) and in `write_references.py`, which writes the references they are compared with."""
LLC_TINY = {"llc.n": 300, "llc.sgld.num_chains": 2, "llc.sgld.num_steps": 60, "llc.sgld.num_burnin": 10,
            "llc.sgld.thin": 1}
POSTERIOR_TINY = {"posterior.n": 200, "posterior.datasets": 2, "sampler.num_warmup": 60, "sampler.num_samples": 40,
                  "phases.classify_every": 4}
SMC_TINY = {"posterior.n": 200, "posterior.datasets": 2, "posterior.chains_per_dataset": 2,
            "sampler.num_particles": 64, "phases.classify_every": 4}
TMS_TRANSITION_TINY = {"transition.ns": [20, 40], "transition.refine": 0, "transition.datasets": 2, "transition.runs": 2,
                       "transition.n_boot": 50, "smc.num_particles": 64, "smc.num_mcmc_steps": 2, "smc.num_leapfrog": 4,
                       "smc.max_stages": 60, "smc.particle_batch": 64}

TINY = {
    "dslt3_degenerate_node.toml": {"landscape.resolution": 15, "landscape.fisher_points": 3},
    "dslt3_scaling_valley.toml": {"landscape.resolution": 15, "landscape.fisher_points": 3},
    "fisher_rank_survey.toml": {
        "inputs.cells": 12,
        "fisher.points[0].widths": [1, 3], "fisher.points[0].count": 1,
        "fisher.points[1].m": [3],
        "fisher.points[2].cases": ["q_zero"],
        "fisher.points[3].cases": ["active_on_box"],
        "fisher.points[4].widths": [2], "fisher.points[4].count": 1,
    },
    "true_set_m_symmetric.toml": {"symmetry.widths": [3, 4], "symmetry.checks": 1},
    "linear_regions_xor.toml": {"regions.resolution": 41, "regions.xor_wide.steps": 50, "regions.xor_wide.width": 6,
                                "regions.annulus.steps": 50, "regions.annulus.samples": 100,
                                "regions.lines.widths": [4, 8], "regions.lines.lines": 3},
    "functional_dimension_depth_width.toml": {"functional_dimension.n_in": [3], "functional_dimension.depths": [2, 3],
                                              "functional_dimension.networks": 3},
    "dslt4_pt1_node_degeneracy.toml": {**POSTERIOR_TINY, "sweep.truth.t": [1.0, 1.5707963267948966]},
    "dslt4_pt2_orientation_reversal.toml": {**POSTERIOR_TINY, "sweep.truth.v": [1.0, 3.0]},
    "dslt4_pt1_phase_diagram.toml": {**POSTERIOR_TINY, "sweep.truth.t": [1.0, 1.5707963267948966],
                                     "sweep.posterior.beta": ["wbic", 1.0]},
    # the beta sweep (a NUTS program to compile per case) on the two generic cases and one normal crossing only
    "llc_known_values.toml": {**LLC_TINY, "cases[2].methods": ["sgld"], "cases[4].methods": ["sgld"],
                              "cases[5].methods": ["sgld"], "llc.beta_sweep.num_warmup": 30, "llc.beta_sweep.num_samples": 20,
                              "llc.beta_sweep.chains_per_beta": 2, "llc.calibration.step_sizes": [1e-5, 1e-4],
                              "llc.calibration.localizations": [1.0], "llc.calibration.num_steps": 60,
                              "llc.calibration.num_burnin": 10},
    "llc_dslt4_phases.toml": LLC_TINY,
    # with NUTS beside SMC ([compare], which no shipped config runs at full size any more)
    "dslt4_pt1_smc.toml": {**SMC_TINY, "posterior.chains_per_dataset": 4, "convergence.max_chains_per_dataset": 4,
                           "compare.num_warmup": 30, "compare.num_samples": 20,
                           "sweep.truth.t": [1.0, 1.5707963267948966]},
    # (at most 4 runs: the growth of the particles only; tests/test_stopping_rule.py grows both)
    "dslt4_pt2_smc.toml": {**SMC_TINY, "posterior.chains_per_dataset": 4, "convergence.max_particles": 128,
                           "convergence.max_chains_per_dataset": 4,
                           "sweep.truth.v": [1.0, 3.0]},
    # four small cases (two with m = 2; one from data sets of n = 1e5), two runs each, t up to 1e5
    # (without [mcmc], [sgld], [gibbs]: NUTS compiles a program per loss; tests/test_lambda_curve.py runs NUTS and SGLD
    # on two cases, known_lambda_large.toml the Gibbs sampler)
    "known_lambda_suite.toml": {"curve.runs": 2, "curve.t_max": 1e5, "curve.decades": 2.0, "smc.num_particles": 64,
                                "mcmc": None, "sgld": None, "gibbs": None,
                                "cases": [{"name": "w1^2 w2^2", "family": "normal_crossing", "k": [1, 1]},
                                          {"name": "RRR 2-1-2", "family": "reduced_rank", "input_dim": 2, "hidden": 1,
                                           "output_dim": 2},
                                          {"name": "regular d = 2", "family": "regular", "num_params": 2},
                                          {"name": "RRR 2-1-2, n = 1e5", "family": "reduced_rank", "input_dim": 2,
                                           "hidden": 1, "output_dim": 2, "n": 100000}]},
    # three cases by Gibbs alone, 4 chains through 10 t up to 1e6 (20 + 20 sweeps each; 10 t: the fewest the data
    # case's rule takes): a small one, one past SMC's 2,000 parameters, one from data sets of n = 1e4
    "known_lambda_large.toml": {"curve.t_max": 1e6, "curve.decades": 2.0, "curve.runs": 4, "gibbs.temperatures": 10,
                                "gibbs.chains": 4, "gibbs.burn_in": 20, "gibbs.sweeps": 20,
                                "cases": [{"name": "DLN 3-3-3-3", "family": "deep_linear", "input_dim": 3,
                                           "widths": [3, 3, 3]},
                                          {"name": "DLN 32-32-32, r = 2", "family": "deep_linear", "input_dim": 32,
                                           "widths": [32, 32], "true_rank": 2},
                                          {"name": "RRR 3-2-3, r = 1, n = 1e4", "family": "reduced_rank", "input_dim": 3,
                                           "hidden": 2, "output_dim": 3, "true_rank": 1, "n": 10000, "t_max": 1e4}]},
    # PT1's degenerate phase only (one compiled program), two runs of 64 particles to t = 1e4 (the case's own
    # t_max and runs: its overrides of [curve])
    "lambda_per_phase.toml": {"curve.runs": 3, "curve.t_max": 1e5, "curve.decades": 2.0, "smc.num_particles": 64,
                              "cases": [{"name": "PT1 +|1 deg", "family": "dslt_phase", "truth": "dslt4_pt1",
                                         "truth_options": {"t": 1.5707963267948966}, "width": 2,
                                         "phase": "+ | 1 degenerate", "radius": 0.75, "runs": 2, "t_max": 1e4,
                                         "reference": {"name": "SGLD", "estimate": 2.2963, "se": 0.0532}}]},
    "dslt4_free_energy.toml": {**SMC_TINY, "sweep.posterior.beta": [0.3, 3.0], "sweep.truth.t": [1.0, 1.5707963267948966]},
    # c = 5 only: its table and two k-gons on one compiled program (the 4-gon with a folded negative unused bias,
    # the 5-gon), two runs each up to t = 1e6
    "tms_kgons.toml": {"table.c": [5], "estimate.c": [5], "estimate.runs": 2, "estimate.t_max": 1e6,
                       "estimate.decades": 2.0, "estimate.prior_std": 0.05, "smc.num_particles": 64},
    # two n, 2 data sets x 2 runs of 64 particles, no refinement (the grid stays the config's on any machine); the
    # check (a second compiled program) in the c = 5 config only
    "tms_transition.toml": {**TMS_TRANSITION_TINY, "check.enabled": False},
    # c = 4, two n, 3 runs of 60 Adam steps, 5 checkpoints, 2 SGLD chains of 60 steps each
    "tms_training.toml": {"training.c": 4, "training.ns": [20, 60], "training.runs": 3, "training.steps": 60,
                          "training.checkpoints": 5, "llc.num_chains": 2, "llc.num_steps": 60, "llc.num_burnin": 20,
                          "llc.thin": 2},
    "tms_transition_c5.toml": {**TMS_TRANSITION_TINY, "check.datasets": 1},
    # the three networks at 7 x 7 (digits: 5 x 5) grids, a few probes; the digits MLP 64-8-10 after 30 Adam steps
    "network_landscape_truth.toml": {"network.n": 500, "landscape.resolution": 7, "landscape.line_resolution": 9,
                                     "landscape.trace_samples": 8, "landscape.density_probes": 2},
    "network_landscape_digits.toml": {"network.widths": [64, 8, 10], "network.steps": 30, "landscape.resolution": 5,
                                      "landscape.line_resolution": 7, "landscape.top_eigenvalues": 3,
                                      "landscape.trace_samples": 4, "landscape.density_probes": 2,
                                      "landscape.density_steps": 10},
    "network_landscape_tms.toml": {"landscape.resolution": 7, "landscape.line_resolution": 9,
                                   "landscape.trace_samples": 8, "landscape.density_probes": 2},
}


_RUNS: dict = {}


def tiny_run(name: str):
    """The results folder of shipped config NAME's tiny run (the overrides TINY[NAME]), run once per test process
    and shared by the tests that read it (none may write to it): test_reference.py compares it with the stored
    reference, the kind's own tests check its details; where pytest-xdist gives them one process, the run is paid
    once."""
    if name not in _RUNS:
        import atexit
        import shutil
        import tempfile
        from pathlib import Path

        from slt_relu.workflow import runner

        root = Path(tempfile.mkdtemp(prefix="slt-relu-tiny-"))
        atexit.register(shutil.rmtree, root, True)
        _RUNS[name] = runner.run_config(Path(__file__).resolve().parent.parent / "experiments" / name, root / "res",
                                        progress=False, overrides=TINY[name])
    return _RUNS[name]

