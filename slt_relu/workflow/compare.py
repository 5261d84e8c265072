"""Compare a run's ``metrics.json`` with a reference's, number by number, with the tolerance each
kind of number allows; a rerun on another machine agrees within these, never bitwise.

XLA compiles for the host's instruction set, so a float computed on another CPU (or with other
library versions) differs in its last bits, and a sampler turns such a difference into another
trajectory. Each number in a results folder is therefore one of three kinds:

- **exact**: integers, booleans, labels, strings, and every number of a kind without a sampler
  when it is not a float: equal;
- **deterministic floats** (quadrature, Fisher spectra, ranks' residuals, regions, affine maps,
  settings echoed back): ``|a - b| <= rtol max(|a|, |b|) + atol`` with ``(rtol, atol)`` from the
  run's dtype, :data:`TOLERANCES`;
- **sampler outputs**: the headline estimates (:data:`STATISTICAL`: phase masses, log evidences,
  learning coefficients) agree within ``k`` combined Monte Carlo standard errors,
  ``|a - b| <= k sqrt(se_a^2 + se_b^2)``; every other number a sampler produced (diagnostics,
  per-trial values, warnings, crossovers read off noisy masses) is another draw on another machine
  and is checked for its form only (present, of the same type).  ``k`` comes from the number of
  comparisons so that the chance of any false alarm stays below a chosen rate
  (:func:`bonferroni_k`).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import NormalDist
from typing import Any, NamedTuple

from .settings import ConfigError
from .config import apply_overrides

__all__ = ["Check", "Difference", "bonferroni_k", "compare", "dotted", "leaves", "lookup", "number_kind", "reported_se",
           "rerun"]

# (rtol, atol) of a deterministic float per dtype: a result of ~1e3-1e6 operations on inputs of
# order 1 carries a rounding error of ~1e-13 relative in float64 and ~1e-6 in float32; the margins
# allow a condition number of ~1e3 (least-squares affine maps, Fisher spectra); atol covers numbers
# that are zero up to rounding (residuals of 1e-16, losses of 1e-35)
TOLERANCES = {"float64": (1e-9, 1e-12), "float32": (1e-4, 1e-6)}

# The kinds whose numbers come from a sampler, and which keys of their metrics hold what.  A number is
# a sampler output checked for its form if any key on its path is in SAMPLED, else named by the first key on
# its path (from the root, skipping list indices) in STATISTICAL or DETERMINISTIC, else checked for its form.
SAMPLER_KINDS = ("posterior", "learning_coefficient", "lambda_curve", "tms", "tms_transition", "tms_training")
SAMPLED = {                                 # containers of sampler outputs whose inner keys echo settings
    # draws: how many, and their files' size, follow SMC's stopping rule (runs or particles added where the
    # runs disagree), itself a sampler output
    "posterior": frozenset({"lead", "diagnostics", "trial_filter", "draws"}),
    # an optimiser's minimum on a singular loss moves along its flat directions with the rounding
    "learning_coefficient": frozenset({"loss_at_minimum"}),
    # the fit's candidates and checks: another draw of the same curves
    "lambda_curve": frozenset({"lambda_by_m", "lambda_se_by_m", "chi2_by_m", "residual_p", "reason", "final_phases",
                               "final_phase_fraction"}),
    # the fit's details (halves of the window, the other estimators, the region's check) and the verdict
    "tms": frozenset({"fit", "verdict", "z"}),
    # the crossovers read off noisy masses (the grid's refined n too), the checks, the free-energy fits
    "tms_transition": frozenset({"transition", "comparisons", "check", "labelling_sensitivity", "free_energy_fits"}),
    # the LLC per final phase (which phases hold runs is the training's; each mean is another draw) and timings
    "tms_training": frozenset({"llc_by_phase", "wall_s"}),
}
STATISTICAL = {
    "posterior": frozenset({"mass", "log_evidence"}),
    "learning_coefficient": frozenset({"estimate"}),
    "lambda_curve": frozenset({"lambda"}),
    "tms": frozenset({"lambda"}),
    "tms_transition": frozenset({"mass", "log_evidence"}),
    "tms_training": frozenset({"llc_final"}),
}
DETERMINISTIC = {
    "posterior": frozenset({"truth", "rule", "sweep", "sampler", "t", "v", "crossover_phases", "index",
                            "values", "n", "beta", "n_beta", "trials", "programs"}),
    "learning_coefficient": frozenset({"n", "name", "true_lambda", "method", "exact_finite_n", "n_beta",
                                       "step_size", "localization", "num_steps", "refined", "case", "step_sizes",
                                       "localizations", "betas"}),
    "lambda_curve": frozenset({"name", "family", "num_params", "n", "lambda_exact", "m_exact", "t_range", "phase",
                               "reference"}),
    # the exact k-gon table and the settings echoed back
    "tms": frozenset({"c", "k", "variant", "n_positive", "length", "bias", "positive_bias", "negative_bias", "loss",
                      "loss_formula", "grad_norm", "kind", "smooth", "hessian", "fisher_rank", "lambda_exact",
                      "lambda_rule", "note", "region"}),
    # the formula's exact losses, lambdas and n; the grid of n (deterministic without transition.refine)
    "tms_transition": frozenset({"formula", "n"}),
    # training is deterministic given the seed (float arithmetic: its losses within the dtype's rtol, its phase
    # labels, counts and sequences exact); the settings echoed back; the Bayesian side from exact losses
    "tms_training": frozenset({"training", "bayes_sequence", "n", "n_beta", "final_phases", "final_phase_fraction",
                               "sequences", "distinct_sequences", "final_loss", "final_population_loss", "bayes",
                               "by_final_phase"}),
}
# the Monte Carlo standard error a run reports beside each statistical number (same path, this key)
REPORTED_SE = {"mass": "mass_mcse", "log_evidence": "log_evidence_mcse", "estimate": "se", "lambda": "lambda_se",
               "llc_final": "llc_final_se"}
# numbers that say how a run went on this machine (timing, resumption), never compared
VOLATILE = frozenset({"program_wall_s", "resumed_points", "resumed_wall_s", "programs", "program_ticks",
                      "program_chains", "program_points", "wall_time_s"})

KeyPath = tuple  # keys and list indices from the root of metrics.json


class Difference(NamedTuple):
    """A number outside its tolerance: where, the reference's and the run's values, the rule."""
    path: str
    reference: Any
    value: Any
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reference!r} vs {self.value!r} ({self.rule})"


def dotted(path: KeyPath) -> str:
    """('points', 0, 'mass', 'other') -> 'points[0].mass.other'."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def number_kind(kind: str, path: KeyPath) -> str:
    """'statistical', 'deterministic' or 'form' (a sampler output checked for its form only) for the
    number at ``path`` of a ``kind``'s metrics; every number of a kind without a sampler is deterministic."""
    if kind not in SAMPLER_KINDS:
        return "deterministic"
    if any(key in SAMPLED[kind] for key in path if isinstance(key, str)):
        return "form"
    for key in path:
        if not isinstance(key, str):
            continue
        if key in STATISTICAL[kind]:
            return "statistical"
        if key in DETERMINISTIC[kind]:
            return "deterministic"
    return "form"


