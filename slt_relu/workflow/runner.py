"""Run one experiment config into a results folder, atomically, without ever destroying data.

``run_config(config, out)``:

1. reads the config (a path, or the name of a shipped config as ``slt-relu list`` prints it),
   validates it against its kind's schema and resolves it (truths, models, samplers): any
   mistake is a one-line :class:`ConfigError`, raised before anything is computed or written;
2. checks the output folder (default ``runs/NAME/``, untracked): a file, a symlink, or a
   non-empty folder that is not an earlier results folder of this tool is refused, and so is
   an earlier results folder holding files its manifest does not list (someone put them
   there); an unwritable place is refused too;
3. takes a lock (``.NAME.lock``: one run per folder at a time), removes what killed runs left
   (``.NAME.partial-PID`` folders, and restores ``.NAME.old-PID`` when the swap below was cut
   short), by name and only for processes that are gone;
4. computes in ``.NAME.partial-PID`` next to the folder, where the kind writes its files;
   sweeps checkpoint every finished point in ``.NAME.checkpoints`` (``slt_relu.workflow.sweep``);
5. writes what the kind returns (``metrics.json``, ``results.nc``, figures, draws) and ``manifest.json`` (resolved settings, seed, package versions,
   JAX devices, git commit, wall time, the list of files), then swaps the folder into place:
   the old results folder is renamed aside, the new one renamed in, the old one deleted.  The
   checkpoints are removed once the results are in place.

An interrupted run leaves the old results folder (if any) untouched, its checkpoints (to
resume), and nothing else once the next run has started.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time
from pathlib import Path


from .settings import ConfigError, parse
from . import memory, provenance
from .config import load
from .kind import kinds
from .output import write_json, write_output
from .sweep import alive
from .truth_sources import FunctionTruth, InlineTruth, config_folder, example_of_own, truth_record

__all__ = ["Prepared", "RunContext", "cache_dir_default", "check_folder_path", "check_output", "clean_stale",
           "config_path", "enable_compilation_cache", "is_results_folder", "prepare", "read_manifest", "recorded_path",
           "run_config", "run_prepared"]

_HERE = Path(__file__).resolve().parent.parent   # the package: shipped configs as package data in a wheel
EXPERIMENTS_DIR = _HERE / "configs" if (_HERE / "configs").is_dir() else _HERE.parent / "experiments"
RESULTS_DIR = _HERE.parent / "results"                         # committed results: only in a checkout
TOOL = "slt_relu"
OWN_FILES = ("metrics.json", "manifest.json")                  # besides the files a manifest lists


# ----------------------------------------------------------------------------------------
# configs


def shipped_configs() -> list[Path]:
    return sorted(EXPERIMENTS_DIR.glob("*.toml"))


def config_path(config: str | Path) -> Path:
    """A config file's path: the path itself, or a shipped config's name (``dslt4_pt1_smc`` or
    ``dslt4_pt1_smc.toml``, as ``slt-relu list`` prints them)."""
    path = Path(config)
    if str(config) == "":
        raise ConfigError("config: expected a TOML file or a shipped config's name, got ''")
    if path.exists() or path.suffix == ".toml" and path.parent != Path("."):
        return path
    shipped = EXPERIMENTS_DIR / (path.name if path.suffix == ".toml" else path.name + ".toml")
    if shipped.is_file():
        return shipped
    if path.suffix != ".toml" and "/" not in str(config):
        names = ", ".join(p.stem for p in shipped_configs())
        raise ConfigError(f"{config}: no such config file or shipped config; expected a path or one of {names}")
    return path


class Prepared:
    """A validated and resolved config: its Kind, typed settings, resolved objects, name."""

    def __init__(self, path: Path, raw: dict, overrides: dict):
        registry = kinds()
        self.path, self.raw, self.overrides = path, raw, overrides
        kind = raw.get("kind")
        if not isinstance(kind, str) or kind not in registry:
            expected = ", ".join(repr(k) for k in sorted(registry))
            raise ConfigError(f"kind: {'missing; ' if kind is None else ''}expected one of {expected}"
                              + (f", got {kind!r}" if kind is not None else ""))
        self.kind = registry[kind]
        with config_folder(path.parent):            # a truth file's path is read from the config's folder
            self.settings = parse(self.kind.settings, raw)
            memory.check(self.settings)             # arrays that cannot fit: refused before anything is built
            self.name = self.settings.name or path.stem
            _set_dtype(self.settings.dtype)
            self.resolved = self.kind.resolve(self.settings, raw)
            truth = getattr(self.settings, "truth", None)
            # a researcher's own truth: its parameters go into the manifest (the run reads without their file)
            self.truth = truth_record(example_of_own(truth)) if isinstance(truth, (InlineTruth, FunctionTruth)) else None


def prepare(config, overrides: dict | None = None) -> Prepared:
    """Read, validate and resolve a config (ConfigError on any mistake; nothing written)."""
    path = config_path(config)
    overrides = overrides or {}
    return Prepared(path, load(path, overrides), overrides)


def recorded_path(path: Path) -> str:
    """A config's path as the manifest records it: a shipped config as ``experiments/NAME.toml`` (the same in every
    checkout), any other absolute (``slt-relu check`` and ``plot`` read a truth file beside it from any folder)."""
    try:
        return Path(path).resolve().relative_to(EXPERIMENTS_DIR.resolve().parent).as_posix()
    except ValueError:
        return str(Path(path).resolve())


def _set_dtype(dtype: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", dtype == "float64")


# ----------------------------------------------------------------------------------------
# the output folder


def read_manifest(folder: Path) -> dict | None:
    """The manifest of an earlier results folder of this tool in ``folder``, or None."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not (manifest.get("tool") == TOOL or "slt_relu" in manifest.get(
            "versions", {})):
        return None
    return manifest


