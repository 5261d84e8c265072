"""Run one experiment config into a results folder, atomically.

``run_config(path, out)`` validates the whole config first (a ConfigError leaves nothing
on disk), computes in a temporary sibling folder ``.<name>.partial-<pid>``, writes
``metrics.json``, ``manifest.json`` (resolved config, seed, package versions, JAX devices,
git commit, wall time), array files and PNG plots there, and only then renames it to
``out`` (replacing an older result).  An interrupted run leaves no ``out`` folder.  Kinds
with ``RESUMABLE = True`` (sweeps) also get ``checkpoints=<out's parent>/.<name>.checkpoints``:
they save each finished sweep point there atomically and reuse it on the next run of the
same config; the folder is removed once the results folder is in place.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from . import config as cfg
from .kinds import KINDS

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"


def to_json(value):
    """Convert numpy / JAX scalars and arrays to plain JSON values (NaN -> None)."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return to_json(np.asarray(value).tolist())
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(to_json(data), indent=2, sort_keys=False) + "\n")


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("slt_relu", "jax", "jaxlib", "numpy", "optax", "numpyro", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _git_commit() -> str | None:
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10)
        if res.returncode == 0:
            return res.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def prepare(path: str | Path, overrides: dict | None = None):
    """Validate a config fully; returns (kind module, resolved settings, root table)."""
    root = cfg.load(path, overrides)
    kind = root.get("kind", "str", choices=sorted(KINDS))
    root.get("name", "str", Path(path).stem)
    root.get("description", "str", "")
    root.get("seed", "int", 0, low=0)
    dtype = root.get("dtype", "str", "float64", choices=["float64", "float32"])
    _set_dtype(dtype)
    module = KINDS[kind]
    settings = module.validate(root)
    root.done()
    return module, settings, root


def _set_dtype(dtype: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", dtype == "float64")


def run_config(path: str | Path, out: str | Path | None = None, progress: bool = True,
               overrides: dict | None = None) -> Path:
    """Run the config at ``path`` (with dotted-key ``overrides``); returns the results folder
    (default ``results/<name>``). The config's ``dtype`` holds for the run only: JAX's x64
    flag is restored afterwards, so a float32 config does not change later computations
    in the same process."""
    import jax

    x64_before = bool(jax.config.read("jax_enable_x64"))
    try:
        return _run_config(path, out, progress, overrides)
    finally:
        jax.config.update("jax_enable_x64", x64_before)


def _run_config(path, out, progress, overrides) -> Path:
    import jax

    module, settings, root = prepare(path, overrides)
    name = root.data.get("name", Path(path).stem)
    out = Path(out) if out is not None else Path("results") / name
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    start = time.time()
    checkpoints = out.parent / f".{out.name}.checkpoints"
    extra = {"checkpoints": checkpoints} if getattr(module, "RESUMABLE", False) else {}
    try:
        seed = root.data.get("seed", 0)
        metrics = module.run(settings, tmp, jax.random.PRNGKey(seed), progress=progress, **extra)
        wall = time.time() - start
        write_json(tmp / "metrics.json", metrics)
        write_json(tmp / "manifest.json", {
            "config_path": str(Path(path)),
            "config": root.data,
            "overrides": overrides or {},
            "resolved": module.describe(settings),
            "seed": seed,
            "kind": root.data["kind"],
            "versions": _versions(),
            "jax_devices": [str(d) for d in jax.devices()],
            "jax_backend": jax.default_backend(),
            "x64": bool(jax.config.read("jax_enable_x64")),
            "git_commit": _git_commit(),
            "command": " ".join(sys.argv),
            "wall_time_s": round(wall, 3),
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
        if extra:
            shutil.rmtree(checkpoints, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def shipped_configs() -> list[Path]:
    return sorted(EXPERIMENTS_DIR.glob("*.toml"))
