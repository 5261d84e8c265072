"""slt_relu.tms.training: training trajectories of the toy model of superposition and the LLC along training,
each against a hand count, a closed form or an independent computation (a plain optax loop on the dense loss,
slt_relu.tms.phases, estimate_llc, the Ornstein-Uhlenbeck stationary variance of SGLD on a quadratic)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)

from slt_relu.posterior.llc import LLCSettings, estimate_llc  # noqa: E402
from slt_relu.tms import TMSParams, flat_empirical_loss, sample_inputs  # noqa: E402
from slt_relu.tms import training as T  # noqa: E402
from slt_relu.tms import training_llc as TL  # noqa: E402
from slt_relu.tms.phases import phase_codes, phase_names  # noqa: E402
from slt_relu.tms.sorted_loss import sorted_empirical_loss, sorted_inputs  # noqa: E402

C = 4


def _init(key, runs=2, std=0.5):
    kw, kb = jax.random.split(key)
    return TMSParams(std * jax.random.normal(kw, (runs, 2, C)), 0.1 * jax.random.normal(kb, (runs, C)))


@pytest.fixture(scope="module")
def adam():
    """Two full-batch Adam runs at n = 12 and 40 from given points: the Dataset, the inputs and the points."""
    x = np.asarray(sample_inputs(jax.random.PRNGKey(3), 40, C))
    init = _init(jax.random.PRNGKey(4))
    ds = T.train_trajectories(jax.random.PRNGKey(5), C, [12, 40], runs=2, steps=30, learning_rate=0.05,
                              checkpoints=4, inputs=x, init=init)
    return ds, x, init


def test_checkpoint_steps_by_hand():
    # step 0, then round(geomspace(1, steps, checkpoints - 1)) without repeats
    np.testing.assert_array_equal(T.checkpoint_steps(100, 5), [0, 1, 5, 22, 100])      # 1, 4.64, 21.5, 100
    np.testing.assert_array_equal(T.checkpoint_steps(1, 2), [0, 1])
    np.testing.assert_array_equal(T.checkpoint_steps(10, 20), np.arange(11))           # 10^(j/18) rounds to 1..10
    np.testing.assert_array_equal(T.checkpoint_steps(1000, 3), [0, 1, 1000])


def test_full_batch_training_is_a_plain_optax_loop(adam):
    """Each run is optax.adam on the dense L_n (slt_relu.tms.flat_empirical_loss, not the sorted one) of the first
    n inputs, kept at the checkpoint steps; the checkpoint at step 0 is the initialisation."""
    import optax

    ds, x, init = adam
    steps = ds.step.values
    assert list(steps) == [0, 1, 5, 30]
    opt = optax.adam(0.05)
    for i, n in enumerate([12, 40]):
        grad = jax.jit(jax.grad(lambda v, n=n: flat_empirical_loss(v, jnp.asarray(x[:n]))))
        for r in range(2):
            w = jnp.concatenate([init.W[r].reshape(-1), init.b[r]])
            state = opt.init(w)
            kept = {0: w}
            for t in range(1, 31):
                updates, state = opt.update(grad(w), state, w)
                w = optax.apply_updates(w, updates)
                kept[t] = w
            for k, s in enumerate(steps):
                got = np.concatenate([ds.W.values[i, r, k].reshape(-1), ds.b.values[i, r, k]])
                # the sorted loss's gradient equals the dense one to rounding; Adam divides by sqrt(v), so a
                # relative 1e-9 (not 1e-15) after 30 steps
                np.testing.assert_allclose(got, np.asarray(kept[int(s)]), rtol=1e-9, atol=1e-12)
                assert ds.train_loss.values[i, r, k] == pytest.approx(
                    float(flat_empirical_loss(kept[int(s)], jnp.asarray(x[:n]))), rel=1e-12)
        np.testing.assert_array_equal(ds.W.values[i, :, 0], np.asarray(init.W))          # step 0: the start
        np.testing.assert_array_equal(ds.b.values[i, :, 0], np.asarray(init.b))


def test_phases_are_those_of_slt_relu_tms_phases(adam):
    ds = adam[0]
    codes, groups = phase_codes(TMSParams(jnp.asarray(ds.W.values), jnp.asarray(ds.b.values)))
    variants, group_names, _ = phase_names(C)
    np.testing.assert_array_equal(ds.phase_code.values, codes)
    assert ds.phase.values.tolist() == np.asarray(variants)[codes].tolist()
    assert ds.phase_group.values.tolist() == np.asarray(group_names)[groups].tolist()
    assert list(ds.variant.values) == list(variants)


def test_a_tiny_learning_rate_moves_the_loss_down_and_random_starts_are_shared_across_n():
    """SGD with a tiny step lowers L_n; run r starts from one random point at every n; the drawn data sets are
    nested (L_n at step 0 is the dense loss of the first n inputs)."""
    ds = T.train_trajectories(jax.random.PRNGKey(0), C, [10, 25], runs=3, steps=5, optimizer="sgd",
                              learning_rate=1e-4, checkpoints=3, init_bias_std=0.2)
    loss = ds.train_loss.values                                  # (n, run, checkpoint)
    assert np.all(np.diff(loss, axis=-1) < 0)                    # gradient descent with a tiny step goes down
    x = ds.inputs.values
    assert x.shape == (25, C) and np.all(np.sum(x != 0, axis=1) <= 1)
    for i, n in enumerate([10, 25]):
        for r in range(3):
            w0 = np.concatenate([ds.W.values[i, r, 0].reshape(-1), ds.b.values[i, r, 0]])
            assert loss[i, r, 0] == pytest.approx(float(flat_empirical_loss(jnp.asarray(w0), jnp.asarray(x[:n]))),
                                                  rel=1e-12)
    np.testing.assert_array_equal(ds.W.values[0, :, 0], ds.W.values[1, :, 0])   # run r: one start at every n
    np.testing.assert_array_equal(ds.b.values[0, :, 0], ds.b.values[1, :, 0])
    assert np.all(ds.b.values[0, :, 0] != 0) and len({float(v) for v in ds.W.values[0, :, 0, 0, 0]}) == 3
    # the population loss is the exact one of the same parameters
    from slt_relu.tms import population_loss
    assert ds.population_loss.values[1, 2, 1] == pytest.approx(float(population_loss(TMSParams(
        jnp.asarray(ds.W.values[1, 2, 1]), jnp.asarray(ds.b.values[1, 2, 1])))), rel=1e-12)


def test_the_given_inputs_are_kept_up_to_the_largest_n(adam):
    ds, x, _ = adam
    np.testing.assert_array_equal(ds.inputs.values, x[:40])


def test_mini_batch_training_runs_and_differs_from_full_batch(adam):
    ds, x, init = adam
    mb = T.train_trajectories(jax.random.PRNGKey(5), C, [12, 40], runs=2, steps=30, learning_rate=0.05,
                              checkpoints=4, inputs=x, init=init, batch_size=4)
    assert mb.attrs["batch_size"] == 4 and ds.attrs["batch_size"] == 0
    np.testing.assert_array_equal(mb.W.values[:, :, 0], ds.W.values[:, :, 0])
    assert not np.allclose(mb.W.values[:, :, -1], ds.W.values[:, :, -1])
    assert np.all(np.isfinite(mb.train_loss.values))


def test_phase_sequence_by_hand():
    seq = ["none", "none", "0-gon ----", "none", "4-gon", "4-gon", "3-gon -", "4-gon"]
    assert T.phase_sequence(seq) == ("none", "0-gon ----", "none", "4-gon", "3-gon -", "4-gon")
    assert T.phase_sequence(seq, skip=("none",)) == ("0-gon ----", "4-gon", "3-gon -", "4-gon")
    assert T.phase_sequence(np.array(["6-gon"] * 3)) == ("6-gon",)
    assert T.phase_sequence([]) == ()


def test_quadratic_llc_closed_forms():
    # gamma = eps = 0: half the rank of H (flat directions and rounding below 0 contribute nothing)
    assert TL.quadratic_llc([3.0, 0.5, 0.0, -1e-17], 100.0, 0.0) == pytest.approx(1.0, rel=1e-15)
    # one direction: (1/2) a / (a + gamma), a = n beta h
    assert TL.quadratic_llc([2.0], 50.0, 25.0) == pytest.approx(0.5 * 100 / 125, rel=1e-15)
    # the Euler step: the OU process w' = (1 - eps k / 2) w + sqrt(eps) xi has stationary variance
    # eps / (1 - (1 - eps k / 2)^2) = 1 / (k (1 - eps k / 4))
    a, g, eps = 100.0, 10.0, 0.01
    k = a + g
    var = eps / (1 - (1 - eps * k / 2) ** 2)
    assert TL.quadratic_llc([2.0], 50.0, g, eps) == pytest.approx(0.5 * a * var, rel=1e-13)


def _quadratic_loss(h):
    def loss(w, data):
        return 0.5 * jnp.sum(h * w ** 2) + 0.0 * jnp.sum(data)
    return loss


def test_sgld_on_a_quadratic_is_quadratic_llc_within_its_standard_error():
    """estimate_llc on L = (1/2) sum h_i w_i^2 at w* = 0: its mean over chains is the OU expectation
    sum (1/2) a_i / (k_i (1 - eps k_i / 4)) within 4 standard errors; at this eps the continuous-time value
    (eps = 0) is many standard errors away, so the test sees the step's bias."""
    h = jnp.asarray([0.5, 2.0, 8.0, 0.0])
    nb, gamma, eps = 10.0, 1.0, 0.02
    s = LLCSettings(num_chains=16, num_steps=6000, num_burnin=400, thin=2, step_size=eps, localization=gamma,
                        n_beta=nb)
    out = estimate_llc(jax.random.PRNGKey(7), _quadratic_loss(h), jnp.zeros(4), jnp.zeros((5, 1)), s)
    exact = TL.quadratic_llc(np.asarray(h), nb, gamma, eps)
    continuous = TL.quadratic_llc(np.asarray(h), nb, gamma, 0.0)
    assert abs(out.lambda_ - exact) < 4 * out.se, (out.lambda_, out.se, exact)
    assert abs(continuous - exact) > 6 * out.se


