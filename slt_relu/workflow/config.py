"""TOML experiment configs: reading the file and ``--set`` overrides.

Every mistake becomes a ``slt_relu.workflow.settings.ConfigError`` whose message is one line naming the key
(dotted path, e.g. ``landscape.resolution``) and what was expected.  The CLI prints it
and exits with status 2 before any results folder exists.  The keys themselves are declared
once per kind as a typed schema (``slt_relu.workflow.settings``, ``slt_relu.kinds``).
"""
from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any

from .settings import ConfigError

__all__ = ["apply_overrides", "load", "parse_override", "read_toml"]


def load(path: str | Path, overrides: dict | None = None) -> dict:
    """The config at ``path`` as a dict with ``overrides`` (dotted key -> value) applied."""
    return apply_overrides(read_toml(path), overrides or {})


def read_toml(path: str | Path) -> dict:
    """The parsed TOML file; ConfigError if it is missing, not text or not TOML."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (expected a TOML config)") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read it ({err.strerror})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML ({err})") from None


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
    """Set dotted keys in the parsed config; ``a.b[2].c`` indexes an array of tables.  Neither ``data`` nor
    the overrides' values are changed (a later key may set inside a table an earlier one put there)."""
    data = copy.deepcopy(data)
    for dotted, value in copy.deepcopy(overrides).items():
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
