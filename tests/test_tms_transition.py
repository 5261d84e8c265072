"""The Bayesian phase transition of the TMS (slt_relu.tms.transition): the sorted-input loss against the dense one,
the phase codes, the masses' pooling by evidence on tiny SMC runs, the crossover interpolation and its bootstrap
on constructed masses, and the asymptotic formula's n."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.sampling import SMCSettings
from slt_relu.tms import TMSParams, flat_empirical_loss, label_name, make_kgon, refined_kgon, sample_inputs, to_flat
from slt_relu.tms import crossover as X
from slt_relu.tms import phases as P
from slt_relu.tms import sorted_loss as L
from slt_relu.tms import transition as T

TINY = SMCSettings(num_particles=64, num_mcmc_steps=2, num_leapfrog=4, max_stages=60, particle_batch=64)
KW = dict(datasets=2, runs=2, settings=TINY)


@pytest.mark.parametrize("n, size", [(1, None), (37, None), (300, 512)])
def test_sorted_loss_equals_the_dense_empirical_loss(n, size):
    """L_n and its gradient from the sorted magnitudes equal flat_empirical_loss (a mean over the n inputs) at
    random parameters, at k-gons (columns at right angles: G_ji = 0 exactly, the zero-slope branch), with a zero
    input (mu = 0) and with padding.  Tolerance 1e-12: float64 rounding of sums of n terms of order 1."""
    c = 6
    x = np.array(sample_inputs(jax.random.key(n), n, c))
    x[0] = 0.0
    data = L.sorted_inputs(x, size)
    assert data.mu.shape == (c, size or n) and int(data.count.sum()) == n
    ws = [to_flat(refined_kgon(c, k, p)) for k, p in ((6, 0), (5, 1), (5, 0), (4, 2), (4, 0))]
    ws += list(0.8 * jax.random.normal(jax.random.key(1), (5, 3 * c)))
    for w in ws:
        want, g_want = jax.value_and_grad(flat_empirical_loss)(w, jnp.asarray(x))
        got, g_got = jax.value_and_grad(L.sorted_empirical_loss)(w, data)
        assert float(got) == pytest.approx(float(want), rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(g_got, g_want, rtol=1e-10, atol=1e-12)
    # many parameters on many data sets in one program: data set k's losses at its parameters (the same rule)
    other = L.sorted_inputs(np.array(sample_inputs(jax.random.key(n + 1), n, c)), size)
    both = jax.tree.map(lambda a, b: jnp.stack([a, b]), data, other)
    flat = jnp.stack([jnp.stack(ws[:4]), jnp.stack(ws[-4:])])                     # (2, 4, 3 c)
    want = [[float(L.sorted_empirical_loss(w, d)) for w in row] for row, d in zip(flat, (data, other))]
    np.testing.assert_allclose(L.sorted_empirical_losses(flat, both), want, rtol=1e-12, atol=1e-14)


def test_sorted_inputs_validation():
    x = np.zeros((3, 4))
    x[0, :2] = 0.5
    with pytest.raises(ValueError, match="^x: expected at most one nonzero"):
        L.sorted_inputs(x)
    with pytest.raises(ValueError, match="^size: expected at least the 3 inputs"):
        L.sorted_inputs(np.zeros((3, 4)), 2)
    with pytest.raises(ValueError, match="^x: expected inputs of shape"):
        L.sorted_inputs(np.zeros(3))


def test_phase_names_and_codes_of_the_kgons():
    """Every refined k-gon variant of c = 6 gets the code of its own name; the variants are 1 + 2 + ... + 7 = 28
    plus "none", the groups 7 + "none"; a 5-gon "-" whose unused column is long (length 1) but dead (bias -2 <
    -|W_u|^2: its output never fires) is the "5-gon -" with dead_unused and not without (six long columns, no
    regular hexagon)."""
    c = 6
    variants, groups, group_of = P.phase_names(c)
    assert len(variants) == 29 and variants[-1] == "none" and variants[:3] == ("6-gon", "5-gon +", "5-gon -")
    assert groups == ("6-gon", "5-gon", "4-gon", "3-gon", "2-gon", "1-gon", "0-gon", "none")
    for k in range(1, c + 1):
        for npos in range(c - k + 1):
            v, g = P.phase_codes(refined_kgon(c, k, npos))
            assert variants[int(v)] == label_name(k, npos, c) and groups[int(g)] == f"{k}-gon"
    p = refined_kgon(c, 5, 0)
    W = p.W.at[:, 5].set(jnp.asarray([0.3, 0.95]))
    dead = TMSParams(W, p.b.at[5].set(-2.0))
    assert variants[int(P.phase_codes(dead)[0])] == "5-gon -"
    assert variants[int(P.phase_codes(dead, dead_unused=False)[0])] == "none"
    batch = TMSParams(jnp.stack([refined_kgon(c, 6).W, dead.W]), jnp.stack([refined_kgon(c, 6).b, dead.b]))
    np.testing.assert_array_equal(P.phase_codes(batch)[1], [0, 1])


@pytest.fixture(scope="module")
def tiny_point():
    """One tiny SMC point: c = 6, n = 20 (padded to 40, the program bayesian_transition's test reuses), 2 data
    sets x 2 runs of 64 particles."""
    return T.posterior_phase_masses(jax.random.key(3), 6, 20, pad_to=40, keep_particles=True, **KW)


def test_masses_sum_to_one_and_pool_by_evidence(tiny_point):
    """Every run's, data set's and the mean masses sum to 1 (variants and groups alike: every particle has one
    label); the weights are the softmax of the runs' log Z per data set and the data sets' masses their weighted
    means; F_alpha = -log Zbar - log mass_alpha (1e-12: float64 arithmetic)."""
    ds = tiny_point
    for v, dim in (("run_mass", "variant"), ("run_phase_mass", "phase"), ("mass", "variant"),
                   ("phase_mass", "phase"), ("mass_mean", "variant"), ("phase_mass_mean", "phase")):
        np.testing.assert_allclose(ds[v].sum(dim).values, 1.0, rtol=1e-12)
    lz = ds.log_evidence.values
    w = np.exp(lz - lz.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    np.testing.assert_allclose(ds.weight.values, w, rtol=1e-12)
    np.testing.assert_allclose(ds.mass.values, np.einsum("kr,krp->kp", w, ds.run_mass.values), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ds.mass_mean.values, ds.mass.values.mean(0), rtol=1e-12, atol=1e-15)
    log_zbar = np.log(np.exp(lz).mean(1))
    np.testing.assert_allclose(ds.log_z.values, log_zbar, rtol=1e-12)
    m = ds.phase_mass.values
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(ds.phase_free_energy.values, -log_zbar[:, None] - np.log(m), rtol=1e-12)
    grouped = ds.mass.groupby("group").sum().sel(group=list(ds.phase.values)).values
    np.testing.assert_allclose(grouped, m, rtol=1e-12, atol=1e-15)
    assert np.all(ds.final_lambda.values == 1.0) and np.all(np.isfinite(lz))
    assert ds.attrs["n"] == 20 and ds.sizes["dataset"] == 2 and ds.sizes["run"] == 2


def test_relabel_reproduces_and_changes_the_rule(tiny_point):
    """The kept particles relabelled with the run's own rule give its masses, free energies and mean losses
    exactly; a looser angle tolerance moves mass out of "none" only (every labelled particle stays labelled:
    the regular polygons at 0.25 are regular at 0.5), and the masses still sum to 1."""
    ds = tiny_point
    assert ds.particles.dims == ("dataset", "run", "particle", "coordinate") and ds.particles.shape[-2:] == (64, 18)
    same = T.relabel(ds)
    for v in ("run_mass", "mass", "phase_mass", "free_energy", "mean_loss", "log_z"):
        np.testing.assert_array_equal(same[v].values, ds[v].values)
    loose = T.relabel(ds, angle_tol=0.5)
    assert loose.attrs["angle_tol"] == 0.5
    np.testing.assert_allclose(loose.run_phase_mass.sum("phase").values, 1.0, rtol=1e-12)
    labelled = ds.run_phase_mass.drop_sel(phase="none")
    assert np.all(loose.run_phase_mass.drop_sel(phase="none").sum("phase").values >= labelled.sum("phase").values)
    with pytest.raises(ValueError, match="^ds: expected a Dataset with particles"):
        T.relabel(ds.drop_vars("particles"))


def test_same_key_same_numbers(tiny_point):
    again = T.posterior_phase_masses(jax.random.key(3), 6, 20, pad_to=40, **KW)
    np.testing.assert_array_equal(again.run_mass.values, tiny_point.run_mass.values)
    np.testing.assert_array_equal(again.log_evidence.values, tiny_point.log_evidence.values)


def test_bayesian_transition_plumbing(tiny_point):
    """Two n on nested data sets: the Dataset's dims, the comparisons (the grouped 6-gon / 5-gon and each 5-gon
    variant) with the formula's n beside them, and the same key giving the same numbers as posterior_phase_masses
    with the same nested inputs."""
    ds = T.bayesian_transition(jax.random.key(4), 6, [20, 40], n_boot=50, keep_particles=True, **KW)
    assert ds.sizes["n"] == 2 and list(ds.comparison.values) == ["6-gon vs 5-gon", "6-gon vs 5-gon +",
                                                                  "6-gon vs 5-gon -"]
    assert ds.run_mass.dims == ("n", "dataset", "run", "variant")
    assert ds.log_mass_ratio.dims == ("comparison", "n")
    nf = ds.n_formula.values
    assert math.isnan(nf[1]) and 400 < nf[2] < 500 and 400 < nf[0] < 500
    k_data, k_n = jax.random.split(jax.random.key(4))
    xs = np.stack([np.asarray(sample_inputs(k, 40, 6)) for k in jax.random.split(k_data, 2)])
    one = T.posterior_phase_masses(jax.random.fold_in(k_n, 0), 6, 20, inputs=xs, pad_to=40, **KW)
    np.testing.assert_array_equal(one.run_mass.values, ds.run_mass.isel(n=0).values)
    again = T.relabel(ds)
    np.testing.assert_array_equal(again.log_mass_ratio.values, ds.log_mass_ratio.values)
    np.testing.assert_array_equal(again.n_formula.values, ds.n_formula.values)


def _runs(values, K=3, R=2):
    """(B, K, R) per-run masses all equal to values[b]."""
    return np.broadcast_to(np.asarray(values, float)[:, None, None], (len(values), K, R)).copy()


def test_crossover_interpolates_the_log_ratio_in_log_n():
    """M_a = (0.1, 0.2, 0.6, 0.8), M_b = (0.8, 0.6, 0.3, 0.1) at n = 100, 200, 400, 800: r = log(M_a / M_b)
    changes sign between 200 (r = -log 3) and 400 (r = log 2), so by hand log n* = log 200 + log 2 * log 3 /
    log 6, n* = 305.9.  Identical runs and data sets: every bootstrap replicate is the point, se = 0."""
    ns = [100, 200, 400, 800]
    a, b = _runs([0.1, 0.2, 0.6, 0.8]), _runs([0.8, 0.6, 0.3, 0.1])
    lz = np.random.default_rng(0).normal(size=a.shape)
    cr = X.crossover_from_masses(ns, a, b, lz, n_boot=200)
    want = 200 * math.exp(math.log(2) * math.log(3) / math.log(6))
    assert cr.n == pytest.approx(want, rel=1e-12) and want == pytest.approx(305.9, abs=0.05)
    assert cr.bracket == (200.0, 400.0) and cr.found == 1.0
    assert cr.se == pytest.approx(0, abs=1e-9) and cr.se_runs == pytest.approx(0, abs=1e-9)
    np.testing.assert_allclose(cr.log_ratio, np.log([0.125, 1 / 3, 2.0, 8.0]), rtol=1e-12)
    none = X.crossover_from_masses(ns, b, a, lz, n_boot=20)
    assert math.isnan(none.n) and math.isnan(none.se) and none.found == 0.0
    # both masses below min_mass at the first n: r is undefined there, and the sign change to it does not count
    tiny_a, tiny_b = _runs([0.002, 0.3, 0.8]), _runs([0.004, 0.1, 0.05])
    cr = X.crossover_from_masses([50, 100, 200], tiny_a, tiny_b, np.zeros(tiny_a.shape), n_boot=20)
    assert math.isnan(cr.n) and math.isnan(cr.log_ratio[0])
    cr0 = X.crossover_from_masses([50, 100, 200], tiny_a, tiny_b, np.zeros(tiny_a.shape), n_boot=20, min_mass=0.0)
    assert 50 < cr0.n < 100 and cr0.log_ratio[0] == pytest.approx(math.log(0.5))


def test_crossover_pools_runs_by_evidence_and_bootstraps():
    """Runs on a data set pooled by their evidence: masses (0.2, 0.6) with log Z (0, log 3) pool to
    0.2 / 4 + 0.6 * 3 / 4 = 0.5.  With data sets that differ, the data-set bootstrap's se is positive and the
    runs' is 0 where the runs agree; the same seed, the same numbers."""
    ns = [10, 20]
    a = np.array([[[0.2, 0.6]], [[0.9, 0.9]]])
    b = 1 - a
    lz = np.array([[[0.0, math.log(3)]], [[0.0, 0.0]]])
    cr = X.crossover_from_masses(ns, a, b, lz, n_boot=50)
    assert cr.log_ratio[0] == pytest.approx(0.0, abs=1e-12) and cr.n == pytest.approx(10.0)
    rng = np.random.default_rng(1)
    a = np.clip(_runs([0.2, 0.45, 0.7], K=6) + rng.normal(0, 0.05, (3, 6, 1)), 0.01, 0.99)
    b = 1 - a
    lz = np.zeros(a.shape)
    cr = X.crossover_from_masses([100, 200, 400], a, b, lz, n_boot=400, seed=5)
    assert cr.se_datasets > 0 and cr.se_runs == pytest.approx(0, abs=1e-9) and cr.se > 0
    assert 200 < cr.n < 400
    again = X.crossover_from_masses([100, 200, 400], a, b, lz, n_boot=400, seed=5)
    assert (again.n, again.se, again.se_datasets, again.se_runs) == (cr.n, cr.se, cr.se_datasets, cr.se_runs)


