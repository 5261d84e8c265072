import os
from pathlib import Path

import jax
import pytest

jax.config.update("jax_enable_x64", True)

# The CLI turns JAX's persistent compilation cache on by default (~/.cache/slt_relu/jax).  The tests keep theirs in
# the checkout (.pytest-jax-cache/, ignored by git), one folder per xdist worker: no two test processes write one
# folder at once (a worker once segfaulted reading the shared cache), the user's home is left alone,
# and a rerun of the suite compiles less.
_CACHE = Path(__file__).resolve().parent.parent / ".pytest-jax-cache" / os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["SLT_RELU_CACHE_DIR"] = str(_CACHE)


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
