"""Where a number was computed: package versions, git commit, and the machine (CPU model, the
instruction sets XLA compiles for, the XLA flags in force, the JAX backend and devices).

XLA compiles each program for the host's instruction set (vector width, FMA contraction, the order
of a reduction's partial sums), so the same config and seed give bitwise-equal numbers only on the
same machine with the same versions and flags. ``manifest.json`` records all of them so that a
reader can tell whether a rerun should match a committed result bitwise (same machine) or within
its error bars (elsewhere; :mod:`slt_relu.workflow.compare`).
"""
from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["available_memory", "describe", "git_commit", "machine", "usable_cores", "versions"]

PACKAGES = ("slt_relu", "jax", "jaxlib", "numpy", "scipy", "optax", "numpyro", "blackjax", "pydantic", "matplotlib",
            "xarray", "arviz-base", "arviz-stats", "h5netcdf")
# CPU features that change the code XLA's CPU backend emits (vector width, fused multiply-add)
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "amx_tile", "neon", "asimd", "sve")


def versions() -> dict:
    """Python's and every relevant package's version (None where a package is not installed)."""
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def git_commit() -> str | None:
    """The package's git commit, with ``+dirty`` when tracked files differ from it; None outside git."""
    here = Path(__file__).resolve().parent
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10)
        if res.returncode == 0:
            return res.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def _cpuinfo() -> tuple[str | None, list[str]]:
    """(model name, flags) from /proc/cpuinfo on Linux; (platform's processor string, []) elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None, []
    model, flags = None, []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if model is None and key in ("model name", "hardware", "cpu model"):
            model = value.strip()
        if not flags and key in ("flags", "features"):
            flags = value.split()
    return model, flags


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_memory() -> int:
    """Bytes of memory available to a new allocation now (Linux: MemAvailable; else free physical pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 1 << 62                                      # unknown: no bound


def machine() -> dict:
    """The machine a run computed on: CPU model and architecture, the XLA-relevant instruction-set
    flags it has, ``XLA_FLAGS`` in force, JAX's backend and devices."""
    import jax

    model, flags = _cpuinfo()
    return {
        "cpu_model": model,
        "architecture": platform.machine(),
        "isa_flags": [f for f in ISA_FLAGS if f in flags],
        "cores": os.cpu_count(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
    }


def describe(manifest: dict) -> str:
    """One line saying where a results folder was computed (for ``slt-relu show``)."""
    m = manifest.get("machine") or {}
    if not m:
        return "machine: not recorded (a folder written before manifests recorded it)"
    isa = " ".join(m.get("isa_flags") or []) or "?"
    xla = m.get("xla_flags") or "none"
    return (f"machine: {m.get('cpu_model') or '?'} ({m.get('architecture') or '?'}, {m.get('cores') or '?'} cores; "
            f"ISA {isa}); XLA_FLAGS {xla}; backend {m.get('jax_backend') or '?'}")
