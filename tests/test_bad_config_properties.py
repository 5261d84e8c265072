"""Property tests: any value of any key of every kind's schema (and of keys that are not there), set with
--set on a shipped config, is either accepted or refused with one line (a ConfigError: exit 2) before
anything is computed, and an accepted one fits in memory; a run of a cheap kind with such a value either
finishes or exits 2, writing nothing outside its output folder."""
import json
import os
import sys
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from slt_relu.workflow import cli, runner
from slt_relu.workflow.config import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ONE_PER_KIND = {}
for _name in sorted(TINY):
    ONE_PER_KIND.setdefault(runner.prepare(ROOT / "experiments" / _name, TINY[_name]).settings.kind, _name)


def _keys(value, prefix=""):
    """Every dotted key of a settings dump (tables, arrays of tables, leaves)."""
    if isinstance(value, dict):
        for k, v in value.items():
            key = f"{prefix}.{k}" if prefix else k
            yield key
            yield from _keys(v, key)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for i, v in enumerate(value):
            yield from _keys(v, f"{prefix}[{i}]")


KEYS = {kind: sorted(set(_keys(runner.prepare(ROOT / "experiments" / name, TINY[name]).settings.model_dump(mode="json"))))
        for kind, name in ONE_PER_KIND.items()}
jax.config.update("jax_enable_x64", True)             # prepare sets each config's dtype
# examples per kind (more for a thorough search: SLT_RELU_PROPERTY_EXAMPLES=5000)
EXAMPLES = int(os.environ.get("SLT_RELU_PROPERTY_EXAMPLES", "150"))

VALUES = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70), st.sampled_from([0, 1, -1, 2**31, 2**63, 10**12, 10**6]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e308, -1e-308, float("nan")]),
    st.text(max_size=12), st.sampled_from(["", "../../x", "/proc/x", "x" * 300, "nuts", "smc", "float16"]),
    st.booleans(), st.lists(st.integers(-3, 3), max_size=3), st.lists(st.floats(allow_nan=True), max_size=2),
    st.just([]), st.just({}), st.dictionaries(st.sampled_from(["a", "name"]), st.integers(), max_size=1))


def _prepare_or_refuse(name, key, value):
    """runner.prepare with the value set: a Prepared, or a ConfigError of one line; anything else fails."""
    try:
        runner.prepare(ROOT / "experiments" / name, {**TINY[name], key: value})
    except ConfigError as err:
        assert "\n" not in str(err) and str(err), repr(err)
        return False
    finally:
        jax.config.update("jax_enable_x64", True)         # prepare sets the config's dtype
    return True


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_value_of_any_key_is_accepted_or_refused_in_one_line(kind, data):
    name = ONE_PER_KIND[kind]
    key = data.draw(st.one_of(st.sampled_from(KEYS[kind]), st.sampled_from(["nope", f"{KEYS[kind][-1]}.nope",
                                                                              "cases[7].x", "sweep.truth.t"])))
    _prepare_or_refuse(name, key, data.draw(VALUES))


CHEAP = ["dslt3_degenerate_node.toml", "fisher_rank_survey.toml", "true_set_m_symmetric.toml"]


@pytest.mark.parametrize("name", CHEAP)
@settings(max_examples=max(3, EXAMPLES // 50), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_run_with_any_value_finishes_or_exits_2_and_writes_only_its_folder(tmp_path_factory, name, data):
    kind = runner.prepare(ROOT / "experiments" / name, TINY[name]).settings.kind
    key, value = data.draw(st.sampled_from(KEYS[kind])), data.draw(VALUES)
    work = tmp_path_factory.mktemp("work")
    sets = sum((["--set", f"{k}={json.dumps(v)}"] for k, v in {**TINY[name], key: value}.items()), [])
    here = os.getcwd()
    os.chdir(work)
    try:
        code = cli.main(["run", str(ROOT / "experiments" / name), "--out", "out", "--no-progress", "--no-cache"] + sets)
    finally:
        os.chdir(here)
    assert code in (0, 2)
    assert {p.name for p in work.iterdir()} <= {"out"} and (code == 0) == (work / "out").exists()
