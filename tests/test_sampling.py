"""The sampling package's structure: a sampler added from outside is found by ``sample`` through the
registry, and no module-level import cycle anywhere in slt_relu."""
import ast
from pathlib import Path
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu
import slt_relu.sampling as sampling
from slt_relu.sampling import Draws, NUTSSettings, SMCInfo, SMCSettings, info_dict, info_from_dict, register, sample
from slt_relu.workflow.settings import Section


class StayPutSettings(Section):
    """A toy sampler's settings: repeat the initial point num_samples times."""

    name: Literal["stay_put"] = "stay_put"
    num_samples: int = 3


class StayPutInfo(NamedTuple):
    """The toy sampler's statistics: moved (C,), whether each chain moved (never)."""

    moved: np.ndarray


def run_stay_put(keys, potential_gen, init_z, args, settings, *, moves=None, devices=None, progress=None):
    U = jnp.stack([potential_gen(*(a[c] for a in args))(init_z[c]) for c in range(init_z.shape[0])])
    z = np.repeat(np.asarray(init_z)[:, None], settings.num_samples, 1)
    return Draws(z, np.repeat(np.asarray(U)[:, None], settings.num_samples, 1), StayPutInfo(np.zeros(len(z), bool)),
                 np.zeros(len(z), int), None, 0, 0.0)


def quadratic(mu):
    return lambda z: 0.5 * jnp.sum((z - mu) ** 2)


def test_a_registered_sampler_is_dispatched_to():
    register(StayPutSettings, run_stay_put, StayPutInfo)
    try:
        mu = jnp.array([[1.0, 2.0], [0.0, 0.0]])
        init = jnp.array([[1.0, 0.0], [3.0, 4.0]])
        d = sample(jax.random.split(jax.random.PRNGKey(0), 2), quadratic, init, (mu,), StayPutSettings())
        assert d.z.shape == (2, 3, 2)
        np.testing.assert_array_equal(d.z[:, 0], np.asarray(init))
        np.testing.assert_allclose(d.potential_energy[:, 0], [2.0, 12.5])      # |z - mu|^2 / 2 by hand
        assert info_from_dict(StayPutSettings(), info_dict(d.info)) == d.info
        with pytest.raises(ValueError, match=r"init_z: expected shape \(chains, D\)"):
            sample(jax.random.split(jax.random.PRNGKey(0), 2), quadratic, init[None], (mu,), StayPutSettings())
    finally:
        sampling.base._SAMPLERS.pop(StayPutSettings)
    with pytest.raises(TypeError, match="registered sampler .*got StayPutSettings"):
        sample(jax.random.split(jax.random.PRNGKey(0), 2), quadratic, init, (mu,), StayPutSettings())


def test_statistics_as_named_arrays_and_back():
    """info_dict names every field that is not None, a keyword's trailing underscore dropped (SMCInfo's lambda_
    is "lambda", the name in the posterior kind's checkpoints); info_from_dict rebuilds the type registered for
    the settings, None where a name is missing."""
    C, M = 2, 5
    info = SMCInfo(np.full(C, 3), np.ones(C), np.tile(np.linspace(0.2, 1, M), (C, 1)), np.full((C, M), 0.5),
                   np.full((C, M), 0.7), np.full((C, M), 0.3), None, np.zeros((C, M)), np.ones((C, M)), np.ones(C))
    named = info_dict(info)
    assert sorted(named) == sorted(["num_stages", "final_lambda", "lambda", "ess", "accept_prob", "step_size",
                                    "log_evidence", "mean_slope", "prior_mean_slope"])
    back = info_from_dict(SMCSettings(), named)
    assert type(back) is SMCInfo and back.symmetry_accept is None
    for a, b in zip(back, info):
        np.testing.assert_array_equal(a, b)
    nuts = info_from_dict(NUTSSettings(), {"num_steps": np.ones((C, 4), int)})
    assert nuts.num_steps.shape == (C, 4) and nuts.tree_depth is None and nuts.energy is None


