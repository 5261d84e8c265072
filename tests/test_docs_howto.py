"""The how-to guides cannot go stale: the code of "Bring your own network", "Draw the figures from Python", "Add an
experiment kind" and "Add a sampler" (docs/howto/) runs here as the pages show it, and every `slt-relu` command line
of the guides parses with the command line's parser."""
import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu.sampling.base
from slt_relu.kinds import KINDS
from slt_relu.netcdf import read_tree
from slt_relu.workflow.settings import ConfigError
from slt_relu.workflow import runner
from slt_relu.workflow.cli import parser as cli_parser

HOWTO = Path(__file__).resolve().parent.parent / "docs" / "howto"


def blocks(page: str, lang: str) -> list[str]:
    """The fenced code blocks of a how-to page whose info string is ``lang``, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```$", (HOWTO / page).read_text(), re.S | re.M)


# ----------------------------------------------------------------------------------------
# Add an experiment kind


@pytest.fixture
def orbit_module(tmp_path):
    """The page's module (its first python block) as orbit_kind.py, imported: the kind is registered while the test
    runs, and removed afterwards."""
    source = blocks("add_a_kind.md", "python")[0]
    (tmp_path / "orbit_kind.py").write_text(source)
    module = types.ModuleType("orbit_kind")
    module.__file__ = str(tmp_path / "orbit_kind.py")
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        yield module
    finally:
        KINDS.pop("scaling_orbit", None)


def test_the_kind_of_the_guide_runs_from_its_toml(orbit_module, tmp_path, monkeypatch):
    assert KINDS["scaling_orbit"] is orbit_module.KIND
    (config,) = blocks("add_a_kind.md", "toml")
    (tmp_path / "orbit.toml").write_text(config)
    monkeypatch.chdir(tmp_path)                       # the page's paths are relative: orbit.toml, runs/orbit
    namespace = {}
    exec(blocks("add_a_kind.md", "python")[1], namespace)          # runner.run_config("orbit.toml", "runs/orbit")
    out = namespace["out"]
    metrics = json.loads((out / "metrics.json").read_text())
    # PT1's truth (d = 2, n_in = 2: D = 9) rescaled along one node: K = 0 and rank D - d = 7 all along, by hand
    assert metrics["fisher_rank"] == [7] * 7 and metrics["max_loss"] < 1e-25
    assert (out / "orbit.png").is_file() and read_tree(out / "results.nc")["loss"].dims == ("scale",)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "scaling_orbit" and manifest["resolved"]["orbit"]["node"] == 1
    x64 = jax.config.read("jax_enable_x64")
    try:                                              # prepare sets the config's dtype: restore it
        with pytest.raises(ConfigError, match=r"orbit.node: expected a node of the truth \(0 .. 1\), got 5"):
            runner.prepare(tmp_path / "orbit.toml", {"orbit.node": 5})
    finally:
        jax.config.update("jax_enable_x64", x64)


def test_the_kind_of_the_guide_runs_from_the_command_line(tmp_path):
    """`python orbit_kind.py run orbit.toml --out runs/orbit`, as the page says."""
    (tmp_path / "orbit_kind.py").write_text(blocks("add_a_kind.md", "python")[0])
    (tmp_path / "orbit.toml").write_text(blocks("add_a_kind.md", "toml")[0])
    run = subprocess.run([sys.executable, "orbit_kind.py", "run", "orbit.toml", "--out", "runs/orbit", "--no-progress",
                          "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Fisher rank [7]" in run.stdout and "results written to runs/orbit" in run.stdout
    assert (tmp_path / "runs" / "orbit" / "orbit.png").is_file()


# ----------------------------------------------------------------------------------------
# Add a sampler


def test_the_sampler_of_the_guide_is_dispatched_to_and_samples_its_targets():
    namespace = {}
    code = blocks("add_a_sampler.md", "python")
    assert len(code) == 4
    try:
        for block in code[:3]:                        # the sampler, the Gaussians, Example 3.4
            exec(block, namespace)
        RWMSettings = namespace["RWMSettings"]
        assert slt_relu.sampling.base._SAMPLERS[RWMSettings].run is namespace["run_rwm"]
        assert slt_relu.sampling.base._SAMPLERS[RWMSettings].info is namespace["RWMInfo"]
        draws = namespace["draws"]
        assert draws.z.shape == (4, 4000, 2) and draws.potential_energy.shape == (4, 4000)
        ess = np.array([namespace["S"].ess_bulk(draws.z[..., k]) for k in range(2)])
        se = 0.5 / np.sqrt(ess)                       # each coordinate N(mu_k, 0.5^2)
        np.testing.assert_array_less(np.abs(draws.z.mean(axis=(0, 1)) - [1.0, -2.0]), 5 * se)
        np.testing.assert_allclose(draws.z.std(axis=(0, 1)), 0.5, rtol=0.1)
        np.testing.assert_allclose(draws.potential_energy[:, 0],
                                   0.5 * np.sum(((draws.z[:, 0] - [1.0, -2.0]) / 0.5) ** 2, -1), rtol=1e-9)
        assert isinstance(draws.info, namespace["RWMInfo"])
        assert np.all((draws.info.accept_prob > 0.3) & (draws.info.accept_prob < 0.9))
        w = namespace["w"]                            # Example 3.4 at n beta = 1000: near W0 = {w1 + w2 = 1}
        assert w.shape == (4, 2000, 2) and float((w.sum(-1) - 1).std()) < 0.1
        assert abs(float(w.sum(-1).mean()) - 1.0) < 0.1 and float(w.min()) > -0.3
        exec(code[3], namespace)                      # the page's own clean-up
        assert RWMSettings not in slt_relu.sampling.base._SAMPLERS
        with pytest.raises(TypeError, match="registered sampler .*got RWMSettings"):
            slt_relu.sampling.sample(jax.random.split(jax.random.PRNGKey(0), 1), namespace["gaussian"],
                                     jnp.zeros((1, 2)), (jnp.zeros((1, 2)), jnp.ones(1)), RWMSettings())
    finally:
        if "RWMSettings" in namespace:
            slt_relu.sampling.base._SAMPLERS.pop(namespace["RWMSettings"], None)


# ----------------------------------------------------------------------------------------
# command lines


def command_lines(text: str) -> list[tuple[list[str], bool]]:
    """(the argument list after `slt-relu`, whether it is a whole command line) for every mention in a page: every
    line of its bash blocks and every `$ ` line of its text blocks (whole command lines, cut at a shell operator),
    and every inline code span (a mention such as `slt-relu show`: only its subcommand counts).  The guide's
    `python orbit_kind.py ...` is the same command line with one more kind."""
    lines = []
    for lang, body in re.findall(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```$", text, re.S | re.M):   # indented in a list too
        body = body.replace("\\\n", " ")
        if lang == "bash":
            lines += [(line.strip(), True) for line in body.splitlines()]
        elif lang == "text":
            lines += [(line[2:], True) for line in body.splitlines() if line.startswith("$ ")]
    prose = re.sub(r"^[ \t]*```.*?^[ \t]*```$", "", text, flags=re.S | re.M)
    lines += [(span.replace("\n", " "), False) for span in re.findall(r"`([^`]+)`", prose)]
    out = []
    for line, whole in lines:
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        starts = [i for i, w in enumerate(words) if w == "slt-relu" or w.endswith("/slt-relu") or w == "orbit_kind.py"]
        if not starts:
            continue
        argv = []
        for w in words[starts[0] + 1:]:
            if w in ("&", "&&", "|", ";", "2>&1") or w.startswith(">"):
                break
            argv.append(w)
        if argv or whole:                             # `slt-relu` alone names the tool, not a command
            out.append((argv, whole))
    return out


def verdict(parser, subcommands, argv, whole) -> str | None:
    """None if the command line parses (a mention: if its subcommand exists), else why not."""
    if not argv or argv[0] not in subcommands:
        return f"no subcommand {argv[0] if argv else ''!r}; expected one of {sorted(subcommands)}"
    if not whole:
        return None
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parser.parse_args(argv)
        except SystemExit:
            return err.getvalue().strip()
    return None


def test_every_command_line_of_the_guides_parses():
    """Every `slt-relu SUBCOMMAND ...` of the how-to pages names a real subcommand, and every command line in their
    code blocks parses with the command line's parser (argparse exits on an unknown flag or a missing argument)."""
    parser = cli_parser()
    subcommands = set(next(a for a in parser._actions if a.dest == "command").choices)
    found = []
    for page in sorted(HOWTO.glob("*.md")):
        for argv, whole in command_lines(page.read_text()):
            found.append((argv[:1], whole))
            why = verdict(parser, subcommands, argv, whole)
            assert why is None, f"{page.name}: slt-relu {' '.join(argv)}: {why}"
    whole = {a[0] for a, w in found if w and a}
    assert sum(w for _, w in found) > 30 and {"run", "settings", "show", "check"} <= whole


