"""Command line: ``slt-relu run CONFIG.toml [--out DIR]`` and ``slt-relu list``."""
from __future__ import annotations

import argparse
import sys
import tomllib

from .config import ConfigError, parse_override


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="slt-relu", description="Run slt_relu experiment configs.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one experiment config and write a results folder")
    run.add_argument("config", help="path to a TOML config (see `slt-relu list`)")
    run.add_argument("--out", default=None, help="results folder (default: results/<name>)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key with a TOML value, e.g. --set landscape.resolution=51")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    sub.add_parser("list", help="list the shipped configs in experiments/")
    args = parser.parse_args(argv)

    from . import runner

    if args.command == "list":
        for path in runner.shipped_configs():
            try:
                data = tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError:
                data = {}
            print(f"{path.name:40s} {data.get('kind', '?'):12s} {data.get('description', '')}")
        return 0
    try:
        overrides = dict(parse_override(item) for item in args.set)
        out = runner.run_config(args.config, args.out, progress=not args.no_progress, overrides=overrides)
    except ConfigError as err:
        print(f"slt-relu: config error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("slt-relu: interrupted; no results folder written", file=sys.stderr)
        return 130
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
