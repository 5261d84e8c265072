"""A researcher's own truth in a config's ``[truth]`` table: inline parameters, or a function of their own.

Inline, the two-layer truth's parameters (``slt_relu.network.TwoLayer``)::

    [truth]
    w = [[1.0, 0.0], [0.0, 1.0]]     # (m, n_in): m nodes' incoming weights
    b = [-0.3, -0.3]                 # (m,), or one number for every node
    q = [1.0, 1.0]                   # (m,), or one number
    c = 0.0
    width = 3                        # the model's nodes (default: the truth's m)

A function in the user's Python file (relative to the config's folder) or module, which returns the truth (a
``TwoLayer`` or a table with ``w``, ``b``, ``q``, ``c``); every other key is an argument of the function, so it
can be a sweep axis (``sweep.truth.a``)::

    [truth]
    name = "my_truths.py:two_kinks"  # or "mypackage.truths:two_kinks" (importable: installed or on PYTHONPATH)
    a = 0.5
    width = 3

Either is an :class:`~slt_relu.truths.Example` (:func:`slt_relu.truths.from_params`): q(x) uniform on
[-1, 1]^n_in unless ``[inputs]`` says otherwise, sigma 1 unless the config's ``sigma`` does.  Every mistake is a
one-line ``ConfigError`` naming the key.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, ConfigDict, Field

from .. import truths
from .settings import SCALE_BOUND, ConfigError, Section

__all__ = ["FunctionTruth", "InlineTruth", "config_folder", "example_of_own", "load_function", "truth_record",
           "truth_tag"]

MAX_NODES = 256             # the truth's nodes and the model's width (as the registered examples' m and width)
MAX_INPUTS = 2             # the kinds' exact expectations over q(x) (population loss, Fisher) are for n_in <= 2
FUNCTION_PATTERN = re.compile(r"^(?P<source>[^:]+):(?P<function>[A-Za-z_]\w*)$")

# the folder of the config being resolved: a truth file's relative path is read from there (default: the working
# directory, for settings built in Python)
CONFIG_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("CONFIG_DIR", default=None)


# the functions read while a config is prepared, by their spec: its schema check, memory estimate, resolve and
# manifest each build the truth, and the user's file runs once
_LOADED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("_LOADED", default=None)


@contextlib.contextmanager
def config_folder(path: Path | None):
    """Within: a truth file's relative path is relative to ``path`` (the config's folder), and each truth function
    is read once."""
    token = CONFIG_DIR.set(None if path is None else Path(path).resolve())
    loaded = _LOADED.set({})
    try:
        yield
    finally:
        CONFIG_DIR.reset(token)
        _LOADED.reset(loaded)


def _bounded(value):
    """A parameter within the configs' scale bound (0 or a magnitude in [1 / SCALE_BOUND, SCALE_BOUND])."""
    flat = np.ravel(np.asarray(value, float))
    bad = flat[(np.abs(flat) > SCALE_BOUND) | ((flat != 0) & (np.abs(flat) < 1 / SCALE_BOUND))]
    if bad.size:
        raise ValueError(f"expected numbers 0 or of magnitude in [{1 / SCALE_BOUND}, {SCALE_BOUND}], got "
                         f"{float(bad[0])!r}")
    return value


Numbers = Annotated[tuple[float, ...], AfterValidator(_bounded)]
Number = Annotated[float, AfterValidator(_bounded)]
Width = Annotated[int | None, Field(None, ge=1, le=MAX_NODES, description="the model's nodes d >= m (default: the "
                                    "truth's m); extra nodes start at zero")]


class InlineTruth(Section):
    """``[truth]`` with the parameters written in the config (module docstring)."""

    name: Literal["inline"] = Field("inline", description="'inline' (may be left out when w is given)")
    w: Annotated[tuple[Numbers, ...], Field(min_length=1, max_length=MAX_NODES,
                                            description="(m, n_in) incoming weights, one row per node")]
    b: Number | Numbers = Field(0.0, description="(m,) biases, or one number for every node")
    q: Number | Numbers = Field(1.0, description="(m,) outgoing weights, or one number for every node")
    c: Number = Field(0.0, description="output bias")
    width: Width


