"""``slt-relu plot FOLDER``: a results folder's figures drawn again from its results.nc and its manifest's config."""
from __future__ import annotations

import re
from pathlib import Path

from .config import apply_overrides
from .output import draw_figures, write_json
from .runner import Prepared, read_manifest
from .settings import ConfigError

__all__ = ["redraw"]


def redraw(folder: str | Path, out: str | Path | None = None) -> list[Path]:
    """``slt-relu plot``: the figures of a results folder drawn again from its results.nc and its manifest's config
    (resolved as the run resolved it), into ``out`` (default: the folder itself, replacing its figures).  The
    config's ``dtype`` holds while it is resolved and drawn only: JAX's x64 flag is restored afterwards."""
    import jax

    x64_before = bool(jax.config.read("jax_enable_x64"))
    try:
        return _redraw(folder, out)
    finally:
        jax.config.update("jax_enable_x64", x64_before)


def _redraw(folder: str | Path, out: str | Path | None) -> list[Path]:
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        raise ConfigError(f"plot {folder}: expected a results folder of slt-relu (no readable manifest.json)")
    raw, overrides = manifest.get("config"), manifest.get("overrides") or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"plot {folder}: its manifest.json records no config to resolve")
    label = Path(manifest.get("config_path") or f"{manifest.get('name', 'config')}.toml")
    prep = Prepared(label, apply_overrides(raw, overrides), overrides)
    if prep.kind.figures is None:
        raise ConfigError(f"plot {folder}: kind {prep.settings.kind!r} draws its figures during the run only")
    if not (folder / "results.nc").is_file():
        raise ConfigError(f"plot {folder}: expected results.nc in the folder")
    out = folder if out is None else Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--out {out}: cannot create it ({err.strerror})") from None
    try:
        paths = draw_figures(prep.kind, prep.resolved, folder, out)
    except KeyError as err:                        # a results.nc of an older version, without a variable now drawn
        name = re.search(r"named '([^']+)'", str(err.args[0]))        # xarray's "No variable named 'x'. ..."
        raise ConfigError(f"plot {folder}: its results.nc has no {name.group(1) if name else err.args[0]!r}, "
                          f"which this version's figures of kind {prep.settings.kind!r} draw; run the config again "
                          "(slt-relu run)") from None
    if out.resolve() == folder.resolve():          # a figure the run did not draw: listed, so the folder stays whole
        files = manifest.get("files") or []
        new = [p.name for p in paths if p.name not in files]
        if new:
            write_json(folder / "manifest.json", manifest | {"files": sorted([*files, *new])})
    return paths