def test_a_checkpoint_written_before_the_typed_statistics_reads_back_typed(tmp_path):
    """A posterior sweep point's checkpoint holds its statistics as named arrays under the names of the dicts
    that came before the types; one written then (NUTS without tree_depth, SMC with zeros for symmetry_accept
    without symmetry moves) reads back as the statistics a run gives now."""
    from types import SimpleNamespace

    from slt_relu.kinds.posterior_report import point_info
    from slt_relu.sampling import NUTSInfo, tree_depth
    from slt_relu.workflow.sweep import load_result, save_result

    C, S, M = 2, 5, 4
    steps = np.tile([1, 3, 7, 8, 2], (C, 1))
    nuts = {"num_steps": steps, "accept_prob": np.full((C, S), 0.8), "diverging": np.zeros((C, S), bool),
            "energy": np.ones((C, S)), "step_size": np.full(C, 0.1), "inverse_mass_matrix": np.ones((C, 3)),
            "warmup_divergences": np.zeros(C, np.int32)}
    smc = {"num_stages": np.full(C, 3), "final_lambda": np.ones(C), "lambda": np.tile([0.1, 0.5, 1.0, 0.0], (C, 1)),
           "ess": np.full((C, M), 0.5), "accept_prob": np.full((C, M), 0.7), "step_size": np.full((C, M), 0.3),
           "symmetry_accept": np.zeros((C, M)), "log_evidence": np.zeros((C, M)), "mean_slope": np.ones((C, M)),
           "prior_mean_slope": np.ones(C)}
    for name, stats, settings in (("nuts", nuts, NUTSSettings()), ("smc", smc, SMCSettings())):
        save_result(tmp_path / f"{name}.nc", name, {"stats": stats})
        info = point_info(SimpleNamespace(sampler=settings), load_result(tmp_path / f"{name}.nc", name))
        assert type(info) is (NUTSInfo if name == "nuts" else SMCInfo) and info.symmetry_accept is None
        for key, v in info_dict(info).items():
            np.testing.assert_array_equal(v, tree_depth(steps) if key == "tree_depth" else stats[key])
    np.testing.assert_array_equal(info.lambda_, smc["lambda"])


def _module_imports(path: Path, package: str, modules: set[str]) -> set[str]:
    """The slt_relu modules a file imports at module level (imports inside functions are lazy and
    excluded); ``from P import x`` imports the module P.x where there is one, else P."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.update(f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out & modules


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph (module -> the modules it imports) as a path, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def _import_graph(planted: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """module -> the slt_relu modules its import runs first (module-level imports; ``planted``: extra
    imports, to check the check)."""
    root = Path(slt_relu.__file__).parent
    files = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = (path, name if parts[-1] == "__init__" else ".".join(parts[:-1]))
    graph = {m: _module_imports(path, package, set(files)) | (planted or {}).get(m, set())
             for m, (path, package) in files.items()}
    # importing slt_relu.a.b from outside slt_relu.a first runs slt_relu/a/__init__ (a module inside the package
    # imports it while that __init__ is already running; the root package is always initialised first)
    return {m: {p for d in deps for k in range(2, d.count(".") + 2) if (p := ".".join(d.split(".")[:k])) == d
                or not m.startswith(p + ".")} - {m} for m, deps in graph.items()}


def test_no_import_cycle():
    """The graph of module-level imports between slt_relu's modules has no cycle (a package's
    ``__init__`` counts as the package's module); the check finds planted ones."""
    graph = _import_graph()
    assert "slt_relu.sampling.base" in graph["slt_relu.sampling.nuts"]          # the graph sees relative imports
    assert _cycle(graph) is None, "import cycle: " + " -> ".join(_cycle(graph))
    assert _cycle(_import_graph({"slt_relu.sampling.base": {"slt_relu.posterior"}})) is not None
    # _validate importing a sampling submodule runs sampling/__init__, whose base imports _validate
    assert _cycle(_import_graph({"slt_relu._validate": {"slt_relu.sampling.sharding"}})) is not None