def is_results_folder(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier results folder of this tool and nothing else: its
    manifest names the tool and lists the files the run wrote, and every file in it is one of
    them.  A manifest without a file list (an early version of the tool) proves nothing about
    the files beside it, so such a folder is never replaced."""
    manifest = read_manifest(folder)
    listed = manifest.get("files") if manifest else None
    if not isinstance(listed, list):
        return False
    for entry in folder.rglob("*"):
        name = entry.relative_to(folder).as_posix()
        if entry.is_symlink():
            return False
        if entry.is_dir():                             # a folder the tool wrote (draws/) holds only listed files
            if not any(f.startswith(name + "/") for f in listed):
                return False
            continue
        if not entry.is_file() or (name not in listed and name not in OWN_FILES):
            return False
    return True


SPECIAL_FILE_SYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))


def check_folder_path(flag: str, folder: str | Path) -> Path:
    """``folder`` as a Path if a folder can be made there: a path the file system accepts (each name at
    most NAME_MAX bytes, the whole at most PATH_MAX), not on a special file system (/proc, /sys, /dev),
    not a file, its nearest existing ancestor a writable folder; ConfigError naming ``flag`` otherwise."""
    if str(folder) == "":
        raise ConfigError(f"{flag}: expected a folder path, got ''")
    folder = Path(folder)
    absolute = Path(os.path.abspath(folder))
    name_max = 255
    try:
        name_max = os.pathconf(absolute.anchor or "/", "PC_NAME_MAX")
    except (OSError, ValueError):
        pass
    long = next((p for p in absolute.parts if len(os.fsencode(p)) > name_max), None)
    if long is not None:
        raise ConfigError(f"{flag} {str(folder)[:80]}...: the name {long[:40]}... is {len(os.fsencode(long))} bytes; "
                          f"expected at most {name_max} (nothing written)")
    if len(os.fsencode(str(absolute))) > 4000:
        raise ConfigError(f"{flag}: the path is {len(os.fsencode(str(absolute)))} bytes; expected at most 4000 "
                          "(nothing written)")
    real = Path(os.path.realpath(absolute))
    if any(real == s or s in real.parents for s in SPECIAL_FILE_SYSTEMS):
        raise ConfigError(f"{flag} {folder}: is on a special file system ({real.parts[1] and '/' + real.parts[1]}); "
                          "expected a folder on a disk (nothing written)")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{flag} {folder}: is a file; expected a folder (nothing written)")
    ancestor = absolute if absolute.exists() else absolute.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{flag} {folder}: {ancestor} is a file; expected a folder path (nothing written)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {folder}: {ancestor} is not writable (nothing written)")
    return folder


def check_output(out: str | Path) -> Path:
    """The results folder ``out`` if writing it destroys nothing; ConfigError otherwise."""
    out = check_folder_path("--out", out)
    if out.is_symlink():
        raise ConfigError(f"--out {out}: is a symbolic link; expected a folder path (nothing written)")
    if out.exists():
        if not out.is_dir():
            raise ConfigError(f"--out {out}: is a file; expected a folder (nothing written)")
        if any(out.iterdir()) and not is_results_folder(out):
            manifest = read_manifest(out)
            if manifest is not None and "files" not in manifest:
                raise ConfigError(f"--out {out}: a results folder of an early slt-relu whose manifest lists no files, "
                                  "so the tool cannot tell its files from yours; expected a new or empty folder or "
                                  "a results folder with a file list: move it away first (nothing written)")
            raise ConfigError(f"--out {out}: holds files that are not an earlier slt-relu results folder; "
                              "expected a new or empty folder or an earlier results folder (nothing written)")
    return out


def _pid_of(path: Path, marker: str) -> int | None:
    tail = path.name.rsplit(marker, 1)[-1]
    return int(tail) if tail.isdigit() else None


def clean_stale(out: Path) -> list[Path]:
    """Remove ``.NAME.partial-PID`` folders of dead processes; restore ``.NAME.old-PID`` when its
    process died between renaming the old folder aside and the new one in (else remove it); remove a
    ``.NAME.lock`` whose process is dead.  Only this tool's own names are touched.  Returns what was
    removed."""
    removed = []
    lock = out.parent / f".{out.name}.lock"
    try:
        pid = int(lock.read_text().strip() or 0)
    except (OSError, ValueError):
        pid = None
    if pid and not alive(pid):                 # (an empty lock is being written: left to _Lock)
        lock.unlink(missing_ok=True)
        removed.append(lock)
    for marker in (".partial-", ".old-"):
        for entry in out.parent.glob(f".{out.name}{marker}*"):
            pid = _pid_of(entry, marker)
            if pid is None or alive(pid) or not entry.is_dir():
                continue
            if marker == ".old-" and not out.exists():
                entry.rename(out)                      # the swap was cut short: keep the old results
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


class _Lock:
    """``.NAME.lock`` holding the pid of the run writing NAME; a stale one (dead pid) is taken over."""

    def __init__(self, out: Path):
        self.path = out.parent / f".{out.name}.lock"

    def __enter__(self):
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and alive(pid) and pid != os.getpid():
                    raise ConfigError(f"--out {self.path.parent / self.path.name[1:-5]}: another run (pid {pid}) "
                                      "is writing this folder") from None
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
            return self
        raise ConfigError(f"--out: cannot lock {self.path}")

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------


class RunContext:
    """What a kind's run gets besides its settings: where to checkpoint, whether to show progress,
    and this process's place among the run's processes (``slt_relu.distributed.Layout``: a kind
    whose run is a sweep passes it to ``run_points``; on every process but 0 it returns None once its
    share of the points is checkpointed)."""

    def __init__(self, checkpoints: Path, progress: bool, seed: int, layout=(0, 1)):
        self.checkpoints, self.progress, self.seed, self.layout = checkpoints, progress, seed, tuple(layout)


def default_output(name: str) -> Path:
    return Path("runs") / name


def run_config(config, out: str | Path | None = None, progress: bool = True, overrides: dict | None = None,
               cache: bool | str | Path = False, keep_checkpoints: bool = False) -> Path:
    """Run a config (a path or a shipped config's name, with dotted-key ``overrides``); returns
    the results folder (default ``runs/<name>``).  cache: use JAX's persistent compilation cache
    (True: :func:`cache_dir_default`; a path: that folder).  keep_checkpoints: leave the sweep's
    checkpoints after the run, so that a rerun with other analysis settings (phase rules, plots)
    re-analyses the saved draws without sampling again.  The config's ``dtype`` holds for the run
    only: JAX's x64 flag is restored afterwards."""
    return run_prepared(lambda: prepare(config, overrides), out, progress, cache, keep_checkpoints)


def run_prepared(prepared, out, progress: bool = True, cache: bool | str | Path = False,
                 keep_checkpoints: bool = False) -> Path | None:
    """:func:`run_config` for a config prepared by ``prepared()`` (a :class:`Prepared`), e.g. from a
    manifest's config; the config's ``dtype`` holds for the run only."""
    import jax

    x64_before = bool(jax.config.read("jax_enable_x64"))
    try:
        prep = prepared()
        if cache is not False:
            enable_compilation_cache(None if cache is True else cache)
        return _run(prep, out, progress, keep_checkpoints)
    finally:
        jax.config.update("jax_enable_x64", x64_before)


def _run(prep: Prepared, out, progress: bool, keep_checkpoints: bool = False) -> Path | None:
    import jax

    from ..distributed import layout

    out = check_output(default_output(prep.name) if out is None else out)
    lay = layout()
    if lay.index:                 # another process of a multi-process run: its share of the points, nothing else
        if prep.kind.sweeps:
            ctx = RunContext(out.parent / f".{out.name}.checkpoints", progress, prep.settings.seed, lay)
            prep.kind.run(prep.resolved, jax.random.PRNGKey(prep.settings.seed), ctx)
        return None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--out {out}: cannot create {out.parent} ({err.strerror})") from None
    with _Lock(out):
        clean_stale(out)
        check_output(out)
        tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        checkpoints = out.parent / f".{out.name}.checkpoints"
        start = time.time()
        try:
            ctx = RunContext(checkpoints, progress, prep.settings.seed, lay)
            output = prep.kind.run(prep.resolved, jax.random.PRNGKey(prep.settings.seed), ctx)
            wall = time.time() - start
            write_output(output, tmp, prep.kind, prep.resolved)
            files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()) + ["manifest.json"]
            write_json(tmp / "manifest.json", {
                "tool": TOOL,
                "name": prep.name,
                "kind": prep.settings.kind,
                "config_path": recorded_path(prep.path),
                "config": prep.raw,
                "overrides": prep.overrides,
                "resolved": prep.settings.model_dump(mode="json"),
                **({"truth": prep.truth} if getattr(prep, "truth", None) is not None else {}),
                "seed": prep.settings.seed,
                "versions": provenance.versions(),
                "jax_devices": [str(d) for d in jax.devices()],
                "processes": lay.count,
                "jax_backend": jax.default_backend(),
                "machine": provenance.machine(),
                "x64": bool(jax.config.read("jax_enable_x64")),
                "git_commit": provenance.git_commit(),
                "command": " ".join(sys.argv),
                "wall_time_s": round(wall, 3),
                "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": files,
            })
            _swap_in(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if not keep_checkpoints:
            shutil.rmtree(checkpoints, ignore_errors=True)
    return out


def _swap_in(tmp: Path, out: Path) -> None:
    """Rename tmp to out; an earlier results folder goes aside first and is deleted last."""
    if out.exists():
        if any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
            return
        out.rmdir()
    try:
        tmp.rename(out)
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise ConfigError(f"--out {out}: appeared during the run (nothing replaced)") from None
        raise


# ----------------------------------------------------------------------------------------
# persistent compilation cache


def cache_dir_default() -> Path:
    """``$SLT_RELU_CACHE_DIR``, else ``$XDG_CACHE_HOME/slt_relu/jax`` (``~/.cache/slt_relu/jax``)."""
    env = os.environ.get("SLT_RELU_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "slt_relu" / "jax"


def enable_compilation_cache(folder: str | Path | None = None) -> Path:
    """JAX's persistent compilation cache in ``folder``: a rerun of a config on this machine
    loads its compiled programs instead of compiling them again.  Every program is cached
    (no minimum compile time or size)."""
    import jax

    folder = check_folder_path("--cache-dir", Path(folder) if folder is not None else cache_dir_default())
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--cache-dir {folder}: cannot create it ({err.strerror})") from None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