class FunctionTruth(Section):
    """``[truth]`` naming a function of the user's (module docstring); other keys are its arguments."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, allow_inf_nan=False)
    __tag__ = "file.py:function"            # the alternative's tag (truth_tag), as the settings tables show it

    name: str = Field(pattern=FUNCTION_PATTERN.pattern, json_schema_extra={"expected": "'path/to/file.py:function' "
                      "or 'package.module:function'"}, description="'path/to/file.py:function' (relative to the "
                      "config's folder) or 'package.module:function'; it returns the truth (a TwoLayer or a table "
                      "with w, b, q, c)")
    width: Width


def truth_tag(value) -> str | None:
    """The alternative of the ``[truth]`` union a table is: 'inline' (w given, no name), 'file.py:function' (a name
    with ':'), else its name (a registered example)."""
    if isinstance(value, dict):
        name = value.get("name", "inline" if "w" in value else None)
    else:
        name = getattr(value, "name", None)
    return FunctionTruth.__tag__ if isinstance(name, str) and ":" in name else name


def load_function(spec: str):
    """The function ``spec`` names ('file.py:function', relative to the config's folder, or 'module:function');
    ConfigError naming ``truth.name``.  A file is executed as a module without writing bytecode next to it."""
    loaded = _LOADED.get()
    if loaded is not None and spec in loaded:
        return loaded[spec]
    fn = _load(spec)
    if loaded is not None:
        loaded[spec] = fn
    return fn


def _load(spec: str):
    source, function = FUNCTION_PATTERN.match(spec).group("source", "function")
    if source.endswith(".py"):
        base = CONFIG_DIR.get() or Path.cwd()
        path = (base / source).resolve()
        if not path.is_file():
            raise ConfigError(f"truth.name: no Python file {source!r} (read relative to {base})")
        module_name = f"slt_relu_truth_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        before, sys.dont_write_bytecode = sys.dont_write_bytecode, True     # no __pycache__ beside the user's file
        try:
            loader_spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001  (the user's file: any error is theirs to see, in one line)
            raise ConfigError(f"truth.name: running {source} raised {type(err).__name__}: {err}") from None
        finally:
            sys.dont_write_bytecode = before
    else:
        try:
            module = importlib.import_module(source)
        except Exception as err:  # noqa: BLE001
            raise ConfigError(f"truth.name: cannot import module {source!r} ({type(err).__name__}: {err}); "
                              "expected an importable module or a path ending in .py") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise ConfigError(f"truth.name: {source} has no function {function!r}")
    return fn


SHAPES = {"w": "(m, n_in)", "b": "(m,)", "q": "(m,)", "c": "()"}


def _as_truth(value, where: str):
    """A TwoLayer from what a truth function returned (a TwoLayer or a table w, b, q, c); ConfigError."""
    from ..network import TwoLayer, make_params

    if isinstance(value, TwoLayer):
        parts = value._asdict()
    elif isinstance(value, dict) and "w" in value:
        unknown = set(value) - {"w", "b", "q", "c"}
        if unknown:
            raise ConfigError(f"{where}: returned unknown parameter(s) {sorted(unknown)}; expected w, b, q, c")
        parts = {"b": 0.0, "q": 1.0, "c": 0.0} | value
    else:
        raise ConfigError(f"{where}: returned {type(value).__name__}; expected a TwoLayer or a table with w, b, q, c")
    arrays = {}
    for k, v in parts.items():
        key = f"truth.{k}" if where == "truth" else f"{where}: {k}"
        try:
            arrays[k] = np.asarray(v, float)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected numbers in an array of shape {SHAPES[k]} (rows of equal length)") from None
        if not np.isfinite(arrays[k]).all():
            raise ConfigError(f"{key}: expected finite numbers")
        try:
            _bounded(arrays[k])
        except ValueError as err:
            raise ConfigError(f"{key}: {err}") from None
    try:
        truth = make_params(arrays["w"], arrays["b"], arrays["q"], arrays["c"])
    except (TypeError, ValueError) as err:
        msg = str(err)
        raise ConfigError(f"truth.{msg}" if where == "truth" else f"{where}: {msg}") from None
    if not (1 <= truth.width <= MAX_NODES and 1 <= truth.n_in <= MAX_INPUTS):
        key = "truth.w" if where == "truth" else f"{where}: w"
        raise ConfigError(f"{key}: expected shape (m, n_in) with m in [1, {MAX_NODES}] and n_in 1 or 2 (the kinds' "
                          f"exact expectations over q(x)), got {tuple(np.shape(arrays['w']))}")
    return truth


def example_of_own(truth) -> truths.Example:
    """The Example of an inline or function ``[truth]`` (:func:`slt_relu.truths.from_params`); ConfigError."""
    if isinstance(truth, InlineTruth):
        params = _as_truth({"w": truth.w, "b": truth.b, "q": truth.q, "c": truth.c}, "truth")
        name, description, options = "inline", "inline truth", {}
    else:
        fn = load_function(truth.name)
        options = dict(truth.model_extra or {})
        try:
            inspect.signature(fn).bind(**options)
        except TypeError as err:
            raise ConfigError(f"truth: the options {sorted(options)} do not fit {truth.name}: {err}") from None
        except ValueError:                                       # no signature to read (a builtin): call it
            pass
        try:
            value = fn(**options)
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001
            raise ConfigError(f"truth.name: {truth.name} raised {type(err).__name__}: {err}") from None
        params = _as_truth(value, f"truth.name: {truth.name}")
        source, name = truth.name.rsplit(":", 1)
        description = f"{name} ({source})"
    if truth.width is not None and truth.width < params.width:
        raise ConfigError(f"truth.width: expected at least the truth's {params.width} nodes, got {truth.width}")
    example = truths.from_params(params, width=truth.width, name=name)
    return example._replace(description=f"{description}: " + "".join(f"{k} = {v}, " for k, v in options.items())
                            + f"{params.width} nodes on {params.n_in} inputs, model width "
                                         f"{example.model.base.width}")


def truth_record(example: truths.Example) -> dict:
    """The truth's parameters as plain lists (the manifest records them, so the run can be read without the
    user's file)."""
    return {k: np.asarray(v).tolist() for k, v in example.truth._asdict().items()}
