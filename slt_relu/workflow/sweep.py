"""Sweeps: expansion into points, per-point checkpoints, programs of points, resume.

A config's ``[sweep]`` table mirrors its other tables with lists of values
(``truth.t = [1.0, 1.1]``, ``posterior.beta = ["wbic", 1.0]``); the sweep is the grid of all
combinations, in the order the keys appear, the last key varying fastest.  Every point is
validated up front against the kind's schema (a bad value is a config error naming the point).

:func:`run_points` computes the points a kind hands it and checkpoints each one as it finishes:
points that can share one compiled program (equal ``signature``) run together in programs of
``batch`` points, and each program's points are saved atomically (``point-00007.nc``, netCDF with
named dimensions, ``slt_relu.netcdf``) in the checkpoint folder before the next program starts.  A rerun of the same config
finds them (each file carries a fingerprint of everything that determines its numbers) and only
computes the rest, saying ``resuming: k of N points done``.  The same module serves kinds whose
points are not a grid (the learning coefficient's cases).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from .settings import ConfigError
from .config import apply_overrides

__all__ = ["Point", "SweepReport", "alive", "data_indices", "expand", "fingerprint", "flatten_sweep", "load_result",
           "remove_temporary", "run_points", "save_result"]


class Point(NamedTuple):
    """One point: its index in the sweep, its coordinates (dotted key -> value) and its settings."""

    index: int
    values: dict
    settings: object


def flatten_sweep(table: dict, prefix: str = "") -> dict:
    """Nested [sweep] tables -> {dotted key: list of values}."""
    out = {}
    for name, value in table.items():
        key = f"{prefix}.{name}" if prefix else name
        if isinstance(value, dict):
            out.update(flatten_sweep(value, key))
        else:
            out[key] = value
    return out


def expand(raw: dict, sweep: dict, validate: Callable[[dict], object], *, tables: Sequence[str],
           scalars: Sequence[str] = ()) -> list[Point]:
    """The points of ``sweep`` (dotted key -> non-empty list) applied to the raw config ``raw``;
    ``validate(raw point config) -> settings`` (raising ConfigError).  A point may vary the keys
    of the named ``tables`` and the top-level ``scalars``."""
    for key, values in sweep.items():
        head = key.split(".")[0]
        if not (key in scalars or (head in tables and "." in key)):
            names = [f"[{t}]" for t in tables] + list(scalars)
            raise ConfigError(f"sweep.{key}: expected a key of " + ", ".join(names))
        if not (isinstance(values, (list, tuple)) and values):
            raise ConfigError(f"sweep.{key}: expected a non-empty list of values, got {values!r}")
        twice = [v for i, v in enumerate(values) if v in values[:i]]
        if twice:                                      # a sweep axis is a coordinate: each value once
            raise ConfigError(f"sweep.{key}: expected distinct values, got {twice[0]!r} more than once")
    base = {k: v for k, v in raw.items() if k != "sweep"}
    combos = list(itertools.product(*sweep.values())) if sweep else [()]
    points = []
    for index, combo in enumerate(combos):
        values = dict(zip(sweep, combo))
        try:
            settings = validate(apply_overrides(base, values))
        except ConfigError as err:
            where = ", ".join(f"{k} = {v!r}" for k, v in values.items())
            raise ConfigError(f"sweep point {where}: {err}" if values else str(err)) from None
        points.append(Point(index, values, settings))
    return points


def data_indices(sweep: dict, keys: Sequence[str]) -> list[int]:
    """Each point's data index: its position in the grid of the sweep keys that change the data, those equal to
    or starting with one of ``keys`` (e.g. "truth.", "posterior.n").  Points that differ only in other keys share
    it, so they can share their data sets (a sweep over other keys only: all points share index 0)."""
    import numpy as np

    shape = tuple(len(v) for v in sweep.values())
    data_axes = [i for i, k in enumerate(sweep) if any(k == d or k.startswith(d) for d in keys)]
    out = []
    for flat in range(int(np.prod(shape)) if shape else 1):
        idx = np.unravel_index(flat, shape) if shape else ()
        out.append(int(np.ravel_multi_index(tuple(idx[i] for i in data_axes), tuple(shape[i] for i in data_axes)))
                   if data_axes else 0)
    return out


def fingerprint(*parts) -> str:
    """A short digest of JSON-able parts (settings dumps, seeds, versions)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------
# checkpoint files: one netCDF file per point (slt_relu.netcdf)

ID = "__id__"               # the root attribute holding a checkpoint's fingerprint


def save_result(path: Path, ident: str, result: dict, dims: dict | None = None) -> None:
    """Write one point's result (a mapping of arrays and plain values, ``slt_relu.netcdf.to_tree``;
    ``dims``: the dimension names of its arrays) to ``path`` atomically, with its fingerprint."""
    from ..netcdf import to_tree, write_tree

    tree = to_tree(result, dims)
    tree.attrs[ID] = json.dumps(ident)
    write_tree(tree, path)