def test_the_command_line_check_finds_a_stale_command():
    text = ("```bash\nslt-relu run a.toml --set x=1 > log  # fine\nslt-relu run a.toml --no-such-flag\n```\n"
            "`slt-relu` has `slt-relu show`, not `slt-relu lst`\n")
    parser = cli_parser()
    subcommands = set(next(a for a in parser._actions if a.dest == "command").choices)
    assert [verdict(parser, subcommands, argv, whole) is None for argv, whole in command_lines(text)] == \
        [True, False, True, False]


# ----------------------------------------------------------------------------------------
# Bring your own network


def test_the_own_network_guide_runs_and_says_what_it_prints():
    """The page's code, block after block in one namespace: the model three ways, its posterior by NUTS and SMC,
    lambda, and the ranks the page states (exact: the Fisher rank D - d = 10 at generic weights, a hand count;
    the Hessian of L_n off its minimum full); the sampler numbers it quotes within their Monte Carlo errors."""
    namespace = {}
    for block in blocks("your_own_network.md", "python"):
        exec(block, namespace)
    model, params, x, sigma = namespace["model"], namespace["params"], namespace["x"], namespace["sigma"]
    assert model.num_params == namespace["eqx_model"].num_params == namespace["flax_model"].num_params == 13
    assert model.coordinate_names()[:3] == ["b1[0]", "b1[1]", "b1[2]"]
    S = namespace["S"]
    assert int(S.fisher_rank(params, x, sigma, model=model)) == 10
    assert S.hessian_rank(namespace["loss"], params, (x, namespace["y"])) == 13
    nuts, smc, est = namespace["nuts"], namespace["smc"], namespace["est"]
    assert nuts.params["w1"].shape == (4, 300, 3, 2)
    se_z = smc.log_evidence.std(ddof=1) / np.sqrt(len(smc.log_evidence))
    assert abs(smc.log_evidence.mean() - (-71.7)) < 5 * se_z + 0.05           # the page's -71.7 (rounded)
    assert abs(float(nuts.loss.mean()) - 0.73) < 0.02 and abs(est.lambda_ - 1.9) < 5 * est.se + 0.05