def test_transition_crossover_reads_a_dataset():
    """The same constructed masses through an xarray Dataset with the variables bayesian_transition writes."""
    import xarray as xr

    ns = [100, 200, 400, 800]
    a, b = _runs([0.1, 0.2, 0.6, 0.8]), _runs([0.8, 0.6, 0.3, 0.1])
    rest = 1 - a - b
    ds = xr.Dataset({"run_phase_mass": (("n", "dataset", "run", "phase"), np.stack([a, b, rest], -1)),
                     "run_mass": (("n", "dataset", "run", "variant"), np.stack([a, b, rest], -1)),
                     "log_evidence": (("n", "dataset", "run"), np.zeros(a.shape))},
                    coords={"n": ns, "phase": ["6-gon", "5-gon", "none"], "variant": ["6-gon", "5-gon -", "none"]},
                    attrs={"num_particles": 64})
    cr = X.transition_crossover(ds, "6-gon", "5-gon", n_boot=20)
    assert cr.n == pytest.approx(200 * math.exp(math.log(2) * math.log(3) / math.log(6)), rel=1e-12)
    assert X.transition_crossover(ds, "6-gon", "5-gon -", n_boot=20).n == pytest.approx(cr.n, rel=1e-12)
    with pytest.raises(ValueError, match="^phase: expected a phase or variant"):
        X.transition_crossover(ds, "6-gon", "7-gon")


