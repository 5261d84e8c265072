"""What a results folder says, in lines a reader can take in: the summary a run prints at its end
(its headline numbers, its warnings, where the folder is) and ``slt-relu show PATH`` (the same with
the config, the versions, the machine and the files), read from ``manifest.json`` and
``metrics.json`` alone, so a committed result can be read without opening JSON.

Each experiment kind says what its headline numbers are (its Kind's ``headline(metrics) -> lines``,
``slt_relu.kinds.kind``: a posterior sweep's masses per point with error bars and its crossover, the learning
coefficient's lambda_hat per case, ...).
"""
from __future__ import annotations

import json
from pathlib import Path

from . import provenance
from .kind import kinds
from .settings import ConfigError

__all__ = ["end_of_run", "expected_runtime", "headline", "read_folder", "show", "warning_groups"]


def read_folder(folder: Path) -> tuple[dict, dict]:
    """(manifest, metrics) of a results folder; ConfigError naming what is missing."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        raise ConfigError(f"show {folder}: expected a results folder of slt-relu (no readable manifest.json)") from None
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
    except (OSError, ValueError):
        raise ConfigError(f"show {folder}: metrics.json is missing or unreadable") from None
    if not isinstance(manifest, dict) or not isinstance(metrics, dict):
        raise ConfigError(f"show {folder}: expected JSON tables in manifest.json and metrics.json")
    return manifest, metrics


def headline(kind: str | None, metrics: dict) -> list[str]:
    """The kind's headline lines of its metrics (none for an unknown kind)."""
    registry = kinds()
    if kind not in registry:
        return []
    try:
        return registry[kind].headline(metrics)
    except (KeyError, TypeError, ValueError, IndexError):       # an older folder without some numbers
        return ["(headline numbers not available for this folder's metrics)"]


def end_of_run(folder: Path) -> tuple[list[str], list[str]]:
    """What a run prints when it finishes: (its headline lines, its warnings)."""
    manifest, metrics = read_folder(Path(folder))
    return headline(manifest.get("kind"), metrics), list(metrics.get("warnings") or [])


SHOWN_PER_GROUP = 2          # warnings listed per group unless every warning is asked for


def warning_groups(warnings: list[str]) -> list[tuple[str, list[str]]]:
    """Warnings grouped by what they say: (what they say with every number as N, every warning in it), largest
    group first.  Two warnings are of one group when they are equal once the place they name (the text before the
    first ': ', e.g. a sweep point) is dropped and every number is masked."""
    import re

    groups: dict[str, list[str]] = {}
    for w in warnings:
        what = w.split(": ", 1)[-1]
        groups.setdefault(re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)?(?![\w.])", "N", what), []).append(w)
    return sorted(groups.items(), key=lambda g: -len(g[1]))


def _warning_lines(warnings: list[str], every: bool) -> list[str]:
    """``slt-relu show``'s warnings: a count per group with its first few (all of them with ``every``)."""
    if every or len(warnings) <= 2 * SHOWN_PER_GROUP:
        return [f"  {w}" for w in warnings]
    out = []
    for what, items in warning_groups(warnings):
        out.append(f"  {len(items)} x {what}" if len(items) > 1 else f"  {items[0]}")
        if len(items) > 1:
            out += [f"      {w}" for w in items[:SHOWN_PER_GROUP]]
            if len(items) > SHOWN_PER_GROUP:
                out.append(f"      ... and {len(items) - SHOWN_PER_GROUP} more (slt-relu show --all lists them)")
    return out


def show(folder, every: bool = False) -> str:
    """``slt-relu show``: a results folder's config, versions, machine, headline numbers, warnings
    (grouped by what they say, a few of each; ``every``: all of them) and files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"show {folder}: expected a results folder, got {'a file' if folder.exists() else 'nothing'}")
    manifest, metrics = read_folder(folder)
    versions = manifest.get("versions", {})
    out = [f"{manifest.get('name', folder.name)}  (kind {manifest.get('kind', '?')}, seed {manifest.get('seed', '?')})",
           f"config: {manifest.get('config_path', '?')}"]
    if manifest.get("overrides"):
        out.append("overrides: " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in manifest["overrides"].items()))
    desc = (manifest.get("config") or {}).get("description")
    if desc:
        out.append(f"description: {desc}")
    out.append(f"ran {manifest.get('finished_utc', '?')} in {manifest.get('wall_time_s', float('nan')):.0f} s on "
               f"{', '.join(manifest.get('jax_devices', [])) or '?'}; git {manifest.get('git_commit') or '?'}")
    out.append("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v))
    out.append(provenance.describe(manifest))
    out.append("")
    out += headline(manifest.get("kind"), metrics) or ["(no headline numbers for this kind)"]
    warnings = metrics.get("warnings") or []
    out.append("")
    groups = len(warning_groups(warnings))
    out.append(f"{len(warnings)} warning{'' if len(warnings) == 1 else 's'}"
               + (f" of {groups} kinds" if groups > 1 and not every else "") + (":" if warnings else ""))
    out += _warning_lines(warnings, every)
    files = manifest.get("files") or sorted(p.name for p in folder.iterdir())
    plots = [f for f in files if f.endswith(".png")]
    draws = [f for f in files if f.startswith("draws/") and f.endswith(".nc")]
    out.append("")
    out.append("plots: " + (", ".join(plots) or "none"))
    if "results.nc" in files:
        out.append("numbers: results.nc (one labelled Dataset: xarray.open_dataset(path, engine=\"h5netcdf\"))")
    present = [f for f in draws if (folder / f).is_file()]
    if present:
        out.append(f"draws: {len(present)} netCDF files in draws/ (xarray.open_datatree(path, engine=\"h5netcdf\"))")
    if len(present) < len(draws):
        out.append(f"draws: {len(draws) - len(present)} netCDF files the run wrote are not here (results/ does not "
                   "commit draws/; rerun the config to get them)")
    return "\n".join(out)


def expected_runtime(path: Path) -> str:
    """The committed results' wall time of a shipped config (``results/NAME/manifest.json``, plus the
    time its resumed points took when they were computed, ``resumed_wall_s`` of its metrics)."""
    from . import runner

    try:
        m = json.loads((runner.RESULTS_DIR / path.stem / "manifest.json").read_text())
        s = float(m["wall_time_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return "?"
    try:
        s += float(json.loads((runner.RESULTS_DIR / path.stem / "metrics.json").read_text()).get("resumed_wall_s") or 0.0)
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    backend = m.get("jax_backend", "cpu")
    text = f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"
    return text + ("" if backend == "cpu" else f" ({backend})")
