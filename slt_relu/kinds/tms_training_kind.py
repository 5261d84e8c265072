"""Experiment kind ``tms_training``: TMS training runs from random initialisations, the k-gon phase and the LLC along training.

The dynamical side of Chen, Lau, Mendel, Wei, Murfet 2023: the toy model of superposition f(x) = ReLU(W^T W x + b)
(W (2, c), inputs x = mu e_i) trained by Adam or SGD (optax) from ``training.runs`` random initialisations
W ~ N(0, init_std^2), b ~ N(0, init_bias_std^2) at each n of ``training.ns`` (nested data sets; full-batch
gradients of the exact L_n, or mini-batches), ``slt_relu.tms.training.train_trajectories``: at log-spaced
checkpoints the training loss L_n, the population loss L, the k-gon phase (``slt_relu.tms.phases.phase_codes``)
and the local learning coefficient (``slt_relu.tms.training_llc.llc_along_training``, the devinterp use case)

    lambda_hat(w*) = n beta (E[L_n(w)] - L_n(w*)),   p(w) proportional to exp(-n beta L_n(w) - (gamma/2) |w - w*|^2),

n beta = n / log n, by SGLD ([llc]).  At the final checkpoint also the estimator's expectation were L_n its
quadratic expansion there (``quadratic_llc_at_checkpoint``: the bias from gamma and eps, beside the
first-principles lambda of the k-gon, ``slt_relu.tms.critical_points``).

Metrics per n: the runs' final phases (counts and fractions), the sequences of phases the runs pass through (the
k-gons only, "none" left out), the final losses, the final LLC per phase with its se, and whether training passes
through the phases the Bayesian posterior prefers at smaller n: the phase of least asymptotic free energy
F_a(n) = n L_a + lambda_a log n (beta = 1) over the k-gon minima with a first-principles lambda (exact losses,
``slt_relu.tms.crossover.bayes_sequence``) along n, against the phases each run visits.

Outputs: metrics.json, results.nc (dims n, run, checkpoint, hidden, feature, sample, variant; kgon: the k-gon
minima's exact losses and lambdas), training.png (drawn from results.nc).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301; Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient".
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field

from ..posterior.llc import LLCSettings
from ..workflow.settings import ConfigError, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment, LLCSection, require_float64, require_increasing

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

MAX_C = 10                   # as the tms kind: the phases' variants grow like 2^(c - k)
TOP_SEQUENCES = 6            # the most common phase sequences listed per n


class TrainingSettings(Section):
    c: int = Field(6, ge=2, le=MAX_C, description="the features c (W: (2, c))")
    ns: tuple[Annotated[int, Field(ge=2, le=1_000_000)], ...] = Field(
        (100, 400, 1600, 5000), min_length=1, max_length=16, description="the sample sizes n, increasing (the data "
                                                                         "sets are nested along them)")
    runs: int = Field(32, ge=1, le=1024, description="runs per n from random initialisations (run r starts from "
                                                     "the same point at every n)")
    steps: int = Field(5000, ge=1, le=1_000_000, description="optimiser steps per run")
    checkpoints: int = Field(20, ge=2, le=200, description="checkpoints asked for: step 0 and log-spaced steps up to "
                                                           "training.steps (fewer where rounding merges early steps)")
    optimizer: Literal["adam", "sgd"] = Field("adam", description="optax.adam or optax.sgd")
    learning_rate: float = Field(0.01, gt=0, le=10, description="the optimiser's learning rate")
    batch_size: int = Field(0, ge=0, le=1_000_000, description="inputs per mini-batch, drawn with replacement at "
                                                               "every step (0: full batch, the exact L_n)")
    init_std: float = Field(0.1, gt=0, le=100, description="W ~ N(0, init_std^2) per entry at step 0")
    init_bias_std: float = Field(0.0, ge=0, le=100, description="b ~ N(0, init_bias_std^2) per entry at step 0")


class LLCTable(LLCSection):
    """[llc]: the SGLD estimate at every checkpoint (the schema of slt_relu.posterior.llc.LLCSettings with this kind's
    defaults; n beta = n / log n at each n and full-batch gradients, so n_beta and batch_size stay unset)."""

    enabled: bool = Field(True, description="estimate the LLC at every checkpoint")
    num_chains: int = Field(4, ge=1, le=64, description="chains per checkpoint, vmapped in one program")
    num_steps: int = Field(2000, ge=1, le=1_000_000, description="SGLD steps per chain")
    num_burnin: int = Field(500, ge=0, description="first steps dropped")
    thin: int = Field(4, ge=1, description="keep every thin-th step after the burn-in")
    step_size: float = Field(5e-4, gt=0, le=1, description="eps")
    localization: float = Field(10.0, ge=0, le=1e6, description="gamma of exp(-n beta L_n - gamma/2 |w - w*|^2)")


class Settings(Experiment):
    """Experiment kind ``tms_training``: TMS training runs from random initialisations, the k-gon phase and the LLC
    along training (module docstring)."""

    kind: Literal["tms_training"]
    training: TrainingSettings = TrainingSettings()
    llc: LLCTable = LLCTable()


class Resolved(NamedTuple):
    settings: Settings
    batch_size: int | None


def resolve(s: Settings, raw=None) -> Resolved:
    t = s.training
    require_float64(s.dtype, "tms_training", f"n beta (E[L_n] - L_n(w*)) at n = {max(t.ns)}")
    require_increasing(t.ns, "training.ns")
    if t.batch_size > t.ns[0]:
        raise ConfigError(f"training.batch_size: expected 0 (full batch) or at most the smallest n = {t.ns[0]}, got "
                          f"{t.batch_size}")
    if s.llc.n_beta is not None:
        raise ConfigError(f"llc.n_beta: expected no value (n beta = n / log n at each n), got {s.llc.n_beta}")
    if s.llc.batch_size is not None:
        raise ConfigError(f"llc.batch_size: expected no value (full-batch SGLD on the exact L_n), got "
                          f"{s.llc.batch_size}")
    return Resolved(s, t.batch_size or None)


# ----------------------------------------------------------------------------------------------
# the run


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    from ..sampling import check_keys
    from ..tms import training as T
    from ..tms.crossover import kgon_minima
    from ..tms import training_llc as TL

    s, t, llc = r.settings, r.settings.training, r.settings.llc
    root = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    k_train, k_llc = jax.random.split(root)
    ds = T.train_trajectories(k_train, t.c, list(t.ns), runs=t.runs, steps=t.steps, optimizer=t.optimizer,
                              learning_rate=t.learning_rate, batch_size=r.batch_size, init_std=t.init_std,
                              init_bias_std=t.init_bias_std, checkpoints=t.checkpoints)
    train_s = float(ds.attrs["wall_s"])
    if llc.enabled:
        bar = tqdm(total=ds.sizes["n"] * ds.sizes["run"] * ds.sizes["checkpoint"], desc="LLC at checkpoints",
                   disable=not ctx.progress, leave=False)
        ds = TL.llc_along_training(k_llc, ds, llc_settings(llc), progress=lambda done, total: bar.update(done - bar.n))
        bar.close()
        ds["llc_quadratic"] = (("n", "run"), TL.quadratic_llc_at_checkpoint(ds, llc.localization, llc.step_size),
                               {"long_name": "E[lambda_hat] were L_n quadratic at the final checkpoint "
                                             "(quadratic_llc of its Hessian)"})
    minima = kgon_minima(t.c)
    metrics = _metrics(ds, minima, llc.enabled)
    metrics["wall_s"] = {"training": train_s}
    loss, lam = (np.array([v[j] for v in minima.values()], np.float64) for j in (0, 1))
    ds = ds.assign({"kgon_loss": ("kgon", loss, {"long_name": "the k-gon minimum's exact population loss"}),
                    "kgon_lambda": ("kgon", lam, {"long_name": "its first-principles learning coefficient"})})
    ds = ds.assign_coords(kgon=list(minima))
    return Output(metrics, ds)


def llc_settings(table: LLCTable) -> LLCSettings:
    """The [llc] table as llc_along_training's LLCSettings."""
    return table.build()