def test_formula_crossover_solves_the_asymptotic_equation():
    """n dL = dlam log n at the returned n (relative 1e-10: Lambert W in double precision), the larger of the two
    roots (above dlam / dL, where n dL - dlam log n is smallest); with beta, n beta solves it.  c = 6, the 6-gon
    against the 5-gon "-" (exact losses, lambdas 8.5 and 7): near 445; against the 5-gon "+" (lambda 8.5 = the
    6-gon's): NaN, the 6-gon leads at every n."""
    for La, la, Lb, lb in ((0.0481924, 8.5, 0.0687436, 7.0), (0.0, 7.5, 0.05, 5.0), (0.01, 3.0, 0.011, 1.0)):
        n = X.formula_crossover(La, la, Lb, lb)
        assert n * (Lb - La) == pytest.approx((la - lb) * math.log(n), rel=1e-10)
        assert n > (la - lb) / (Lb - La)
        nb = X.formula_crossover(La, la, Lb, lb, beta=0.5)
        assert nb * 0.5 == pytest.approx(n, rel=1e-12)
    assert X.formula_crossover(0.0481924, 8.5, 0.0687436, 7.0) == pytest.approx(445, rel=0.01)
    assert math.isnan(X.formula_crossover(0.0481924, 8.5, 0.0617991, 8.5))
    assert math.isnan(X.formula_crossover(0.1, 8.5, 0.05, 7.0))
    # a group of one variant is that variant; a second variant far above in F changes nothing visible
    one = X.formula_group_crossover(0.0481924, 8.5, [0.0687436], [7.0])
    assert one == pytest.approx(X.formula_crossover(0.0481924, 8.5, 0.0687436, 7.0), rel=1e-9)
    two = X.formula_group_crossover(0.0481924, 8.5, [0.0687436, 0.5], [7.0, 1.0])
    assert two == pytest.approx(one, rel=1e-9)