def leaves(tree: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every leaf (number, string, bool, None) of a JSON tree with its path."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from leaves(v, path + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from leaves(v, path + (i,))
    else:
        yield path, tree


def lookup(tree: Any, path: KeyPath) -> Any:
    """The value at ``path`` or KeyError."""
    for p in path:
        if isinstance(p, int):
            if not isinstance(tree, list) or not -len(tree) <= p < len(tree):
                raise KeyError(p)
        elif not isinstance(tree, dict) or p not in tree:
            raise KeyError(p)
        tree = tree[p]
    return tree


def reported_se(metrics: dict, kind: str) -> Callable[[KeyPath], float | None]:
    """The standard error a run reports beside a statistical number (``mass`` -> ``mass_mcse`` at the same
    place, ``estimate`` -> ``se``), or None where it reports none."""
    def se(path: KeyPath) -> float | None:
        for i, key in enumerate(path):
            if isinstance(key, str) and key in STATISTICAL.get(kind, ()):
                try:
                    value = lookup(metrics, path[:i] + (REPORTED_SE[key],) + path[i + 1:])
                except KeyError:
                    return None
                return float(value) if isinstance(value, (int, float)) else None
        return None
    return se


def bonferroni_k(comparisons: int, false_alarm: float = 1e-4) -> float:
    """The two-sided normal quantile k with P(any of ``comparisons`` |z| > k) <= ``false_alarm``."""
    return NormalDist().inv_cdf(1 - false_alarm / (2 * max(comparisons, 1)))


def _exists(tree: Any, path: KeyPath) -> bool:
    try:
        lookup(tree, path)
    except KeyError:
        return False
    return True


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def compare(reference: dict, metrics: dict, *, kind: str, dtype: str, k: float,
            se_reference: Callable[[KeyPath], float | None], se_run: Callable[[KeyPath], float | None]) -> list[Difference]:
    """Every number of ``reference`` that ``metrics`` does not reproduce within its tolerance.

    Args:
        reference, metrics: two ``metrics.json`` trees of the same config (``metrics`` may hold more keys:
            numbers added since are not compared).
        kind: the config's kind; dtype: its ``dtype`` ('float64' or 'float32').
        k: standard errors a statistical number may differ by (:func:`bonferroni_k`).
        se_reference, se_run: each side's Monte Carlo standard error of a statistical number
            (:func:`reported_se`, or a spread measured over independent runs).

    Returns:
        the differences, in the reference's order (empty when the run reproduces the reference).
    """
    rtol, atol = TOLERANCES[dtype]
    out = []
    if kind not in SAMPLER_KINDS:                   # checks added since may warn more; every earlier warning stays
        missing = [w for w in reference.get("warnings") or [] if w not in (metrics.get("warnings") or [])]
        out += [Difference("warnings", w, "<missing>", "an earlier warning is gone") for w in missing]
    for path, a in leaves(reference):
        if any(p in VOLATILE or p == "warnings" for p in path if isinstance(p, str)):
            continue
        what = number_kind(kind, path)
        try:
            b = lookup(metrics, path)
        except KeyError:
            present = max(i for i in range(len(path) + 1) if _exists(metrics, path[:i]))
            # what is missing: an item of a list, or a key below which there are only list items (a phase
            # the run did not see, whose masses are a number or a list of them, one per sweep point)
            if what == "deterministic" or not (isinstance(path[present], int)
                                               or all(isinstance(p, int) for p in path[present + 1:])):
                out.append(Difference(dotted(path), a, "<missing>", "the run lacks this number"))
                continue
            if what == "form" or "mass" not in path or isinstance(path[present], int):
                continue                   # a sampler's run may list fewer items (phases seen, leads, dropped trials)
            b = 0.0                        # a phase the run did not see has mass 0
        if what == "statistical" and _is_number(a) and _is_number(b):
            sa, sb = se_reference(path), se_run(path)
            sa, sb = (sa if sa is not None else sb), (sb if sb is not None else sa)   # the same estimator on both sides
            if sa is None:
                out.append(Difference(dotted(path), a, b, "no standard error to compare with"))
            elif not abs(a - b) <= k * math.hypot(sa, sb) + rtol * max(abs(a), abs(b)) + atol:   # and rounding
                z = abs(a - b) / math.hypot(sa, sb) if math.hypot(sa, sb) else math.inf
                out.append(Difference(dotted(path), a, b, f"{z:.1f} combined standard errors > k = {k:.2f}"))
        elif what != "deterministic":                # a sampler output: a number (or None: no draws) or a label
            if any(isinstance(p, str) and p.endswith("_leads_at") for p in path):
                continue                  # the sweep points where a phase leads: their values are numbers or labels
            if (_is_number(a) or a is None) != (_is_number(b) or b is None):
                out.append(Difference(dotted(path), a, b, "a sampler output of another type"))
        elif isinstance(a, float) and _is_number(b) or isinstance(b, float) and _is_number(a):
            if not abs(a - b) <= rtol * max(abs(a), abs(b)) + atol:
                out.append(Difference(dotted(path), a, b, f"deterministic {dtype}: rtol {rtol:g}, atol {atol:g}"))
        elif a != b:
            out.append(Difference(dotted(path), a, b, "exact"))
    return out


class Check(NamedTuple):
    """A committed results folder rerun: the numbers outside their tolerance, how many were compared (and how
    many of them statistically), how many differ at all (bitwise), and whether the rerun ran where the folder
    was computed (machine, code, versions, flags)."""
    differences: list[Difference]
    compared: int
    statistical: int
    bitwise_different: int
    same_machine: bool
    k: float


def rerun(folder, out, *, progress: bool = False, cache: bool = True, false_alarm: float = 1e-4) -> Check:
    """Rerun the config a results folder records (its manifest's config and overrides) into ``out`` and
    compare the new metrics with the folder's.  Statistical numbers use both runs' reported Monte Carlo errors
    (:func:`reported_se`) and ``k = bonferroni_k(N, false_alarm)`` over the N statistical numbers compared.

    On the machine, versions and XLA flags that computed the folder the rerun should be bitwise equal
    (``bitwise_different == 0``); elsewhere within the tolerances (``differences == []``)."""
    from . import runner
    from .report import read_folder

    manifest, reference = read_folder(Path(folder))
    raw, overrides = manifest.get("config"), manifest.get("overrides") or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"check {folder}: its manifest.json records no config to rerun")
    label = Path(manifest.get("config_path") or f"{manifest.get('name', 'config')}.toml")
    new_folder = runner.run_prepared(lambda: runner.Prepared(label, apply_overrides(raw, overrides), overrides), out,
                                     progress, cache)
    metrics = json.loads((new_folder / "metrics.json").read_text())
    new_manifest = json.loads((new_folder / "manifest.json").read_text())
    kind, dtype = manifest.get("kind", ""), (manifest.get("resolved") or {}).get("dtype", "float64")
    statistical = [p for p, v in leaves(reference) if number_kind(kind, p) == "statistical" and _is_number(v)]
    k = bonferroni_k(len(statistical), false_alarm)
    diffs = compare(reference, metrics, kind=kind, dtype=dtype, k=k, se_reference=reported_se(reference, kind),
                    se_run=reported_se(metrics, kind))
    new = dict(leaves(metrics))
    bitwise = sum(1 for p, v in leaves(reference) if not any(isinstance(x, str) and x in VOLATILE for x in p)
                  and new.get(p, object()) != v)
    where = lambda m: ((m.get("machine") or {}).get("cpu_model"), (m.get("machine") or {}).get("isa_flags"),
                       (m.get("machine") or {}).get("xla_flags"), m.get("versions"), m.get("git_commit"))
    same = bool(manifest.get("machine")) and where(manifest) == where(new_manifest)
    return Check(diffs, sum(1 for _ in leaves(reference)), len(statistical), bitwise, same, k)