def test_llc_at_checkpoints_is_estimate_llc_at_each_center(adam):
    ds, x, _ = adam
    data = sorted_inputs(x[:40])
    W, b = ds.W.values[1, :, -2:], ds.b.values[1, :, -2:]
    centers = np.concatenate([W.reshape(4, -1), b.reshape(4, -1)], axis=1)
    keys = jax.vmap(lambda j: jax.random.key_data(jax.random.fold_in(jax.random.PRNGKey(11), j)))(jnp.arange(4))
    s = LLCSettings(num_chains=3, num_steps=50, num_burnin=10, thin=2, step_size=1e-4, localization=5.0,
                        n_beta=40 / math.log(40))
    est, se, acc = TL.llc_at_checkpoints(keys, jnp.asarray(centers), data, s)
    for j in range(4):
        ref = estimate_llc(keys[j], sorted_empirical_loss, jnp.asarray(centers[j]), data, s)
        assert est[j] == pytest.approx(ref.lambda_, rel=1e-9, abs=1e-9)
        assert se[j] == pytest.approx(ref.se, rel=1e-9, abs=1e-9)
        assert acc[j] == pytest.approx(float(np.mean(ref.details.accept_prob)), rel=1e-9)


def test_llc_along_training_keys_and_chunks(adam, monkeypatch):
    """The estimate at (n index i, run r, checkpoint k) is llc_at_checkpoints' with the key
    fold_in(fold_in(key, i), r K + k), in chunks whose last one is padded: chunks of 5 at n = 12 (208 data
    elements, 30 x 12 kept per chain: 3936 // 720) and of 3 at n = 40 (656 data elements: 3936 // 1312)."""
    ds, x, _ = adam
    s = LLCSettings(num_chains=2, num_steps=40, num_burnin=10, thin=1, step_size=1e-4, localization=5.0)
    monkeypatch.setattr(TL, "LLC_CHUNK_ELEMENTS", 3936)
    calls = []
    out = TL.llc_along_training(jax.random.PRNGKey(3), ds, s, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(5, 16), (8, 16), (11, 16), (14, 16), (16, 16)]
    np.testing.assert_allclose(out.n_beta.values, [12 / math.log(12), 40 / math.log(40)], rtol=1e-15)
    K = ds.sizes["checkpoint"]
    picks = ((1, 1, 3), (1, 0, 1), (1, 0, 0))              # in the padded last chunk, a middle one, the first
    # in one call of 3 centres at n = 40: the program of that n's chunks, not another one compiled for 1 centre
    keys = jnp.stack([jax.random.key_data(jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(3), i), r * K + k))
                      for i, r, k in picks])
    centers = np.stack([np.concatenate([ds.W.values[i, r, k].reshape(-1), ds.b.values[i, r, k]]) for i, r, k in picks])
    est, se, _ = TL.llc_at_checkpoints(keys, jnp.asarray(centers), sorted_inputs(x[:40]),
                                      s.replace(n_beta=40 / math.log(40)))
    for j, (i, r, k) in enumerate(picks):
        assert out.llc.values[i, r, k] == pytest.approx(est[j], rel=1e-9)
        assert out.llc_se.values[i, r, k] == pytest.approx(se[j], rel=1e-9)
    assert np.all(np.isfinite(out.llc.values)) and np.all((out.llc_accept.values > 0) & (out.llc_accept.values <= 1))
    assert out.attrs["llc_num_chains"] == 2 and out.attrs["llc_localization"] == 5.0


