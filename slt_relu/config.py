"""TOML experiment configs, validated up front.

Every mistake becomes a :class:`ConfigError` whose message is one line naming the key
(dotted path, e.g. ``landscape.resolution``) and what was expected.  The CLI prints it
and exits with status 2 before any results folder exists.

Shared top-level keys of every config:
  kind         str, required: the experiment kind ("landscape", "fisher")
  name         str: used for the default output folder (default: the file's stem)
  description  str
  seed         int >= 0 (default 0): the root PRNG key
  dtype        "float64" (default) or "float32"
  sigma        float > 0: noise standard deviation (default: the truth example's)
  [truth]      name = a registered example (see ``slt_relu.truths.names()``) plus its options
  [inputs]     distribution = "uniform" | "gaussian", n_in, half_width | std, cells, order
"""
from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

_REQUIRED = object()


class ConfigError(ValueError):
    """A config mistake; str(err) is one line naming the key and what was expected."""


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


class Table:
    """A view of one TOML table that checks each key as it is read and remembers which were read."""

    def __init__(self, data: dict, path: str = ""):
        if not isinstance(data, dict):
            raise ConfigError(f"{path or 'config'}: expected a table, got {_describe(data)}")
        self.data, self.path, self.used = data, path, set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: str) -> bool:
        return name in self.data

    def fail(self, name: str, expected: str, value=_REQUIRED):
        got = "" if value is _REQUIRED else f", got {_describe(value)}"
        raise ConfigError(f"{self.key(name)}: expected {expected}{got}")

    def get(self, name: str, kind: str, default=_REQUIRED, *, choices=None, low=None, high=None):
        """Read key ``name`` as kind in {str, int, float, bool, list[int], list[float], list[str], range}."""
        self.used.add(name)
        if name not in self.data:
            if default is _REQUIRED:
                raise ConfigError(f"{self.key(name)}: missing; expected {_expected(kind, choices, low, high)}")
            return default
        value = self.data[name]
        expected = _expected(kind, choices, low, high)
        if not _is_kind(value, kind):
            self.fail(name, expected, value)
        items = value if kind.startswith("list") else ([value] if kind in ("int", "float") else [])
        if kind == "range":
            if not value[0] < value[1]:
                self.fail(name, expected, value)
        for item in items:
            if (low is not None and item < low) or (high is not None and item > high):
                self.fail(name, expected, value)
        if choices is not None and value not in choices:
            self.fail(name, expected, value)
        if kind == "float":
            value = float(value)
        if kind in ("list[float]", "range"):
            value = [float(v) for v in value]
        return value

    def table(self, name: str, required: bool = False) -> "Table":
        self.used.add(name)
        if name not in self.data:
            if required:
                raise ConfigError(f"{self.key(name)}: missing; expected a [{self.key(name)}] table")
            return Table({}, self.key(name))
        return Table(self.data[name], self.key(name))

    def tables(self, name: str) -> list["Table"]:
        self.used.add(name)
        value = self.data.get(name, [])
        if not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            self.fail(name, f"an array of tables ([[{self.key(name)}]])", value)
        return [Table(v, f"{self.key(name)}[{i}]") for i, v in enumerate(value)]

    def rest(self) -> dict:
        """The keys not read yet (marks them read)."""
        out = {k: v for k, v in self.data.items() if k not in self.used}
        self.used.update(out)
        return out

    def done(self):
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            known = ", ".join(sorted(self.used)) or "none"
            raise ConfigError(f"{self.key(unknown[0])}: unknown key; expected one of {known}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_kind(value, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return _is_number(value)
    if kind == "range":
        return isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)
    if kind.startswith("list[") and isinstance(value, list) and value:
        return all(_is_kind(v, kind[5:-1]) for v in value)
    return False


def _expected(kind, choices, low, high) -> str:
    words = {
        "str": "a string", "bool": "true or false", "int": "an integer", "float": "a number",
        "list[int]": "a non-empty list of integers", "list[float]": "a non-empty list of numbers",
        "list[str]": "a non-empty list of strings", "range": "[low, high] with low < high",
    }
    text = words[kind]
    if choices is not None:
        text = "one of " + ", ".join(repr(c) for c in choices)
    if low is not None and high is not None:
        text += f" in [{low}, {high}]"
    elif low is not None:
        text += f" >= {low}"
    elif high is not None:
        text += f" <= {high}"
    return text


def load(path: str | Path, overrides: dict | None = None) -> Table:
    """Parse a TOML file into a root :class:`Table` (ConfigError on a missing file or bad TOML),
    with ``overrides`` (dotted key -> value) applied."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML ({err})") from None
    return Table(apply_overrides(data, overrides or {}))


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE a TOML value (``landscape.resolution=51``, ``truth.name="m_symmetric"``)."""
    if "=" not in text:
        raise ConfigError(f"--set {text}: expected KEY=VALUE, e.g. landscape.resolution=51")
    key, raw = text.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word is read as a string
    return key.strip(), value


def apply_overrides(data: dict, overrides: dict[str, Any]) -> dict:
    """Set dotted keys in the parsed config; ``a.b[2].c`` indexes an array of tables."""
    import copy
    import re

    data = copy.deepcopy(data)
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            m = re.fullmatch(r"([^\[\]]+)(?:\[(\d+)\])?", part)
            if not m:
                raise ConfigError(f"--set {dotted}: expected a dotted key like landscape.resolution")
            name, index = m.group(1), m.group(2)
            last = i == len(parts) - 1
            if index is not None:
                seq = node.get(name)
                if not (isinstance(seq, list) and int(index) < len(seq)):
                    raise ConfigError(f"--set {dotted}: {name} has no entry {index}")
                if last:
                    seq[int(index)] = value
                node = seq[int(index)]
            elif last:
                node[name] = value
            else:
                node = node.setdefault(name, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"--set {dotted}: {name} is not a table")
    return data


def read_example(root: Table, required: bool = True):
    """Resolve [truth] (and [inputs], sigma overrides) into a ``truths.Example`` or None."""
    from . import truths
    from .inputs import Gaussian, UniformBox

    if not root.has("truth"):
        if required:
            raise ConfigError("truth: missing; expected a [truth] table with name = one of " + ", ".join(truths.names()))
        example = None
    else:
        t = root.table("truth")
        name = t.get("name", "str", choices=truths.names())
        options = t.rest()
        try:
            example = truths.get(name, **options)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"truth: {err}") from None
    inputs = example.inputs if example else None
    if root.has("inputs"):
        i = root.table("inputs")
        dist = i.get("distribution", "str", choices=["uniform", "gaussian"])
        n_in = i.get("n_in", "int", example.truth.n_in if example else _REQUIRED, low=1)
        if example and n_in != example.truth.n_in:
            i.fail("n_in", f"{example.truth.n_in} (the truth's number of inputs)", n_in)
        cells = i.get("cells", "int", 96, low=1, high=2048)
        order = i.get("order", "int", 2, low=1, high=16)
        if dist == "uniform":
            inputs = UniformBox(i.get("half_width", "float", low=1e-12), n_in, cells, order)
        else:
            inputs = Gaussian(i.get("std", "float", low=1e-12), n_in, cells, order)
        i.done()
    if inputs is None:
        raise ConfigError("inputs: missing; expected an [inputs] table (no [truth] gives a default)")
    sigma = root.get("sigma", "float", example.sigma if example else 1.0, low=1e-12)
    return example, inputs, sigma
