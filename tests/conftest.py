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