def test_quadratic_llc_at_checkpoint_is_quadratic_llc_of_the_hessian(adam):
    ds, x, _ = adam
    q = TL.quadratic_llc_at_checkpoint(ds, 5.0, 1e-4)
    assert q.shape == (2, 2)
    w = np.concatenate([ds.W.values[0, 1, -1].reshape(-1), ds.b.values[0, 1, -1]])
    H = jax.hessian(lambda v: flat_empirical_loss(v, jnp.asarray(x[:12])))(jnp.asarray(w))   # the dense loss
    exact = TL.quadratic_llc(np.linalg.eigvalsh(np.asarray(H)), 12 / math.log(12), 5.0, 1e-4)
    assert q[0, 1] == pytest.approx(exact, rel=1e-8)


@pytest.mark.parametrize("call, match", [
    (lambda: T.checkpoint_steps(0, 5), r"^steps: expected a positive integer, got 0$"),
    (lambda: T.checkpoint_steps(10, 1), r"^checkpoints: expected an integer >= 2, got 1$"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), 1, [10]), r"^num_features: expected an integer >= 2"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [30, 10]), r"^ns: expected increasing sample sizes"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, 10), r"^ns: expected a sequence of sample sizes"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], optimizer="rmsprop"), r"^optimizer: expected one"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], learning_rate=0.0), r"^learning_rate: expected"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10, 20], batch_size=11),
     r"^batch_size: expected None or at most the smallest n = 10, got 11$"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], init_std=-1.0), r"^init_std: expected a positive"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], init_bias_std=float("nan")), r"^init_bias_std: "),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], runs=0), r"^runs: expected a positive integer"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], inputs=np.zeros((5, C))), r"^inputs: expected shape"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], init=np.zeros((2, C))), r"^init: expected None"),
    (lambda: T.train_trajectories(jax.random.PRNGKey(0), C, [10], runs=2, init=TMSParams(np.zeros((3, 2, C)),
                                                                                         np.zeros((3, C)))),
     r"^init: expected finite W of shape"),
    (lambda: T.phase_sequence("6-gon"), r"^phases: expected a sequence of phase names"),
    (lambda: T.phase_sequence(["6-gon"], skip="none"), r"^skip: expected a sequence of phase names"),
    (lambda: TL.quadratic_llc([1.0], 0.0, 1.0), r"^n_beta: expected a positive finite number, got 0.0$"),
    (lambda: TL.quadratic_llc([1.0], 1.0, -1.0), r"^localization: expected a non-negative"),
    (lambda: TL.quadratic_llc([np.nan], 1.0, 1.0), r"^hessian_eigenvalues: expected a non-empty array of finite"),
    (lambda: TL.quadratic_llc([100.0], 1.0, 0.0, 0.05), r"^step_size: SGLD is unstable at eps \(a \+ gamma\) >= 4"),
    (lambda: TL.llc_along_training(jax.random.PRNGKey(0), {"W": 1}), r"^ds: expected the xarray Dataset"),
    (lambda: TL.quadratic_llc_at_checkpoint({"W": 1}, 1.0), r"^ds: expected the xarray Dataset"),
])
def test_bad_arguments_are_refused_in_one_line(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_bad_llc_settings_and_checkpoints_are_refused(adam):
    ds = adam[0]
    for settings, match in ((LLCSettings(n_beta=3.0), r"^settings: expected n_beta = None"),
                            (LLCSettings(batch_size=2), r"^settings: expected n_beta = None"),
                            ("sgld", r"^settings: expected LLCSettings, got str$")):
        with pytest.raises(ValueError, match=match):
            TL.llc_along_training(jax.random.PRNGKey(0), ds, settings)
    with pytest.raises(ValueError, match=r"^checkpoint: expected an index in \[-4, 3\], got 4$"):
        TL.quadratic_llc_at_checkpoint(ds, 1.0, checkpoint=4)
