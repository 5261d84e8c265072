"""The sampler interface and NUTS / HMC on it: Gaussian targets with known moments, async vs
numpyro's lockstep NUTS, the task queue, determinism, compilation cached, sharding over 4 host
devices, bad arguments."""
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu import diagnostics as dg
from slt_relu.sampling import HMCSettings, NUTSSettings, sample

C, D = 6, 3
MU = jnp.arange(C * D, dtype=jnp.float64).reshape(C, D) / 10
SCALE = jnp.tile(jnp.array([1.0, 10.0, 0.1]), (C, 1))


def gaussian(mu, scale):
    """Each chain's own target: N(mu, diag(scale^2))."""
    return lambda z: 0.5 * jnp.sum(((z - mu) / scale) ** 2)


def run(settings, keys=None, mu=MU, scale=SCALE):
    keys = jax.random.split(jax.random.PRNGKey(0), mu.shape[0]) if keys is None else keys
    return sample(keys, gaussian, jnp.zeros(mu.shape), (mu, scale), settings)


def check_moments(out, mu=MU, scale=SCALE):
    """Every chain's mean and sd of every coordinate against its target, within 5.5 Monte Carlo
    standard errors (sd / sqrt(ESS of x); for the sd, sd / sqrt(2 ESS of (x - mu)^2))."""
    for c in range(out.z.shape[0]):
        for k in range(out.z.shape[2]):
            x = out.z[c, :, k]
            s = float(scale[c, k])
            # k = 5.5: this file makes 108 such checks (6 chains x 3 coordinates x mean and sd, for async,
            # lockstep and HMC), 4e-6 in all at 3.8e-8 each (z over 864 fresh draws: sd 0.98, max 3.2)
            assert abs(x.mean() - float(mu[c, k])) < 5.5 * s / np.sqrt(dg.ess(x[None])), (c, k)
            e2 = dg.ess(((x - float(mu[c, k])) ** 2)[None])
            assert abs(x.std() - s) < 5.5 * s / np.sqrt(2 * e2), (c, k)                 # k = 5.5: as above


@pytest.mark.parametrize("schedule", ["async", "lockstep"])
def test_nuts_recovers_each_chains_gaussian(schedule):
    out = run(NUTSSettings(num_warmup=300, num_samples=1500, schedule=schedule))
    info = out.info
    assert out.z.shape == (C, 1500, D) and info.num_steps.shape == (C, 1500) and out.log_evidence is None
    check_moments(out)
    assert not info.diverging.any()
    assert 0 < info.warmup_divergences.sum() < 100 * C      # early warm-up, identity mass on a 1:100 target
    # the adapted diagonal inverse mass matrix is the target's variance (Welford over the last window): each
    # entry / variance scatters by a factor exp(0.22) about 0.91 (40 fresh seeds; 1 entry in 60 leaves [0.5, 1.5]),
    # so per coordinate the geometric mean over the chains, within a factor 2 (>= 6.4 sd of its spread, 0.09):
    # still far from the identity, the sd or the precision (factors 10 to 10^4 on the scales 10 and 0.1)
    log_ratio = np.log(info.inverse_mass_matrix / SCALE**2)
    assert np.all(np.abs(log_ratio.mean(0)) < np.log(2)), np.exp(log_ratio)
    assert (out.grad_evals >= info.num_steps.sum(1)).all()
    # the potential energy of each draw is the target's
    np.testing.assert_allclose(out.potential_energy, 0.5 * np.sum(((out.z - MU[:, None]) / SCALE[:, None]) ** 2, -1),
                               rtol=1e-10)
    # the Hamiltonian at each draw (ArviZ's energy): U plus a kinetic energy of mean D/2 (momenta ~ N(0, M))
    kinetic = info.energy - out.potential_energy
    assert info.energy.shape == (C, 1500) and (kinetic >= 0).all()
    assert kinetic.mean() == pytest.approx(D / 2, rel=0.1)


def test_async_is_numpyros_nuts_and_wastes_less():
    """Same algorithm: the same distribution of trajectory lengths and acceptance (both on the
    same targets, many draws); but in lockstep every iteration costs the largest tree."""
    s = NUTSSettings(num_warmup=300, num_samples=2000)
    a = run(s)
    b = run(s.replace(schedule="lockstep"))
    sa, sb = a.info, b.info
    # each schedule adapts its own step sizes, so these are two independent draws; the tolerances are >= 5 sd of
    # their spread over 40 fresh seeds (where rel 0.1, abs 0.03, a per-chain rtol 0.25 and 5 failed 18 of 40):
    # mean trajectory length, rel diff sd 0.049 (mean -0.015)
    assert sa.num_steps.mean() == pytest.approx(sb.num_steps.mean(), rel=0.3)
    assert sa.accept_prob.mean() == pytest.approx(sb.accept_prob.mean(), abs=0.05)     # sd 0.0085
    # step sizes: one chain's ratio scatters by a factor exp(0.14); their geometric mean by exp(0.063)
    assert abs(np.mean(np.log(sa.step_size / sb.step_size))) < np.log(1.5), sa.step_size / sb.step_size
    assert abs(sa.warmup_divergences.mean() - sb.warmup_divergences.mean()) < 8      # mean -1.0, sd 1.0
    # the tick count is the longest chain's gradient count (async) or the sum of per-iteration maxima
    assert a.ticks == a.grad_evals.max()
    assert a.ticks < 0.8 * b.ticks


