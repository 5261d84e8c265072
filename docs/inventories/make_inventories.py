"""Write the Sphinx inventories (objects.inv format) the site's intersphinx reads: one per project whose types
the documentation names (Python's standard library, JAX, NumPy, xarray, Matplotlib).

    python docs/inventories/make_inventories.py          # writes docs/inventories/NAME.inv, committed

Why they are made here: the site builds with no network (tests/test_docs.py builds it in a sandbox, and a build
must not depend on another site being up), so docs/conf.py's ``intersphinx_mapping`` names these files as the
inventories and Sphinx fetches nothing.  They hold only the names the documentation references (the types in the
public signatures and docstrings), each with its page on the project's published documentation, so a link from a
signature's ``jax.Array`` or ``xarray.Dataset`` goes to that project's entry.  A type the build cannot resolve is a
warning (nitpicky, -W): add it to ``OBJECTS`` with its URL, rerun, and commit the .inv files.

The format (Sphinx's ``InventoryFile``): four header lines, then zlib-compressed lines
``name domain:role priority uri display-name`` with ``uri`` relative to the project's base URL and ``-`` for a
display name equal to the name.
"""
from __future__ import annotations

import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# project -> (base URL, version, {name: (domain:role, path under the base URL)})
OBJECTS: dict[str, tuple[str, str, dict[str, tuple[str, str]]]] = {
    "python": ("https://docs.python.org/3/", "3", {
        **{name: ("py:class", f"library/functions.html#{name}")
           for name in ("int", "float", "bool", "complex", "object", "type", "slice")},
        **{name: ("py:class", f"library/stdtypes.html#{name}")
           for name in ("str", "bytes", "list", "tuple", "dict", "set", "frozenset", "range")},
        "None": ("py:data", "library/constants.html#None"),
        **{name: ("py:exception", f"library/exceptions.html#{name}")
           for name in ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "OSError",
                        "FileNotFoundError", "NotImplementedError")},
        "pathlib.Path": ("py:class", "library/pathlib.html#pathlib.Path"),
        "os.PathLike": ("py:class", "library/os.html#os.PathLike"),
        "fractions.Fraction": ("py:class", "library/fractions.html#fractions.Fraction"),
        "argparse.ArgumentParser": ("py:class", "library/argparse.html#argparse.ArgumentParser"),
        **{f"collections.abc.{name}": ("py:class", f"library/collections.abc.html#collections.abc.{name}")
           for name in ("Callable", "Iterable", "Iterator", "Mapping", "Sequence")},
        # annotations name these as classes (a parameter "typing.Sequence[int]"): listed as py:class
        **{f"typing.{name}": ("py:class", f"library/typing.html#typing.{name}")
           for name in ("Any", "Annotated", "Callable", "ClassVar", "Literal", "NamedTuple", "Optional", "Sequence",
                        "Union")},
    }),
    "jax": ("https://docs.jax.dev/en/latest/", "latest", {
        "jax.Array": ("py:class", "_autosummary/jax.Array.html"),
        "jax.jit": ("py:function", "_autosummary/jax.jit.html"),
        "jax.vmap": ("py:function", "_autosummary/jax.vmap.html"),
        "jax.random.key": ("py:function", "_autosummary/jax.random.key.html"),
        "jax.random.PRNGKey": ("py:function", "_autosummary/jax.random.PRNGKey.html"),
        "jax.sharding.Mesh": ("py:class", "jax.sharding.html#jax.sharding.Mesh"),
    }),
    "numpy": ("https://numpy.org/doc/stable/", "stable", {
        "numpy.ndarray": ("py:class", "reference/generated/numpy.ndarray.html"),
        "numpy.dtype": ("py:class", "reference/generated/numpy.dtype.html"),
        "numpy.random.Generator": ("py:class", "reference/random/generator.html#numpy.random.Generator"),
        "numpy.typing.ArrayLike": ("py:data", "reference/typing.html#numpy.typing.ArrayLike"),
    }),
    "xarray": ("https://docs.xarray.dev/en/stable/", "stable", {
        f"xarray.{name}": ("py:class", f"generated/xarray.{name}.html") for name in ("Dataset", "DataArray", "DataTree")
    }),
    "matplotlib": ("https://matplotlib.org/stable/", "stable", {
        "matplotlib.figure.Figure": ("py:class", "api/_as_gen/matplotlib.figure.Figure.html"),
        "matplotlib.axes.Axes": ("py:class", "api/_as_gen/matplotlib.axes.Axes.html"),
    }),
}


def inventory(project: str, version: str, objects: dict[str, tuple[str, str]]) -> bytes:
    """An objects.inv (version 2) holding ``objects``."""
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
              f"# The remainder of this file is compressed using zlib.\n")
    lines = "".join(f"{name} {role} 1 {uri} -\n" for name, (role, uri) in sorted(objects.items()))
    return header.encode() + zlib.compress(lines.encode())


def main() -> None:
    for project, (_, version, objects) in OBJECTS.items():
        path = HERE / f"{project}.inv"
        path.write_bytes(inventory(project, version, objects))
        print(f"{path.relative_to(HERE.parent.parent)}: {len(objects)} names")


if __name__ == "__main__":
    main()
