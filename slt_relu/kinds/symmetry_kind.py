"""Experiment kind ``symmetry``: the phases of W0 for a truth and models of several widths.

For every width: one representative per phase (true_set_representatives), its label, K, the
Fisher rank against D - d and the excess null directions (null_accounting); random compositions
pi . rho applied to every representative must keep its label (classify_phase), K and the Fisher
rank (psi^J moves a point to another phase: the orientation labels of J flip).  Outputs:
true_set_width{d}.png (boundaries with arrows into the active side, DSLT3 style),
effective_weights_width{d}.png (|q_i| w_i, DSLT4 style; n_in = 2), arrays.npz (the
representatives, flat), metrics.json.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from ..config import ConfigError
from ..fisher import null_accounting
from ..loss import population_loss
from ..network import num_params, to_flat
from ..classify import classify_phase
from ..phases import check_truth, true_set_representatives
from ..plots import effective_weights_figure, phase_gallery_figure, save_figure
from ..settings import Section
from ..symmetry import permute, rescale
from .common import TruthExperiment, resolve_setup
from .kind import Kind, first_line, register_kind


class SymmetrySettings(Section):
    widths: tuple[Annotated[int, Field(ge=1, le=8)], ...] = Field(min_length=1, description="model widths d >= m")
    rtol: float | None = Field(None, ge=0, description="rank threshold of the Fisher spectrum (default D * eps)")
    checks: int = Field(3, ge=0, le=100, description="random compositions pi . rho per representative")
    tol: float = Field(1e-6, ge=0, le=1, description="classify_phase tolerance of those checks")


class Settings(TruthExperiment):
    kind: Literal["symmetry"]
    symmetry: SymmetrySettings


def resolve(s: Settings, raw=None) -> dict:
    setup = resolve_setup(s)
    try:
        check_truth(setup.example.truth)
    except ValueError as err:
        raise ConfigError(f"truth: {err}") from None
    m = setup.example.truth.width
    if min(s.symmetry.widths) < m:
        raise ConfigError(f"symmetry.widths: expected a non-empty list of widths between m = {m} (the truth's "
                          f"nodes) and 8, got {list(s.symmetry.widths)}")
    return {**s.symmetry.model_dump(), "example": setup.example, "inputs": setup.inputs, "sigma": setup.sigma}


def run(s: dict, outdir, key, ctx) -> dict:
    import jax
    from tqdm.auto import tqdm

    ex, inputs, sigma = s["example"], s["inputs"], s["sigma"]
    truth = ex.truth
    half = getattr(inputs, "half_width", getattr(inputs, "std", 1.0))
    widths, arrays = {}, {}
    for d in s["widths"]:
        reps = true_set_representatives(truth, d)
        rows = []
        for k, rep in enumerate(tqdm(reps, desc=f"width {d}", disable=not ctx.progress, leave=False)):
            acc = null_accounting(rep.params, inputs, sigma, s["rtol"])
            K = float(population_loss(rep.params, truth, inputs, sigma))
            own = classify_phase(rep.params, truth, tol=s["tol"])
            kept = 0
            for c in range(s["checks"]):
                k1, k2 = jax.random.split(jax.random.fold_in(key, 1000 * d + 10 * k + c))
                lambdas = jax.numpy.exp(jax.random.uniform(k1, (d,), minval=-1.0, maxval=1.0))
                moved = permute(rescale(rep.params, lambdas), np.asarray(jax.random.permutation(k2, d)))
                again = classify_phase(moved, truth, tol=s["tol"])
                K2 = float(population_loss(moved, truth, inputs, sigma))
                rank2 = null_accounting(moved, inputs, sigma, s["rtol"]).rank
                kept += int(again.label == rep.label and abs(K2 - K) <= 1e-12 and rank2 == acc.rank)
            D = num_params(d, truth.n_in)
            rows.append({
                "label": str(rep.label), "kind": rep.label.kind, "truth_groups": rep.label.truth,
                "hidden": rep.label.hidden, "degenerate": rep.label.degenerate, "reversed_kinks": rep.r,
                "K": K, "rank": acc.rank, "bound": D - d, "nullity": acc.nullity,
                "generator_rank": acc.generator_rank, "excess": acc.excess,
                "classified_as_itself": own.label == rep.label, "symmetry_checks_passed": f"{kept}/{s['checks']}",
                "params": to_flat(rep.params),
                "_plot": {"label": str(rep.label), "params": rep.params, "group": own.group,
                          "orientation": own.orientation, "note": f"K={K:.0e}  rank {acc.rank}/{D - d}"},
            })
        arrays[f"width_{d}"] = np.stack([np.asarray(r["params"]) for r in rows])
        kinds = {}
        for r in rows:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        widths[str(d)] = {
            "num_phases": len(rows),
            "num_phases_without_hidden_groups": sum(1 for r in rows if not r["hidden"]),
            "by_kind": kinds,
            "max_K": max(r["K"] for r in rows),
            "all_classified_as_themselves": all(r["classified_as_itself"] for r in rows),
            "representatives": [{k: v for k, v in r.items() if k not in ("params", "_plot")} for r in rows],
        }
        title = (f"{ex.name}: phases of W0 for width {d} ({len(rows)}); colour = truth boundary, dashed = reversed, "
                 "black = hidden group")
        fig = phase_gallery_figure(truth, [r["_plot"] for r in rows], title=title,
                                   half_width=half)
        save_figure(fig, outdir / f"true_set_width{d}.png")
        if truth.n_in == 2:
            fig = effective_weights_figure(truth, [r["_plot"] for r in rows],
                                           title=f"{ex.name}, width {d}: effective weights |q_i| w_i (grey: truth)")
            save_figure(fig, outdir / f"effective_weights_width{d}.png")
    np.savez_compressed(outdir / "arrays.npz", **arrays)
    return {"truth": ex.name, "widths": widths}


def headline(metrics: dict) -> list[str]:
    """Phases of W0 per width, the largest K over the representatives, whether each is classified as itself."""
    return [f"width {w}: {v['num_phases']} phases ({v['num_phases_without_hidden_groups']} without hidden groups), "
            f"max K {v['max_K']:.2g}, all classified as themselves: {v['all_classified_as_themselves']}"
            for w, v in metrics.get("widths", {}).items()]


KIND = register_kind(Kind("symmetry", Settings, resolve, run, headline,
                          description=first_line(__doc__)))
