"""The site's experiment pages (docs/experiments/): one per shipped config, in the table of contents, showing
figures that exist (every figure of its committed run), and headline numbers that the Sphinx extension
docs/_ext/experiment_results.py reads from results/NAME/metrics.json when the site is built."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "experiments"
CONFIGS = sorted(p.stem for p in (ROOT / "experiments").glob("*.toml"))
IMAGE = re.compile(r"```\{figure\}\s+(\S+)|!\[[^\]]*\]\(([^)\s]+)\)")


def images(page: Path) -> list[Path]:
    return [(page.parent / (a or b)).resolve() for a, b in IMAGE.findall(page.read_text())]


def test_every_shipped_config_has_a_page_in_the_table_of_contents():
    index = (PAGES / "index.md").read_text()
    toctree = index.split("```{toctree}")[1].split("```")[0].split()
    assert "{experiment-index}" in index                        # the generated table of every config
    for name in CONFIGS:
        assert (PAGES / f"{name}.md").is_file(), f"docs/experiments/{name}.md is missing"
        assert name in toctree, f"docs/experiments/index.md's toctree lacks {name}"
    pages = {p.stem for p in PAGES.glob("*.md")} - {"index"}
    assert pages == set(CONFIGS)                                # and no page of a config that is gone


@pytest.mark.parametrize("name", CONFIGS)
def test_a_page_shows_its_runs_figures_and_headline(name):
    page = PAGES / f"{name}.md"
    text = page.read_text()
    shown = images(page)
    assert shown, f"{name}: no figure"
    for path in shown:
        assert path.is_file(), f"{page.name}: {path} does not exist"
    assert {p.name for p in shown if p.parent == ROOT / "results" / name} == \
        {p.name for p in (ROOT / "results" / name).glob("*.png")}, f"{name}: a figure of results/{name} is not shown"
    assert re.search(r"```\{experiment-headline\} " + re.escape(name) + r"\n", text)
    assert f"slt-relu run {name}" in text
    assert f"../../experiments/{name}.toml" in text


def test_the_headline_is_read_from_metrics_json():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import experiment_results as X
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    from slt_relu.workflow import report

    metrics = json.loads((ROOT / "results" / "dslt3_degenerate_node" / "metrics.json").read_text())
    ratio = metrics["valley_mass_end_to_middle_ratio"]
    assert ratio == pytest.approx([0.5 + 0.5 ** 0.5] * 2, abs=1e-3)    # DSLT3's 1/2 + 1/sqrt 2
    lines = X.headline("dslt3_degenerate_node")
    assert lines == report.headline("landscape", metrics)             # what `slt-relu show` prints
    assert f"mass across the valley, end / middle: first end {ratio[0]:.4f}, last end {ratio[1]:.4f}" in lines
    assert X.headline("dslt3_degenerate_node", match="valley") == [lines[2]]


def _build(tmp_path, body: str):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'docs' / '_ext')!r})\n"
                                 "extensions = ['myst_parser', 'experiment_results']\n")
    (src / "index.md").write_text("# Test\n\n" + body)
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-E", "-q", "--no-color", "-b", "html", str(src),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=300)


def test_the_directive_renders_the_committed_numbers(tmp_path):
    from slt_relu.workflow import report

    metrics = json.loads((ROOT / "results" / "llc_dslt4_phases" / "metrics.json").read_text())
    known = "2.296 +- 0.053"                                  # PT1's degenerate phase (results/README.md: 2.30 +- 0.05)
    assert known in "\n".join(report.headline("learning_coefficient", metrics))
    run = _build(tmp_path, "```{experiment-headline} llc_dslt4_phases\n```\n\n"
                           "```{experiment-headline} llc_dslt4_phases\n:match: degenerate\n```\n")
    assert run.returncode == 0, run.stderr[-3000:]
    page = (tmp_path / "html" / "index.html").read_text()
    assert page.count(known) == 2 and "results/llc_dslt4_phases/metrics.json" in page
    assert page.count("PT2 v = 1, width 3: - - - (sgld)") == 1        # the :match: block keeps only its lines


def test_a_missing_result_fails_the_build(tmp_path):
    run = _build(tmp_path, "```{experiment-headline} no_such_experiment\n```\n")
    assert run.returncode != 0 and "no_such_experiment" in run.stderr
