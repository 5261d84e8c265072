"""One config across many processes and hosts: JAX's multi-controller runtime (``jax.distributed``).

Every process runs the same command.  They find each other through ``jax.distributed.initialize``:

* under SLURM (``srun slt-relu run CONFIG``) or Open MPI (``mpirun``), from the scheduler's
  environment (JAX's auto-detection);
* anywhere else with ``--coordinator HOST:PORT --num-processes N --process-id I``;
* on one machine with ``slt-relu run CONFIG --processes N``: :func:`launch_local` starts N
  coordinated processes on 127.0.0.1 (each with its own CPU devices) and waits for them.

How the work is spread (``slt_relu.workflow.sweep.run_points``): a sweep's points are grouped into programs
exactly as in a single process (points that share a compiled program, ``points_per_program`` of
them), and program k runs on process k mod N, its chains vmapped and sharded over that process's
own devices (``jax.local_devices()``).  Every point checkpoints into the shared checkpoint folder
as it finishes; process 0 runs its share, waits for the others' points, then analyses and writes the
results folder (atomically, as a single process does); the other processes write nothing else.
A point's numbers depend on its keys and its program only, never on which process ran it, so a
sweep run by 1 and by N processes gives the same metrics, bitwise when the programs' per-device
batches are equal (tests/test_distributed.py).  A rerun resumes from the checkpoints with any
number of processes.

A process that dies stops the run: JAX's coordination service notices its missing heartbeats within
``heartbeat_timeout`` seconds and terminates the others, and :func:`launch_local` stops the rest at
once with a one-line message; no results folder is written, the finished points stay checkpointed.
The checkpoint folder must be on a file system every process sees (on a cluster, a shared one).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import NamedTuple

__all__ = ["Layout", "free_port", "initialize", "launch_local", "layout", "watch_launcher"]

SCHEDULER_VARIABLES = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")
LAUNCHER_VARIABLE = "SLT_RELU_LAUNCHER_PID"        # set by launch_local for the processes it starts


class Layout(NamedTuple):
    """This process's place among the processes of a run."""

    index: int = 0
    count: int = 1


_LAYOUT = Layout()


def layout() -> Layout:
    """(process index, process count) of this run: (0, 1) unless :func:`initialize` joined a cluster."""
    return _LAYOUT


def _scheduler_processes() -> int:
    for name in SCHEDULER_VARIABLES:
        try:
            return int(os.environ.get(name, "1"))
        except ValueError:
            continue
    return 1


def initialize(coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None,
               heartbeat_timeout: int = 60) -> Layout:
    """Join the run's processes through ``jax.distributed.initialize`` (before any JAX computation):
    with the explicit coordinator, count and index, or by JAX's auto-detection under SLURM or Open MPI
    when the scheduler started more than one task; otherwise a single process, nothing to join.
    Returns this process's :class:`Layout`."""
    global _LAYOUT
    explicit = [coordinator, num_processes, process_id]
    if any(v is not None for v in explicit) and not all(v is not None for v in explicit):
        raise ValueError("--coordinator, --num-processes, --process-id: expected all three or none")
    if coordinator is None and _scheduler_processes() <= 1:
        _LAYOUT = Layout()
        return _LAYOUT
    if num_processes is not None and not (0 <= process_id < num_processes):
        raise ValueError(f"--process-id: expected 0 <= id < {num_processes}, got {process_id}")
    import jax

    # a process that finished its share waits at exit (JAX's shutdown barrier) until process 0 is done
    kwargs = dict(heartbeat_timeout_seconds=int(heartbeat_timeout), initialization_timeout=max(60, heartbeat_timeout),
                  shutdown_timeout_seconds=7 * 24 * 3600)
    if coordinator is not None:
        jax.distributed.initialize(coordinator, int(num_processes), int(process_id), **kwargs)
    else:
        jax.distributed.initialize(**kwargs)
    _LAYOUT = Layout(jax.process_index(), jax.process_count())
    return _LAYOUT


def watch_launcher(grace: float = 10.0) -> None:
    """In a process that :func:`launch_local` started: end it when the launcher is gone, however the
    launcher ended (kill -9 included), so no worker outlives its run.  A daemon thread polls the parent
    process; once the launcher is no longer the parent it sends SIGTERM to this process (the Ctrl-C
    cleanup path) and exits hard ``grace`` seconds later if that did not end it (the main thread may be
    inside a long compiled call).  Does nothing in a process the launcher did not start."""
    try:
        launcher = int(os.environ.get(LAUNCHER_VARIABLE, ""))
    except ValueError:
        return

    def watch():
        while os.getppid() == launcher:
            time.sleep(0.25)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os._exit(1)

    threading.Thread(target=watch, name="slt-relu-launcher-watch", daemon=True).start()


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(args: list[str], processes: int, *, heartbeat_timeout: int = 60) -> int:
    """Run ``slt-relu run ARGS`` as ``processes`` coordinated processes on this machine (127.0.0.1)
    and wait for them.  If one fails, the others are stopped at once and a one-line message says
    which; returns 0 when all succeed, else the first failure's exit status (1 for a signal).  The
    processes end when the launcher does, however it ends (:func:`watch_launcher`)."""
    port = free_port()
    base = [sys.executable, "-m", "slt_relu.workflow.cli", "run", *args, "--coordinator", f"127.0.0.1:{port}",
            "--num-processes", str(processes), "--heartbeat-timeout", str(heartbeat_timeout)]
    children = []
    env = dict(os.environ, **{LAUNCHER_VARIABLE: str(os.getpid())})
    for i in range(processes):
        quiet = ["--no-progress"] if i and "--no-progress" not in args else []
        children.append(subprocess.Popen(base + ["--process-id", str(i)] + quiet, env=env,
                                         stdout=None if i == 0 else subprocess.DEVNULL))
    failed = None
    try:
        while failed is None and any(c.poll() is None for c in children):
            for i, c in enumerate(children):
                if c.poll() not in (None, 0):
                    failed = (i, c.returncode)
                    break
            time.sleep(0.2)
        if failed is None:
            failed = next(((i, c.returncode) for i, c in enumerate(children) if c.returncode), None)
    except KeyboardInterrupt:
        failed = (-1, 130)
    finally:
        for c in children:
            if c.poll() is None:
                c.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        for c in children:
            try:
                c.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
    if failed is None:
        return 0
    i, code = failed
    if i >= 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        print(f"slt-relu: process {i} of {processes} {how}; the run stopped (no results folder written; finished "
              "points stay checkpointed, so a rerun resumes)", file=sys.stderr)
    return code if code > 0 else 1
