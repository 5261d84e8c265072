import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


@pytest.fixture(autouse=True)
def _x64_stays_on():
    """Every test starts and ends with x64 on; a test that turns it off fails here."""
    yield
    assert jax.config.read("jax_enable_x64"), "the test left jax_enable_x64 off"


_COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, duration, **kw: _COMPILES.append(name) if name == "/jax/core/compile/backend_compile_duration" else None)


@pytest.fixture
def compiles():
    """compiles() -> how many XLA programs were compiled since the test started (or the last call)."""
    mark = [len(_COMPILES)]

    def count():
        n = len(_COMPILES) - mark[0]
        mark[0] = len(_COMPILES)
        return n
    return count
