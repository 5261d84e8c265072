"""The public namespace: ``slt_relu.__all__`` is the curated list, docs/design.md's public names are in
it, and every public callable has a docstring with the sections Sphinx's napoleon renders (Google
style): ``Args:`` (or ``Attributes:`` for a class) naming every parameter of its signature, and
``Returns:`` for a function that returns something."""
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import slt_relu

ROOT = Path(__file__).resolve().parent.parent

# the curated namespace, in alphabetical order (slt_relu/__init__.py groups it by topic)
CURATED = sorted([
    "are_equivalent", "classify_phase", "count_linear_regions", "Draws", "empirical_loss", "ess_bulk",
    "estimate_llc", "choose_llc_settings", "llc_at_checkpoints", "fisher_information", "fit_learning_coefficient", "known_lambda", "smc_free_energy_curve", "mcmc_tempered_loss_curve",
    "linear_gibbs_curve", "fisher_rank", "fisher_spectrum", "forward", "from_flat",
    "functional_dimension", "Gaussian", "grid_posterior", "GridPosterior", "HMCSettings", "init_mlp", "init_params",
    "load_draws", "make_params", "MLP", "mlp_forward", "null_accounting", "NullAccounting", "num_params",
    "NUTSSettings", "permute", "phase_masses", "population_loss", "PosteriorSamples", "Prior", "reduce", "rescale",
    "Restriction", "reverse_orientation", "rhat", "sample", "sample_dataset", "sample_posterior", "save_draws",
    "scaling_generators", "SGLDSettings", "smc_posterior", "SMCPosterior", "SMCSettings", "to_arviz", "to_flat",
    "truths", "TwoLayer", "UniformBox", "per_sample_losses", "bayesian_influence", "susceptibility", "tms",
    "models", "Model", "GaussianLoss", "hessian_spectrum", "hessian_rank", "TemperedTarget", "tempered_target",
    "LLCSettings", "LambdaEstimate", "TemperedCurve", "minimize_loss", "llc_two_layer", "draw_datasets", "radius_rule", "coordinate_slice",
    "PhaseAssignment",
    "NUTSInfo", "HMCInfo", "SGLDInfo", "SMCInfo",
], key=str.lower)


SECTIONS = ("Args", "Arguments", "Attributes", "Returns", "Yields", "Raises", "References", "Examples", "Example",
            "Note", "Notes", "See Also", "Warning", "Warnings")


def test_all_is_the_curated_list():
    assert sorted(slt_relu.__all__, key=str.lower) == CURATED
    assert len(set(slt_relu.__all__)) == len(slt_relu.__all__)
    assert 40 <= len(CURATED) <= 90


def test_every_public_name_exists():
    missing = [name for name in slt_relu.__all__ if not hasattr(slt_relu, name)]
    assert not missing


def _design_names() -> set[str]:
    """The names of docs/design.md's "Public API" block: ``slt_relu.NAME`` and the types it names as a
    default or a result (``prior=Prior()``, ``-> SMCPosterior(...)``)."""
    text = (ROOT / "docs" / "design.md").read_text()
    block = re.search(r"## Public API.*?```\n(.*?)```", text, re.S).group(1)
    return set(re.findall(r"slt_relu\.(\w+)", block)) | set(re.findall(r"(?:=|-> )([A-Z]\w*)\(", block))


def test_design_public_names_are_in_all():
    names = _design_names()
    assert {"TwoLayer", "forward", "smc_posterior", "Prior", "SMCSettings", "SMCPosterior", "truths"} <= names
    assert len(names) >= 16
    assert names <= set(slt_relu.__all__), names - set(slt_relu.__all__)


def test_internals_stay_in_their_modules():
    """Names outside the curated list are importable from their module, not from the package."""
    from slt_relu.posterior.beta_sweep import wbic
    from slt_relu.regions import kmeans
    from slt_relu.sampling import pad_chains, run_sharded

    for name in ("kmeans", "pad_chains", "run_sharded", "chain_mesh", "wbic"):
        assert not hasattr(slt_relu, name), name
    assert callable(kmeans) and callable(pad_chains) and callable(run_sharded) and callable(wbic)
    assert slt_relu.sampling.pad_chains is pad_chains and slt_relu.posterior.grid_posterior is slt_relu.grid_posterior