def _summary(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def _metrics(ds, minima: dict, with_llc: bool) -> dict:
    from ..tms.crossover import bayes_preferred, bayes_sequence
    from ..tms.training import phase_sequence

    ns = [int(n) for n in ds.n.values]
    R = ds.sizes["run"]
    bayes = bayes_sequence(minima, max(ns))
    by_n = []
    for i, n in enumerate(ns):
        p = ds.isel(n=i)
        phases = p.phase.values.astype(str)                        # (run, checkpoint)
        final = Counter(phases[:, -1])
        seqs = [phase_sequence(row, skip=("none",)) for row in phases]
        common = Counter(seqs).most_common(TOP_SEQUENCES)
        earlier = [b["phase"] for b in bayes if b["from_n"] <= n]
        here = bayes_preferred(minima, n)
        before = [a for a in dict.fromkeys(earlier) if a != here]   # preferred at some smaller n only
        visits = [set(q) for q in seqs]
        entry = {
            "n": n,
            "final_phases": dict(sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))),
            "final_phase_fraction": {k: v / R for k, v in sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))},
            "sequences": [{"sequence": list(q), "count": c} for q, c in common],
            "distinct_sequences": len(set(seqs)),
            "final_loss": _summary(p.train_loss.values[:, -1]),
            "final_population_loss": _summary(p.population_loss.values[:, -1]),
            "bayes": {"preferred": here, "preferred_at_smaller_n": before,
                      "runs_ending_in_preferred": int(final.get(here, 0)),
                      "runs_visiting_smaller_n_phases": int(sum(bool(v & set(before)) for v in visits)),
                      "runs_visiting_each": {a: int(sum(a in v for v in visits)) for a in before}},
            "by_final_phase": {},
        }
        for name in entry["final_phases"]:
            runs = phases[:, -1] == name
            row = {"runs": int(runs.sum()),
                   "train_loss": float(p.train_loss.values[runs, -1].mean()),
                   "population_loss": float(p.population_loss.values[runs, -1].mean()),
                   "loss_exact": minima[name][0] if name in minima else None,
                   "lambda_exact": minima[name][1] if name in minima else None}
            entry["by_final_phase"][name] = row
        if with_llc:
            est, se = p.llc.values[:, -1], p.llc_se.values[:, -1]
            entry["n_beta"] = float(ds.n_beta.values[i])
            entry["llc_final"] = float(est.mean())
            entry["llc_final_se"] = float(np.sqrt(np.sum(se ** 2)) / R) if np.all(np.isfinite(se)) else None
            entry["llc_by_phase"] = {}
            for name in entry["final_phases"]:
                runs = phases[:, -1] == name
                m = int(runs.sum())
                e, q = est[runs], p.llc_quadratic.values[runs]
                spread = float(e.std(ddof=1) / math.sqrt(m)) if m > 1 else None
                chains = float(np.sqrt(np.sum(se[runs] ** 2)) / m) if np.all(np.isfinite(se[runs])) else None
                entry["llc_by_phase"][name] = {
                    "runs": m, "llc": float(e.mean()), "llc_se": spread if spread is not None else chains,
                    "llc_se_chains": chains, "llc_quadratic": float(q.mean()),
                    "lambda_exact": minima[name][1] if name in minima else None,
                    "accept": float(p.llc_accept.values[runs, -1].mean())}
        by_n.append(entry)
    t = ds.attrs
    return {"training": {"c": int(t["c"]), "ns": ns, "runs": R, "steps": int(t["steps"]), "optimizer": t["optimizer"],
                         "learning_rate": float(t["learning_rate"]), "batch_size": int(t["batch_size"]),
                         "init_std": float(t["init_std"]), "init_bias_std": float(t["init_bias_std"]),
                         "checkpoint_steps": [int(v) for v in ds.step.values]},
            "bayes_sequence": bayes,
            "by_n": by_n}