def test_the_own_network_llc_section_runs_and_its_numbers_hold():
    """The learning-coefficient guide's section on a network of one's own: its python block runs as shown; the
    restricted (b block) and whole estimates meet the blocks' exact localized estimands (quadrature) within 4
    standard errors and 5 %, the curve has one estimate per checkpoint, and the chooser says why."""
    from slt_relu.posterior.llc import normal_crossing_expectation

    page = (HOWTO / "learning_coefficient.md").read_text()
    section = page.split("## Your own network", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(block, namespace)
    assert out.getvalue().count("\n") == 4                                  # the four reasons
    s, est_b, est = namespace["settings"], namespace["est_b"], namespace["est"]
    want_b = normal_crossing_expectation([1, 2], 1000.0, s.localization)
    want = want_b + normal_crossing_expectation([1], 1000.0, s.localization)
    for e, w in ((est_b, want_b), (est, want)):
        assert abs(e.lambda_ - w) <= 4 * e.se + 0.05 * w, (e.lambda_, e.se, w)
    assert namespace["curve"].estimate.shape == (3,)


# ----------------------------------------------------------------------------------------
# Draw the figures from Python


def test_the_plotting_guide_draws_every_figure_of_the_command_line(tmp_path, monkeypatch):
    """The page's code, block after block in one namespace, in a temporary folder that holds the checkout's
    results/ (the page reads committed results folders by their paths from a checkout's root), with matplotlib's
    Agg backend: every figure function of slt_relu.plots that a kind draws is called, each call returns a Figure,
    the blocks' last ``fig`` is one, and the files the page writes are there."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    import slt_relu.plots as plots

    (tmp_path / "results").symlink_to(HOWTO.parent.parent / "results")
    monkeypatch.chdir(tmp_path)
    drawn = {}
    for name in plots.__all__:
        if name.endswith("_figure") and name != "save_figure":
            real = getattr(plots, name)
            monkeypatch.setattr(plots, name, lambda *a, _real=real, _name=name, **k: drawn.setdefault(_name, []).append(
                _real(*a, **k)) or drawn[_name][-1])
    namespace = {}
    code = blocks("plot.md", "python")
    x64 = jax.config.read("jax_enable_x64")
    try:
        for block in code:
            namespace.pop("fig", None)
            exec(block, namespace)
            if "fig = " in block:
                assert isinstance(namespace["fig"], Figure), block[:200]
    finally:
        jax.config.update("jax_enable_x64", x64)
        plt.close("all")
    figures = {n for n in plots.__all__ if n.endswith("_figure")} - {"save_figure", "susceptibility_figure"}
    assert set(drawn) == figures, f"not drawn on the page: {sorted(figures - set(drawn))}"
    assert all(isinstance(f, Figure) for calls in drawn.values() for f in calls)
    assert drawn["spectrum_figure"][0] is namespace["left"].figure                # drawn into the page's axes
    assert (tmp_path / "fisher_mine.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (tmp_path / "fisher_figures").iterdir()) == ["rank_vs_bound.png", "spectrum.png"]


# ----------------------------------------------------------------------------------------
# Write a config


def test_the_validation_errors_of_the_config_guide_are_what_the_tool_prints(tmp_path, monkeypatch, capsys):
    """Every `$ slt-relu run valley.toml ...` of the page's validation errors, run on the page's valley.toml: exit
    status 2, the line the page shows under it (so a new kind or key cannot leave the page stale), nothing written."""
    from slt_relu.workflow.cli import main

    page = (HOWTO / "write_a_config.md").read_text()
    (tmp_path / "valley.toml").write_text(blocks("write_a_config.md", "toml")[0])
    section = page.split("## Validation errors", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"^\$ slt-relu (run valley\.toml .*)\n(slt-relu: config error: .*)$", section, re.M)
    assert len(shown) >= 5, shown
    monkeypatch.chdir(tmp_path)
    for command, line in shown:
        assert main(shlex.split(command)) == 2, command
        captured = capsys.readouterr()
        assert captured.err.strip() == line, (command, captured.err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["valley.toml"]
