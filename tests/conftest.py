import atexit
import gc
import os
import shutil
import tempfile
from pathlib import Path

# The suite does not depend on the user's environment: not on a matplotlib backend or rc file chosen there
# (MPLBACKEND=Agg, common on servers, leaves the notebooks' kernels without inline figures), nor on a writable HOME
# (matplotlib's, IPython's and Jupyter's own folders go to a temporary folder of this process, removed at its end).
for _var in ("MPLBACKEND", "MATPLOTLIBRC"):
    os.environ.pop(_var, None)
_STATE = Path(tempfile.mkdtemp(prefix="slt-relu-tests-"))
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)
for _var in ("MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR"):
    os.environ[_var] = str(_STATE / _var.lower())

# The suite is compile-bound: three quarters of its time is XLA compiling programs that then run for milliseconds
# (measured with jax.monitoring's compile durations over the whole suite, jaxlib 0.10.2). Where XLA_FLAGS is not
# set, test processes, and the CLI runs, notebooks and workers they start (which inherit the environment), compile
# with XLA's older CPU fusion path and LLVM at -O1: on tests/test_moves.py and test_smc.py XLA's compile time falls
# from 253 s to 104 s and the files' wall time from 197 s to 122 s (2 workers), with the programs' run time
# unchanged. The numbers move by rounding only, which the suite's tolerances allow on any CPU. Where XLA_FLAGS is
# set (CI's rerun of the references under a forced instruction set, .ci/run), those flags are used as given: with
# these two added, forcing SSE4.2 changed no float of a tiny run (measured), and that rerun must change some
# (test_reference.py's first test).
SUITE_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1"
os.environ.setdefault("XLA_FLAGS", SUITE_XLA_FLAGS)          # before JAX starts its backend

# Python's cyclic garbage collector, at its default thresholds (700, 10, 10), ran ~3,700 collections per worker over
# test_reference.py alone, each walking the heap that JAX's caches of traced and compiled programs keep growing (a
# worker reaches 4-5 GB by the end of the suite).  With the youngest generation collected 70 times less often (the
# full collections 700 times), the workers spent 316 s of CPU there instead of 349 s (gc.callbacks: 13 s of
# collections before, 3 s after); garbage cycles wait longer, which the workers' memory allows.
gc.set_threshold(50_000, 20, 50)

import jax  # noqa: E402  (after XLA_FLAGS)
import pytest
from hypothesis import settings as hypothesis_settings

# The property tests draw the same examples on every run (a suite that passes here passes in CI; a search that
# shrinks a new failure can take minutes); SLT_RELU_HYPOTHESIS=explore draws new ones each time, for a search.
hypothesis_settings.register_profile("suite", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", database=None)
hypothesis_settings.load_profile(os.environ.get("SLT_RELU_HYPOTHESIS", "suite"))

jax.config.update("jax_enable_x64", True)

# The CLI turns JAX's persistent compilation cache on by default (~/.cache/slt_relu/jax).  Test processes do not
# use it: once one in-process CLI run enabled it, every later compilation of that worker wrote an entry (thousands
# per suite), and a worker segfaulted inside JAX's cache write (jax 0.10.2, compilation_cache.put_executable_and_time).
# The folder the CLI would use is still made in the checkout (.pytest-jax-cache/, ignored by git), not the user's
# home; tests of the cache itself run the CLI in fresh processes with a folder of their own.
jax.config.update("jax_enable_compilation_cache", False)
_CACHE = Path(__file__).resolve().parent.parent / ".pytest-jax-cache" / os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["SLT_RELU_CACHE_DIR"] = str(_CACHE)


# Every program XLA compiles for the CPU keeps about 6 memory mappings (its code and data) while JAX's caches hold it
# (measured: 400 small programs, 6.2 mappings each; jax.clear_caches() released them), and Linux refuses a process more
# than vm.max_map_count mappings (65,530 by default): a worker that had compiled ~10,000 programs segfaulted inside
# XLA's compile (backend_compile_and_load, twice in one run of README's test command at ~90 %, and in CI).  After
# any test whose worker holds more than MAX_MAPPINGS, the caches are dropped; the next tests compile what they need
# again (few programs are shared between test files, whose tests run on one worker: pytest_collection_modifyitems).
MAX_MAPPINGS = 25_000


def memory_mappings() -> int:
    """The number of this process's memory mappings (Linux's /proc/self/maps; 0 where there is none)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


@pytest.fixture(autouse=True)
def _bounded_compiled_programs():
    yield
    if memory_mappings() > MAX_MAPPINGS:
        jax.clear_caches()
        gc.collect()


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


# One test file's tests on one pytest-xdist worker (`--dist loadgroup`, pyproject.toml): they share compiled programs,
# which each worker would otherwise compile again (tests/test_moves.py .. test_lambda_curve.py, 8 files: 600 s of test
# time split test by test, 520 s file by file). The shipped configs' tiny runs (test_reference.py) share little with each
# other and go out one by one, which keeps the two workers' loads even.
SPREAD_FILES = {"test_reference.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name not in SPREAD_FILES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