def figures(r: Resolved, ds) -> dict:
    """training.png (:func:`figure`), from the results Dataset."""
    return {"training": figure(ds)}


def figure(ds):
    """training.png: the population loss, the phase and the LLC along training per n (the LLC where the Dataset has
    ``llc``), the k-gon minima's exact losses (``kgon_loss``) of the final phases, and snapshots of one run's columns
    of W where its phase changes (``slt_relu.plots.tms_training``), from the kind's results Dataset."""
    from ..plots import tms_training_figure
    from ..tms.training import phase_sequence

    N, R, K = ds.sizes["n"], ds.sizes["run"], ds.sizes["checkpoint"]
    with_llc = "llc" in ds
    llc = ds["llc"].values if with_llc else np.full((N, R, K), np.nan)
    llc_se = ds["llc_se"].values if with_llc else np.full((N, R, K), np.nan)
    # the run at the largest n that visits the most k-gons: its columns of W where its phase changes
    phases = ds["phase"].values[-1].astype(str)
    lengths = [len(phase_sequence(row, skip=("none",))) for row in phases]
    r = int(np.argmax(lengths))
    changes = [k for k in range(K) if k == 0 or phases[r, k] != phases[r, k - 1]]
    if K - 1 not in changes:
        changes.append(K - 1)
    picks = changes if len(changes) <= 2 * N else sorted(set(changes[: 2 * N - 1] + [K - 1]))
    n_last, steps = int(ds["n"].values[-1]), ds["step"].values
    snaps = [{"W": ds["W"].values[-1, r, k], "b": ds["b"].values[-1, r, k],
              "title": (f"n = {n_last}, run {r}\n" if j == 0 else "\n") + f"step {int(steps[k])}: {phases[r, k]}"}
             for j, k in enumerate(picks)]
    seen = set(ds["phase"].values[:, :, -1].astype(str).reshape(-1))
    levels = {f"{name} {loss:.4f}": float(loss)
              for name, loss in zip(ds["kgon"].values.astype(str), ds["kgon_loss"].values) if name in seen}
    t = ds.attrs
    batch = "full batch" if not t["batch_size"] else f"batches of {t['batch_size']}"
    return tms_training_figure(
        steps, ds["n"].values, ds["population_loss"].values, ds["phase"].values, llc, llc_se, snaps, levels=levels,
        title=f"TMS c = {t['c']}: {R} {t['optimizer']} runs per n (lr {t['learning_rate']:g}, {batch}, W ~ N(0, "
              f"{t['init_std']:g}^2)), the phase and the LLC (SGLD, n beta = n / log n) at each checkpoint")


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    t, q, D = s.training, s.llc, 3 * s.training.c
    K = min(t.checkpoints, t.steps + 1)
    data = 4 * t.c * max(t.ns)                                  # one data set's sorted magnitudes and prefix sums
    kept = len(range(q.num_burnin, q.num_steps, q.thin)) * D
    needs = [Need("training.ns, training.c", "the nested data sets, sorted", len(t.ns) * data),
             Need("training.ns, training.runs, training.checkpoints", f"the parameters at every checkpoint ({D} "
                  "parameters)", len(t.ns) * t.runs * K * D)]
    if q.enabled:
        needs += [Need("llc.num_chains, training.ns", "one checkpoint's SGLD chains' copies of the data",
                       q.num_chains * data),
                  Need("llc.num_chains, llc.num_steps, llc.num_burnin, llc.thin", "one checkpoint's kept SGLD draws",
                       q.num_chains * kept)]
    return needs


