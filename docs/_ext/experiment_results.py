"""Sphinx extension of the site: the shipped experiments' pages read their numbers from the committed
results at build time, so a page never quotes a stale headline.

    ```{experiment-headline} dslt4_pt1_smc
    ```
        the headline numbers of results/dslt4_pt1_smc/ (its metrics.json, by its kind's headline function:
        the same lines ``slt-relu show results/dslt4_pt1_smc`` prints), as a list, one line to an item (text
        that wraps at the column's width, where a code block of lines up to 300 characters would scroll),
        after a line saying when, where and how long it ran; ``:match: REGEX`` keeps only the lines matching
        REGEX (a page's highlight; without the provenance line).

    ```{experiment-index}
    ```
        a table of every shipped config (experiments/*.toml): its page, kind, the committed run's wall time
        and its description (what ``slt-relu list`` prints).  A config without a page is a broken
        reference, so the build (-W) fails until it has one.

Images of a page come straight from results/NAME/*.png (``../../results/NAME/x.png``): Sphinx copies
images outside the source folder into _images like any other.  A rebuild follows metrics.json and
manifest.json (``env.note_dependency``).
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]          # the checkout: docs/_ext/ -> docs/ -> root
RESULTS = ROOT / "results"
EXPERIMENTS = ROOT / "experiments"
PAGES = "experiments"                               # the pages' folder in docs/: PAGES/NAME.md per config


def headline(name: str, match: str | None = None, results: Path = RESULTS) -> list[str]:
    """The headline lines of results/NAME (``slt-relu show``'s), only those matching ``match`` if given;
    ConfigError when the folder or its numbers are missing."""
    from slt_relu.workflow.settings import ConfigError
    from slt_relu.workflow import report

    manifest, metrics = report.read_folder(results / name)
    lines = report.headline(manifest.get("kind"), metrics)
    if not lines or lines[0].startswith("(headline numbers not available"):
        raise ConfigError(f"results/{name}: no headline numbers for its kind {manifest.get('kind')!r}")
    if match is not None:
        lines = [line for line in lines if re.search(match, line)]
        if not lines:
            raise ConfigError(f"results/{name}: no headline line matches {match!r}")
    return lines


def provenance(name: str, results: Path = RESULTS) -> str:
    """When, where and how long results/NAME ran: 'ran 2026-11-25 in 1762 s on cpu:0 (git eb225bb)'."""
    from slt_relu.workflow import report

    manifest, metrics = report.read_folder(results / name)
    seconds = float(manifest.get("wall_time_s") or 0.0) + float(metrics.get("resumed_wall_s") or 0.0)
    devices = ", ".join(manifest.get("jax_devices") or []) or "?"
    commit = (manifest.get("git_commit") or "?")[:7]
    day = str(manifest.get("finished_utc", "?"))[:10]
    return f"ran {day} in {seconds:,.0f} s on {devices} (git {commit})"


class ExperimentHeadline(SphinxDirective):
    """The headline numbers of a committed result, read from results/NAME/metrics.json at build time."""

    required_arguments = 1
    option_spec = {"match": directives.unchanged_required}

    def run(self):
        from slt_relu.workflow.settings import ConfigError

        name = self.arguments[0]
        for part in ("manifest.json", "metrics.json"):
            self.env.note_dependency(str(RESULTS / name / part))
        match = self.options.get("match")
        try:
            lines = headline(name, match)
            ran = provenance(name)
        except ConfigError as err:
            raise self.error(f"experiment-headline: {err}") from None
        block = nodes.bullet_list(classes=["experiment-headline"])
        for line in lines:
            block += nodes.list_item("", nodes.paragraph(line, line))
        self.set_source_info(block)
        if match is not None:
            return [block]
        para = nodes.paragraph()
        para += [nodes.Text("From "), nodes.literal(text=f"results/{name}/metrics.json"),
                 nodes.Text(f", {ran}: the headline numbers "),
                 nodes.literal(text=f"slt-relu show results/{name}"), nodes.Text(" prints.")]
        return [para, block]


class ExperimentIndex(SphinxDirective):
    """A table of every shipped config: page, kind, wall time of its committed run, description."""

    def run(self):
        from slt_relu.workflow import report
        from slt_relu.workflow.config import read_toml

        rows = ["| config | kind | run time | what it computes |", "|---|---|---|---|"]
        for path in sorted(EXPERIMENTS.glob("*.toml")):
            self.env.note_dependency(str(path))
            self.env.note_dependency(str(RESULTS / path.stem / "manifest.json"))
            data = read_toml(path)
            description = str(data.get("description", "")).replace("|", "\\|")
            rows.append(f"| {{doc}}`{path.stem} <{path.stem}>` | {data.get('kind', '?')} | "
                        f"{report.expected_runtime(path)} | {description} |")
        return self.parse_text_to_nodes("\n".join(rows))


def setup(app):
    app.add_directive("experiment-headline", ExperimentHeadline)
    app.add_directive("experiment-index", ExperimentIndex)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