def test_formula_predictions_at_c6():
    """From kgon_table: the 6-gon (L = 0.0481924, lambda 8.5) against the 5-gon variants; the group's crossover
    lies at or above the '-' variant's (adding the '+' variant only lowers the 5-gon group's F), and the '-'
    variant dominates the 5-gon group there."""
    pred = X.formula_predictions(6)
    assert pred["a"] == "6-gon" and pred["loss_a"] == pytest.approx(0.0481924, rel=1e-5) and pred["lambda_a"] == 8.5
    v = pred["variants"]
    assert v["5-gon -"]["lambda"] == 7.0 and v["5-gon +"]["lambda"] == 8.5
    assert math.isnan(v["5-gon +"]["n_formula"])
    assert pred["group"] >= v["5-gon -"]["n_formula"] and pred["dominant"] == "5-gon -"


def test_pair_formula_reads_the_phase_names():
    """pair_formula(c, a, b): a group b is formula_predictions' group, a variant b its variant's n; c = 5: the
    5-gon against the 4-gon "-" (exact losses 0.0158256 and 1/15, lambdas 7 and 6.5) at n = 34.95, the group the
    same (its "+" variant, a numerical minimum, has no lambda and is left out); a variant a other than the
    formula's lowest-loss one, k_a <= k_b, or "none": NaN."""
    n, dom = X.pair_formula(5, "5-gon", "4-gon")
    assert n == pytest.approx(34.9518, rel=1e-4) and dom == "4-gon -"
    assert n == pytest.approx(X.formula_crossover(0.01582562707449422, 7.0, 1 / 15, 6.5), rel=1e-9)
    assert X.pair_formula(5, "5-gon", "4-gon -") == (pytest.approx(n, rel=1e-9), None)
    assert math.isnan(X.pair_formula(5, "5-gon", "4-gon +")[0])
    pred = X.formula_predictions(6)
    assert X.pair_formula(6, "6-gon", "5-gon")[0] == pred["group"]
    assert X.pair_formula(6, "6-gon", "5-gon -")[0] == pred["variants"]["5-gon -"]["n_formula"]
    # below the top: a group a stands for its lowest-loss variant with a lambda (the 5-gon "+" at c = 6)
    low = X.formula_predictions(6, 5, 4)
    assert low["a"] == "5-gon +" and X.pair_formula(6, "5-gon", "4-gon")[0] == low["group"]
    assert math.isnan(X.pair_formula(6, "5-gon -", "4-gon")[0])
    for a, b in (("5-gon", "6-gon"), ("6-gon", "none"), ("none", "5-gon")):
        assert math.isnan(X.pair_formula(6, a, b)[0])
    assert (X.k_of("5-gon -"), X.k_of("10-gon"), X.k_of("none")) == (5, 10, None)
    # the cached predictions are copies: changing one changes no later answer
    pred["variants"].clear()
    assert X.formula_predictions(6)["variants"]