def headline(metrics: dict) -> list[str]:
    """Per n: the final phases' fractions, the most common sequence, the final LLC per phase against lambda."""
    out = []
    for e in metrics.get("by_n", []):
        fr = ", ".join(f"{k} {v:.2f}" for k, v in e["final_phase_fraction"].items())
        seq = e["sequences"][0] if e.get("sequences") else None
        line = f"n = {e['n']}: final {fr}"
        if seq:
            line += f"; most common path {' -> '.join(seq['sequence']) or '(none)'} ({seq['count']} runs)"
        b = e.get("bayes", {})
        if b:
            line += (f"; Bayes prefers {b['preferred']} (asymptotic F), {b['runs_visiting_smaller_n_phases']} runs "
                     f"visit a phase it prefers at smaller n")
        out.append(line)
        for name, q in (e.get("llc_by_phase") or {}).items():
            se = "" if q["llc_se"] is None else f" +- {q['llc_se']:.2f}"
            lam = "no first-principles lambda" if q["lambda_exact"] is None else f"lambda {q['lambda_exact']:g}"
            out.append(f"  {name} ({q['runs']} runs): LLC {q['llc']:.2f}{se}, quadratic expectation "
                       f"{q['llc_quadratic']:.2f}, {lam}")
    return out


KIND = register_kind(Kind("tms_training", Settings, resolve, run, headline, description=first_line(__doc__),
                          memory=memory, figures=figures))
