"""Command line.

    slt-relu run CONFIG [--out DIR] [--set KEY=VALUE ...]   run a config (a path or a shipped name)
        [--processes N | --coordinator HOST:PORT --num-processes N --process-id I]
                                                            over several processes (slt_relu.distributed)
    slt-relu list                                           the shipped configs: kind, run time, description
    slt-relu settings [KIND|CONFIG] [--sampler NAME] [--markdown]
                                                            the keys of each kind's schema, with defaults
    slt-relu show PATH                                      a results folder's summary: config, versions,
                                                            machine, headline numbers, warnings, plots
    slt-relu check PATH [--out DIR]                         rerun a results folder's config and list the
                                                            numbers outside their tolerance (slt_relu.workflow.compare)

Exit status 2 with one line on stderr for any mistake in the config or the arguments (nothing is
computed or written); 1 when ``check`` finds numbers outside their tolerance; 130 when interrupted (the checkpoints stay, so a rerun resumes).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys

from .settings import ConfigError, parse
from .config import parse_override
from .kind import kinds

__all__ = ["main", "parser"]

OVERSUBSCRIBE = 4                   # --oversubscribe: at most this many processes per CPU core
PROCESS_MEMORY = 1 << 30            # bytes a JAX process of a run needs at least (its runtime and programs)
MAX_HEARTBEAT = 86_400


def parser() -> argparse.ArgumentParser:
    """The ``slt-relu`` command line's argument parser: its subcommands and flags."""
    out = argparse.ArgumentParser(prog="slt-relu", description="Run slt_relu experiment configs.")
    sub = out.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one experiment config and write a results folder")
    run.add_argument("config", help="a TOML config, or a shipped config's name (see `slt-relu list`)")
    run.add_argument("--out", default=None, help="results folder (default: runs/<name>); an existing one is "
                     "replaced only if it is an earlier results folder of this tool")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key with a TOML value, e.g. --set landscape.resolution=51")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--cache-dir", default=None, help="JAX's persistent compilation cache (default: "
                     "$SLT_RELU_CACHE_DIR or ~/.cache/slt_relu/jax)")
    run.add_argument("--no-cache", action="store_true", help="do not use the persistent compilation cache")
    run.add_argument("--keep-checkpoints", action="store_true", help="keep the sweep's checkpoints (.NAME.checkpoints) "
                     "after the run: a rerun with other analysis settings re-analyses the draws without sampling")
    multi = run.add_argument_group("several processes (slt_relu.distributed; under SLURM or Open MPI nothing to "
                                   "set: srun slt-relu run CONFIG)")
    multi.add_argument("--processes", type=int, default=1, metavar="N", help="start N coordinated processes on "
                       "this machine and share the sweep's points among them (at most its CPU cores)")
    multi.add_argument("--oversubscribe", action="store_true", help="allow --processes above the CPU cores (up to "
                       f"{OVERSUBSCRIBE}x, and {PROCESS_MEMORY >> 30} GiB of available memory per process)")
    multi.add_argument("--coordinator", default=None, metavar="HOST:PORT", help="process 0's address (with "
                       "--num-processes and --process-id) when no scheduler provides it")
    multi.add_argument("--num-processes", type=int, default=None, metavar="N")
    multi.add_argument("--process-id", type=int, default=None, metavar="I")
    multi.add_argument("--heartbeat-timeout", type=int, default=60, metavar="S", help="seconds without a "
                       f"process's heartbeat before the run is stopped (default 60, at most {MAX_HEARTBEAT})")
    sub.add_parser("list", help="list the shipped configs in experiments/")
    show = sub.add_parser("show", help="print a results folder's summary: config, versions, headline numbers, "
                          "warnings, plots")
    show.add_argument("path", help="a results folder (e.g. results/dslt4_pt1_smc or runs/NAME)")
    show.add_argument("--all", action="store_true", help="list every warning (default: a count per kind of "
                      "warning with its first few)")
    plot = sub.add_parser("plot", help="draw a results folder's figures again from its results.nc and its config "
                          "(e.g. after a change to the plotting code)")
    plot.add_argument("path", help="a results folder (e.g. results/known_lambda_suite or runs/NAME)")
    plot.add_argument("--out", default=None, help="where the figures go (default: the results folder, replacing them)")
    check = sub.add_parser("check", help="rerun a results folder's config (its manifest's config and overrides) "
                           "and list the numbers outside their tolerance; exit 1 if any")
    check.add_argument("path", help="a results folder (e.g. results/dslt3_degenerate_node)")
    check.add_argument("--out", default=None, help="where the rerun's folder goes (default: a temporary folder, "
                       "removed afterwards)")
    check.add_argument("--no-progress", action="store_true", help="hide progress bars")
    check.add_argument("--no-cache", action="store_true", help="do not use the persistent compilation cache")
    settings = sub.add_parser("settings", help="print the keys of each kind's settings (types, defaults, meanings), "
                              "or of one kind or config")
    settings.add_argument("kind", nargs="?", default=None, metavar="KIND|CONFIG", help="a kind: its keys with its "
                          "default sampler's; or a config (a TOML file or a shipped config's name): its kind's keys "
                          "with the truth, inputs and sampler it picks (default: every kind, every sampler)")
    settings.add_argument("--sampler", default=None, metavar="NAME", help="the keys of this sampler (of a kind "
                          "with a [sampler] table, e.g. posterior: nuts, hmc, smc)")
    settings.add_argument("--markdown", action="store_true", help="markdown tables (`slt-relu settings --markdown` "
                          "is the site's settings page, docs/settings.md)")
    return out