def test_queue_gives_each_chain_the_same_draws(compiles):
    """A chain's numbers depend on its key only: 6 slots or 2 slots (a queue of 3 rounds) agree to
    rounding; the queue runs each slot's chains back to back."""
    s = NUTSSettings(num_warmup=30, num_samples=20)
    full = run(s.replace(slots=C))
    queued = run(s.replace(slots=2))
    np.testing.assert_allclose(queued.z, full.z, atol=1e-6)
    np.testing.assert_array_equal(queued.info.num_steps, full.info.num_steps)
    assert queued.ticks >= full.grad_evals.sum() / 2 and full.ticks == full.grad_evals.max()
    # the queue cut into compiled calls of 7 ticks (a chain that finishes on a call's last tick is stored, and
    # the next one started, by the next call): the same program on every call, the same numbers
    from slt_relu.sampling.nuts import run_nuts

    keys = jax.random.split(jax.random.PRNGKey(0), C)
    s2 = s.replace(slots=2)
    calls = []
    compiles()
    cut = run_nuts(keys, gaussian, jnp.zeros(MU.shape), (MU, SCALE), s2, ticks_per_call=7, progress=calls.append)
    assert len(calls) > 10 and calls[-1] == 1.0 and compiles() == 1
    np.testing.assert_array_equal(cut.z, queued.z)
    assert cut.ticks == queued.ticks and (cut.grad_evals == queued.grad_evals).all()


def test_same_keys_same_numbers_no_second_compile_and_hmc(compiles):
    s = NUTSSettings(num_warmup=50, num_samples=50)
    a = run(s)
    compiles()
    b = run(NUTSSettings(num_warmup=50, num_samples=50))            # equal settings, equal potential: no new program
    assert compiles() == 0
    run(NUTSSettings(num_warmup=50, num_samples=40))                # other settings: one program, the queue's ticks
    assert compiles() == 1                                          # (its first tick starts the first chains)
    np.testing.assert_array_equal(a.z, b.z)
    other = run(s, keys=jax.random.split(jax.random.PRNGKey(1), C))
    assert not np.allclose(a.z, other.z)
    h = run(HMCSettings(num_warmup=300, num_samples=1500, num_steps=8))
    assert (h.info.num_steps == 8).all()
    check_moments(h)
    compiles()
    run(HMCSettings(num_warmup=300, num_samples=1500, num_steps=8))
    assert compiles() == 0


def test_bad_arguments():
    s = NUTSSettings(num_warmup=5, num_samples=5)
    with pytest.raises(ValueError, match="keys: expected one key per chain"):
        sample(jax.random.split(jax.random.PRNGKey(0), 2), gaussian, jnp.zeros((C, D)), (MU, SCALE), s)
    with pytest.raises(ValueError, match="args: every array needs a leading chain axis of 6"):
        sample(jax.random.split(jax.random.PRNGKey(0), C), gaussian, jnp.zeros((C, D)), (MU[:2], SCALE), s)
    with pytest.raises(ValueError, match="init_z: expected shape"):
        sample(jax.random.split(jax.random.PRNGKey(0), C), gaussian, jnp.zeros(D), (MU, SCALE), s)
    with pytest.raises(TypeError, match="settings: expected the settings of a registered sampler .*, got dict"):
        sample(jax.random.split(jax.random.PRNGKey(0), C), gaussian, jnp.zeros((C, D)), (MU, SCALE), {})
    with pytest.raises(ValueError, match=r"^num_samples: expected an integer >= 4, got 0$"):
        NUTSSettings(num_samples=0)
    with pytest.raises(ValueError, match=r"^slots: expected an integer >= 1 or None, got 0$"):
        NUTSSettings(slots=0)
    with pytest.raises(ValueError, match=r"^schedule: expected one of 'async', 'lockstep', got 'sync'$"):
        NUTSSettings(schedule="sync")
    assert NUTSSettings(num_samples=np.int64(100)).num_samples == 100 and type(NUTSSettings(
        num_samples=np.int64(100)).num_samples) is int                     # numpy numbers welcome, stored as Python


SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from slt_relu.sampling import NUTSSettings, sample
    C = 8
    mu = jnp.arange(C * 2, dtype=float).reshape(C, 2)
    gen = lambda m: (lambda z: 0.5 * jnp.sum((z - m) ** 2))
    out = sample(jax.random.split(jax.random.PRNGKey(0), C), gen, jnp.zeros((C, 2)), (mu,),
                 NUTSSettings(num_warmup=200, num_samples=1000, slots=int(sys.argv[1])))
    print(json.dumps({"devices": len(jax.devices()), "mean": out.z.mean(1).tolist()}))
""")


def test_one_and_four_host_devices_sample_the_same_distribution(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    res = {}
    for n in (1, 4):
        flags = f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count={n}"     # the suite's and N devices
        env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
        got = subprocess.run([sys.executable, str(path), "8"], env=env, capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stderr[-2000:]
        res[n] = json.loads(got.stdout.strip().splitlines()[-1])
    assert res[1]["devices"] == 1 and res[4]["devices"] == 4
    mu = np.arange(16, dtype=float).reshape(8, 2)
    for n in (1, 4):                                   # unit-variance targets, ~1000 draws: MCSE ~ 0.05
        assert np.abs(np.asarray(res[n]["mean"]) - mu).max() < 0.25