def test_plots_load_on_first_use():
    """``import slt_relu`` does not import matplotlib; ``slt_relu.plots`` does, on first use."""
    code = ("import sys, slt_relu; assert 'matplotlib' not in sys.modules; "
            "assert callable(slt_relu.plots.save_figure); assert 'matplotlib' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ----------------------------------------------------------------------------------------
# docstrings


def sections(doc: str) -> dict[str, list[str]]:
    """The Google-style sections of a (cleaned) docstring: header -> its lines (indentation removed)."""
    out, current = {}, None
    for line in doc.splitlines():
        header = re.fullmatch(r"([A-Z][\w ]*):\s*", line)
        if header and header.group(1) in SECTIONS:
            current = out.setdefault(header.group(1), [])
        elif line.strip() and not line[0].isspace():
            current = None                                     # back to the description
        elif current is not None and line.strip():
            current.append(line[4:] if line.startswith("    ") else line.lstrip())
    return out


def entry_names(lines: list[str]) -> list[str]:
    """The names an Args / Attributes section documents: ``name:`` or ``name (type):`` at its indentation."""
    return [m.group(1) for line in lines if (m := re.match(r"(\w+)(?: \([^)]*\))?:", line))]


def documented_parameters(obj) -> list[str]:
    """The parameters a docstring must name: the signature's, without self / cls and *args / **kwargs."""
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in inspect.signature(obj).parameters.values()
            if p.name not in ("self", "cls") and p.kind not in kinds]


def docstring_problems(obj) -> list[str]:
    """What a public callable's docstring lacks (empty: nothing)."""
    doc = inspect.getdoc(obj)
    if not doc:
        return ["no docstring"]
    found = sections(doc)
    problems = []
    if not doc.splitlines()[0].strip() or doc.splitlines()[0].rstrip().endswith(":"):
        problems.append("no summary line")
    named = entry_names(found.get("Args", []) + found.get("Arguments", []))
    if inspect.isclass(obj):
        named += entry_names(found.get("Attributes", []))
    for name in documented_parameters(obj):
        if name not in named:
            where = "Args/Attributes" if inspect.isclass(obj) else "Args"
            problems.append(f"parameter {name!r} not in its {where} section")
    if not inspect.isclass(obj):
        returns = inspect.signature(obj).return_annotation
        if returns not in (None, "None") and not found.get("Returns"):
            problems.append("no Returns section")
    return problems


PUBLIC_CALLABLES = [name for name in CURATED if callable(getattr(slt_relu, name))]


@pytest.mark.parametrize("name", PUBLIC_CALLABLES)
def test_public_docstring_sections(name):
    problems = docstring_problems(getattr(slt_relu, name))
    assert not problems, f"slt_relu.{name}: " + "; ".join(problems)


@pytest.mark.parametrize("name", [n for n in slt_relu.tms.__all__ if callable(getattr(slt_relu.tms, n))])
def test_tms_docstring_sections(name):
    """The second model family's namespace (slt_relu.tms) is held to the same rule."""
    problems = docstring_problems(getattr(slt_relu.tms, name))
    assert not problems, f"slt_relu.tms.{name}: " + "; ".join(problems)


def test_docstring_check_finds_what_is_missing():
    """The check fails for a missing parameter, a missing Returns section and a missing docstring."""
    def good(a, b=1, *args, c, **kwargs) -> int:
        """Summary.

        Args:
            a: one.
            b (int): two.
            c: three.

        Returns:
            a number.
        """

    def bad(a, b) -> int:
        """Summary.

        Args:
            a: one; b is described in passing, not as an entry.
        """

    class Box:
        """A box.

        Attributes:
            width: its width.
        """

        def __init__(self, width, height):
            self.width, self.height = width, height

    def undocumented(x):
        pass

    assert docstring_problems(good) == []
    assert docstring_problems(bad) == ["parameter 'b' not in its Args section", "no Returns section"]
    assert docstring_problems(Box) == ["parameter 'height' not in its Args/Attributes section"]
    assert docstring_problems(undocumented) == ["no docstring"]
    assert len(PUBLIC_CALLABLES) == len(CURATED) - 4          # all but the modules truths, known_lambda, tms, models