def load_result(path: Path, ident: str) -> dict | None:
    """A saved result with this fingerprint, or None (missing, another config's, unreadable)."""
    from ..netcdf import from_tree, read_tree

    try:
        tree = read_tree(path)
    except (OSError, ValueError, KeyError):
        return None
    if tree.attrs.get(ID) != json.dumps(ident):
        return None
    return {k: v for k, v in from_tree(tree).items() if k != ID}


def _point_path(folder: Path, index: int) -> Path:
    return folder / f"point-{index:05d}.nc"


def remove_temporary(folder: Path) -> None:
    """Half-written files of killed runs (``NAME.tmp-HOST-PID``, ``slt_relu.netcdf.write_tree``) of this host
    whose process is gone."""
    host = socket.gethostname()
    for f in folder.glob("*.tmp-*"):
        owner, _, pid = f.name.split(".tmp-", 1)[1].rpartition("-")
        if owner == host and pid.isdigit() and alive(int(pid)):
            continue                                   # another process of this run is writing it
        if owner in (host, "") or not pid.isdigit():
            f.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether a process ``pid`` of this host exists (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ----------------------------------------------------------------------------------------


class SweepReport(NamedTuple):
    """results: point index -> result; resumed: indices read from checkpoints; programs: the
    point indices of each program that ran."""

    results: dict
    resumed: list
    programs: list

    def resumed_wall_s(self) -> float:
        """Seconds the resumed points took when they were computed (each program's wall time shared
        among its points): what a resumed run did not spend again."""
        return float(sum(self.results[i]["program_wall_s"] / self.results[i]["program_points"] for i in self.resumed))


def run_points(points: Sequence[Point], run_program: Callable[[list], list], *, ident: Callable[[Point], str],
               signature: Callable[[Point], object] = lambda p: p.index, batch: int = 1,
               checkpoints: Path | None = None, cost: Callable[[Point], float] = lambda p: 1.0,
               progress: bool = True, label: str = "points", layout=(0, 1), poll_s: float = 0.5,
               dims: dict | None = None) -> SweepReport:
    """Compute every point not yet checkpointed, ``batch`` points of equal ``signature`` per
    ``run_program(points) -> [result per point]`` call (results are dicts of arrays, numbers,
    strings, lists; ``dims``: the dimension names of their arrays in the checkpoint files),
    checkpointing each program's points as it finishes.

    layout: (process index, process count) of a multi-process run (``slt_relu.distributed``): the
    programs are formed from all points as one process forms them, program k runs on process
    k mod count, and process 0 then waits for the others' checkpoints and returns every result; the
    other processes return their own."""
    from tqdm.auto import tqdm

    if not (isinstance(batch, int) and batch >= 1):
        raise ValueError(f"batch: expected a positive integer, got {batch!r}")
    index, count = layout
    if count > 1 and checkpoints is None:
        raise ValueError("checkpoints: a run over several processes needs a checkpoint folder they all see")
    ids = {p.index: ident(p) for p in points}
    results, resumed = {}, []
    if checkpoints is not None:
        checkpoints.mkdir(parents=True, exist_ok=True)
        remove_temporary(checkpoints)
        for p in points:
            got = load_result(_point_path(checkpoints, p.index), ids[p.index])
            if got is not None:
                results[p.index] = got
                resumed.append(p.index)
        if resumed and index == 0:
            print(f"resuming: {len(resumed)} of {len(points)} {label} done", file=sys.stderr, flush=True)
    groups: dict = {}
    for p in (points if count > 1 else [p for p in points if p.index not in results]):
        groups.setdefault(signature(p), []).append(p)
    programs = [g[i:i + batch] for g in groups.values() for i in range(0, len(g), batch)]
    programs = [[p for p in prog if p.index not in results] for k, prog in enumerate(programs) if k % count == index]
    programs = [prog for prog in programs if prog]
    pending = [p for p in points if p.index not in results]
    bar = tqdm(total=sum(cost(p) for p in pending), desc=label, disable=not progress or not pending, leave=False)
    for program in programs:
        start = time.time()
        out = run_program(program)
        if len(out) != len(program):
            raise RuntimeError(f"run_program returned {len(out)} results for {len(program)} points")
        for p, res in zip(program, out):
            res = dict(res, program_wall_s=time.time() - start, program_points=len(program))
            if checkpoints is not None:
                save_result(_point_path(checkpoints, p.index), ids[p.index], res, dims)
                res = load_result(_point_path(checkpoints, p.index), ids[p.index])   # same types as a resume
            results[p.index] = res
        bar.update(sum(cost(p) for p in program))
    while index == 0 and len(results) < len(points):     # process 0: the other processes' points
        for p in points:
            if p.index not in results:
                got = load_result(_point_path(checkpoints, p.index), ids[p.index])
                if got is not None:
                    results[p.index] = got
                    bar.update(cost(p))
        if len(results) < len(points):
            time.sleep(poll_s)
    bar.close()
    return SweepReport(results, resumed, [[p.index for p in prog] for prog in programs])