def test_validation_names_the_argument():
    key = jax.random.key(0)
    cases = [
        (lambda: T.posterior_phase_masses(key, 6, 0), "n"),
        (lambda: T.posterior_phase_masses(key, 6, 10, datasets=0), "datasets"),
        (lambda: T.posterior_phase_masses(key, 6, 10, runs=1.5), "runs"),
        (lambda: T.posterior_phase_masses(key, 1, 10), "num_features"),
        (lambda: T.posterior_phase_masses(key, 6, 10, prior_std=-1.0), "prior_std"),
        (lambda: T.posterior_phase_masses(key, 6, 10, beta=0.0), "beta"),
        (lambda: T.posterior_phase_masses(key, 6, 10, settings={"num_particles": 8}), "settings"),
        (lambda: T.posterior_phase_masses(key, 6, 10, pad_to=5), "pad_to"),
        (lambda: T.posterior_phase_masses(key, 6, 10, datasets=2, inputs=np.zeros((2, 5, 6))), "inputs"),
        (lambda: T.bayesian_transition(key, 6, [40, 20]), "ns"),
        (lambda: T.bayesian_transition(key, 6, [20, 40], pairs=[("6-gon", "9-gon")]), "pairs"),
        (lambda: X.crossover_from_masses([1, 2], np.zeros((2, 1, 1)), np.zeros((2, 1, 2)), np.zeros((2, 1, 1))),
         "run_b"),
        (lambda: X.crossover_from_masses([2, 1], np.zeros((2, 1, 1)), np.zeros((2, 1, 1)), np.zeros((2, 1, 1))),
         "ns"),
        (lambda: X.formula_crossover(float("nan"), 8.5, 0.07, 7.0), "loss_a"),
        (lambda: X.formula_predictions(6, 5, 6), "k_b"),
        (lambda: P.phase_codes(np.zeros((2, 6))), "params"),
    ]
    for fn, name in cases:
        with pytest.raises(ValueError) as err:
            fn()
        msg = str(err.value)
        assert msg.startswith(f"{name}: ") and "\n" not in msg, msg