def main(argv=None) -> int:
    """The ``slt-relu`` command: run ``argv`` (default: the process's arguments); returns the exit status."""
    args = parser().parse_args(argv)
    try:
        return _main(args)
    except BrokenPipeError:                  # the reader went away (slt-relu list | head -1): end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(args) -> int:
    try:
        if args.command == "list":
            return _list()
        if args.command == "settings":
            return _settings(args.kind, args.sampler, args.markdown)
        if args.command == "show":
            from .report import show

            print(show(args.path, every=args.all))
            return 0
        if args.command == "check":
            return _check(args)
        if args.command == "plot":
            from .replot import redraw

            for path in redraw(args.path, args.out):
                print(path)
            return 0
        return _run(args)
    except ConfigError as err:
        print(f"slt-relu: config error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("slt-relu: interrupted; no results folder written (a rerun resumes a sweep)", file=sys.stderr)
        return 130
    except OSError as err:                 # the file system refused (full disk, permissions changed mid-run)
        if isinstance(err, BrokenPipeError):
            raise
        where = f" ({err.filename})" if err.filename else ""
        print(f"slt-relu: error: {err.strerror or err}{where}; no results folder written", file=sys.stderr)
        return 2


def _list() -> int:
    from . import report, runner
    from .config import read_toml

    for path in runner.shipped_configs():
        try:
            data = read_toml(path)
        except ConfigError:
            data = {}
        print(f"{path.stem:36s} {data.get('kind', '?'):21s} {report.expected_runtime(path):>8s}  "
              f"{data.get('description', '')}")
    return 0


def _settings(target: str | None, sampler: str | None, markdown: bool) -> int:
    """Every kind's keys (each choice's alternatives in sections of their own), or the keys one config of a
    kind can use: a kind with its default sampler (or --sampler's), a config with the alternatives it picks."""
    from . import settings_tables as S

    registry = kinds()
    if target is None:
        if sampler is not None:
            raise ConfigError("settings --sampler: expected a kind or a config too, e.g. slt-relu settings posterior "
                              f"--sampler {sampler}")
        print("\n\n".join(_settings_kind(k, S.settings_sections(registry[k].settings), markdown)
                          for k in sorted(registry)))
        return 0
    source = None
    if target in registry:
        kind, choose = target, {u.key: u.default for u in S.choices(registry[target].settings)}
    else:
        kind, choose, source = _settings_config(target, registry)
    schema = registry[kind].settings
    if sampler is not None:
        picks = {u.key: u for u in S.choices(schema)}
        if "sampler" not in picks:
            with_one = ", ".join(k for k in sorted(registry)
                                 if any(u.key == "sampler" for u in S.choices(registry[k].settings)))
            raise ConfigError(f"settings {target} --sampler: kind {kind!r} has no [sampler] table "
                              f"(kinds with one: {with_one})")
        if sampler not in picks["sampler"].tags:
            raise ConfigError(f"settings --sampler: expected one of {', '.join(picks['sampler'].tags)}, "
                              f"got {sampler!r}")
        choose["sampler"] = sampler
    tag_field = {u.key: u.tag_field for u in S.unions(schema)}
    picked = [f'[{key}] {tag_field[key]} = "{tag}"' for key, tag in choose.items()]
    why = (f"picked by {source}" + (" and --sampler" if sampler and source else "") if source else
           "--sampler" if sampler else "the default; --sampler NAME for another")
    print(_settings_kind(kind, [("", S.settings_rows(schema, choose=choose))], markdown, picked, why))
    return 0


def _settings_config(target: str, registry) -> tuple[str, dict, str]:
    """(kind, {union key: tag}, its path) of a config named on the command line."""
    from . import settings_tables as S
    from .config import read_toml
    from .runner import config_path

    try:
        path = config_path(target)
    except ConfigError:
        raise ConfigError(f"settings {target}: expected a kind ({', '.join(sorted(registry))}) or a config (a TOML "
                          "file or a shipped config's name, see slt-relu list)") from None
    data = read_toml(path)
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in registry:
        raise ConfigError(f"{path}: kind: expected one of {', '.join(repr(k) for k in sorted(registry))}, got {kind!r}")
    schema = registry[kind].settings
    try:
        parsed = parse(schema, data)
    except ConfigError:                      # still show its keys: the alternatives its tables name
        parsed = None
    return kind, S.chosen(schema, parsed, data), target


def _settings_kind(kind: str, sections, markdown: bool, picked=(), why: str = "") -> str:
    """A kind's title, description, the alternatives shown (with why) and its (title, rows) sections."""
    from . import settings_tables as S

    code = (lambda text: f"`{text}`") if markdown else (lambda text: text)
    out = [f'## `kind = "{kind}"`' if markdown else f'kind = "{kind}"', kinds()[kind].description]
    if picked:
        out.append("The keys of " + ", ".join(map(code, picked)) + (f" ({why})" if why else "") + ".")
    for title, rows in sections:
        if title:
            name, _, rest = title.partition(" (")
            out.append(("### " if markdown else "") + code(name) + (f" ({rest}" if rest else ""))
        out.append(S.settings_table(None, rows=rows) if markdown else S.settings_text(None, rows=rows))
    return "\n\n".join(out)


def _check(args) -> int:
    import tempfile
    from pathlib import Path

    from .compare import rerun

    with tempfile.TemporaryDirectory() as tmp:
        result = rerun(args.path, Path(args.out) if args.out else Path(tmp) / "rerun", progress=not args.no_progress,
                       cache=not args.no_cache)
    where = ("the machine, code, versions and XLA flags that computed it: bitwise equality expected" if result.same_machine
             else "another machine, code, versions or XLA flags: agreement within the tolerances expected")
    print(f"rerun of {args.path} on {where}")
    stat = (f"{result.statistical} sampler outputs within k = {result.k:.2f} standard errors" if result.statistical
            else "no sampler outputs")
    print(f"{result.compared} numbers compared ({stat}), {result.bitwise_different} not bitwise equal, "
          f"{len(result.differences)} outside their tolerance")
    for d in result.differences:
        print(f"  {d}")
    return 1 if result.differences else 0


def _interrupt(signum, frame):
    """SIGTERM (a scheduler's or the local launcher's stop) as Ctrl-C: the runner removes its
    partial folder and lock on the way out; finished points stay checkpointed."""
    raise KeyboardInterrupt


def _run(args) -> int:
    from .. import distributed
    from . import runner

    overrides = dict(parse_override(item) for item in args.set)
    _check_processes(args)
    if args.processes > 1:
        if args.coordinator is not None:
            raise ConfigError("--processes: expected either --processes (this machine) or --coordinator, not both")
        prep = runner.prepare(args.config, overrides)          # config mistakes before any process starts
        out = runner.check_output(runner.default_output(prep.name) if args.out is None else args.out)
        code = distributed.launch_local(_forwarded(args), args.processes, heartbeat_timeout=args.heartbeat_timeout)
        if code:                       # a process the launcher had to kill (busy in a compiled program) left its
            runner.clean_stale(out)    # partial folder and lock: nothing of the run stays but its checkpoints
        return code
    distributed.watch_launcher()                          # a process launch_local started ends with the launcher
    try:
        lay = distributed.initialize(args.coordinator, args.num_processes, args.process_id, args.heartbeat_timeout)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    cache = False if args.no_cache else (args.cache_dir or True)
    signal.signal(signal.SIGTERM, _interrupt)               # a stopped run cleans up as after Ctrl-C
    try:
        out = runner.run_config(args.config, args.out, not args.no_progress, overrides, cache=cache,
                                keep_checkpoints=args.keep_checkpoints)
    except BaseException as err:
        if lay.count == 1:
            raise
        # one process of several failed: leave at once, without JAX's shutdown barrier (which would wait for
        # the others); the others stop when its heartbeats do
        import traceback

        if isinstance(err, ConfigError):
            print(f"slt-relu: config error: {err}", file=sys.stderr)
        elif not isinstance(err, KeyboardInterrupt):
            traceback.print_exc()
        print(f"slt-relu: process {lay.index} of {lay.count} stopped", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(2 if isinstance(err, ConfigError) else 130 if isinstance(err, KeyboardInterrupt) else 1)
    if out is not None:                                   # process 0 (or a single process) writes and reports
        _summary(out)
    return 0


def _check_processes(args) -> None:
    """--processes within what this machine can run, the other process flags within their ranges: one line
    naming the flag and the bound, before any process starts."""
    from .provenance import available_memory, usable_cores

    cores = usable_cores()
    if args.oversubscribe:
        by_memory = max(1, available_memory() // PROCESS_MEMORY)
        high, why = min(OVERSUBSCRIBE * cores, by_memory), (f"{OVERSUBSCRIBE} per CPU core and "
                                                             f"{PROCESS_MEMORY >> 30} GiB of available memory each")
    else:
        high, why = cores, "this machine's CPU cores; --oversubscribe allows more"
    if not 1 <= args.processes <= high:
        raise ConfigError(f"--processes: expected an integer in [1, {high}] ({why}), got {args.processes}")
    if args.num_processes is not None and args.num_processes < 1:
        raise ConfigError(f"--num-processes: expected a positive integer, got {args.num_processes}")
    if args.process_id is not None and args.process_id < 0:
        raise ConfigError(f"--process-id: expected an integer >= 0, got {args.process_id}")
    if not 1 <= args.heartbeat_timeout <= MAX_HEARTBEAT:
        raise ConfigError(f"--heartbeat-timeout: expected seconds in [1, {MAX_HEARTBEAT}], got {args.heartbeat_timeout}")


def _forwarded(args) -> list[str]:
    """The run's own arguments, for the processes launch_local starts."""
    out = [args.config] + (["--out", args.out] if args.out is not None else [])
    out += sum((["--set", item] for item in args.set), [])
    out += [flag for flag, on in (("--no-progress", args.no_progress), ("--no-cache", args.no_cache),
                                  ("--keep-checkpoints", args.keep_checkpoints)) if on]
    return out + (["--cache-dir", args.cache_dir] if args.cache_dir else [])


def _summary(out) -> None:
    """The run's headline numbers (stdout), its warnings (stderr) and where its folder is."""
    from .report import end_of_run

    headline, warnings = end_of_run(out)
    for line in headline:
        print(line)
    for w in warnings:
        print(f"slt-relu: warning: {w}", file=sys.stderr)
    print(f"results written to {out}")


if __name__ == "__main__":
    sys.exit(main())
