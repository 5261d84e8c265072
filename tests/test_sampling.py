"""The sampling package's structure: a sampler added from outside is found by ``sample`` through the
registry, and no module-level import cycle anywhere in slt_relu."""
import ast
from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu
import slt_relu.sampling as sampling
from slt_relu.sampling import Draws, register, sample
from slt_relu.workflow.settings import Section


class StayPutSettings(Section):
    """A toy sampler's settings: repeat the initial point num_samples times."""

    name: Literal["stay_put"] = "stay_put"
    num_samples: int = 3


def run_stay_put(keys, potential_gen, init_z, args, settings, *, moves=None, devices=None, progress=None):
    U = jnp.stack([potential_gen(*(a[c] for a in args))(init_z[c]) for c in range(init_z.shape[0])])
    z = np.repeat(np.asarray(init_z)[:, None], settings.num_samples, 1)
    return Draws(z, np.repeat(np.asarray(U)[:, None], settings.num_samples, 1), {}, np.zeros(len(z), int), None, 0, 0.0)


def quadratic(mu):
    return lambda z: 0.5 * jnp.sum((z - mu) ** 2)


def test_a_registered_sampler_is_dispatched_to():
    register(StayPutSettings, run_stay_put)
    try:
        mu = jnp.array([[1.0, 2.0], [0.0, 0.0]])
        init = jnp.array([[1.0, 0.0], [3.0, 4.0]])
        d = sample(jax.random.split(jax.random.PRNGKey(0), 2), quadratic, init, (mu,), StayPutSettings())
        assert d.z.shape == (2, 3, 2)
        np.testing.assert_array_equal(d.z[:, 0], np.asarray(init))
        np.testing.assert_allclose(d.potential_energy[:, 0], [2.0, 12.5])      # |z - mu|^2 / 2 by hand
        with pytest.raises(ValueError, match=r"init_z: expected shape \(chains, D\)"):
            sample(jax.random.split(jax.random.PRNGKey(0), 2), quadratic, init[None], (mu,), StayPutSettings())
    finally:
        sampling.base._SAMPLERS.pop(StayPutSettings)
    with pytest.raises(TypeError, match="registered sampler .*got StayPutSettings"):
        sample(jax.random.split(jax.random.PRNGKey(0), 2), quadratic, init, (mu,), StayPutSettings())


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
