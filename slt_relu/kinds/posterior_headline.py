"""The posterior kind's headline (``slt-relu show`` and the end of a run): each point's masses with their
errors, log Z, the crossover at each value of the sweep's other axes and who leads, from metrics.json."""
from __future__ import annotations

import numpy as np

__all__ = []   # nothing to import: a part of the kinds that import it, not an API


def point_label(values: dict) -> str:
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in values.items()) \
        or "the run"


def headline(metrics: dict) -> list[str]:
    """A posterior sweep's headline numbers: each point's masses (mean over data sets, +- their standard
    error across data sets, and the Monte Carlo error), log Z for SMC, the crossover and who leads."""
    lines = []
    for row in metrics.get("points", []):
        where = point_label(row["values"]) if row["values"] else f"n beta = {row['n_beta']:.4g}"
        conv = row.get("convergence")
        if "mass" in row:
            disagree = lambda nm: conv is not None and nm in conv["mass_mcse"] and not _phase_converged(conv, nm)
            parts = [f"{nm} {m:.3f} +- {row['mass_se'][nm] or 0:.3f} (MC {row['mass_mcse'][nm] or 0:.3f}"
                     f"{' > target: runs disagree' if disagree(nm) else ''})" for nm, m in row["mass"].items()]
        else:
            cp = row.get("classify_phase", {})
            names = cp.get("names", {})
            top = sorted(cp.get("mass", {}).items(), key=lambda kv: -kv[1])[:3]
            parts = [f"{names.get(nm, nm)} {m:.3f}" for nm, m in top]
        lz_target = conv["targets"]["log_evidence_mcse"] if conv else None
        lz_bad = lz_target is not None and not conv["log_evidence_mcse"] <= lz_target
        lz = (f"; log Z {row['log_evidence']:.2f} +- {row['log_evidence_se'] or 0:.2f} (MC "
              f"{row['log_evidence_mcse'] or 0:.2f}{' > target: runs disagree' if lz_bad else ''})"
              if row.get("log_evidence") is not None else "")
        flag = "" if conv is None or conv["converged"] else "NOT CONVERGED: "
        lines.append(f"{where}: {flag}" + ", ".join(parts) + lz)
    axis = _crossover_axis(metrics)
    if axis is not None:
        a, b = metrics["crossover_phases"]
        lines.append(f"crossover of {a} and {b} along {axis}: " + _crossovers(metrics, metrics[f"crossover_{axis}"],
                                                                            metrics.get(f"crossover_{axis}_se"), axis))
    lead = metrics.get("lead")
    if lead:
        a, b = lead["phases"]
        at = lead.get(f"{a}_leads_at", [])
        lines.append(f"{a} leads {b} (by two standard errors) at {len(at)} of {len(metrics.get('points', []))} points")
    cm = metrics.get("compare")
    if cm and axis is not None and f"crossover_{axis}" in cm:
        lines.append(f"{cm['sampler']} on the same data sets: crossover along {axis}: "
                     + _crossovers(metrics, cm[f"crossover_{axis}"], cm.get(f"crossover_{axis}_se"), axis))
    return lines


def _crossovers(metrics: dict, values, ses, axis: str) -> str:
    """The crossover (+- se) at each value of the sweep's other axes, each labelled with them and its n beta:
    '1.165 +- 0.01 at posterior.beta = wbic (n beta = 1086); ...'."""
    if not isinstance(values, list):
        return f"{_fmt(values)} +- {_fmt(ses)}"
    others = {}
    for row in metrics.get("points", []):
        rest = {k: v for k, v in (row.get("values") or {}).items() if k.split(".")[-1] != axis}
        others.setdefault(point_label(rest), row.get("n_beta"))
    if len(others) != len(values) or not all(others):
        return f"{_fmt(values)} +- {_fmt(ses)}"
    ses = ses if isinstance(ses, list) else [None] * len(values)
    return "; ".join(f"{_fmt(v)} +- {_fmt(s)} at {where}" + (f" (n beta = {nb:.4g})" if nb is not None else "")
                     for v, s, (where, nb) in zip(values, ses, others.items()))


def _crossover_axis(metrics: dict) -> str | None:
    """The short name of the axis a sweep's crossover runs along (``crossover_<axis>`` in metrics.json), or None;
    folders written before ``crossover_axis`` was recorded name it only through that key."""
    if "crossover_phases" not in metrics:
        return None
    if "crossover_axis" in metrics:
        return metrics["crossover_axis"].split(".")[-1]
    return next((k.split(".")[-1] for k in metrics.get("sweep", {}) if f"crossover_{k.split('.')[-1]}" in metrics), None)


def _phase_converged(c: dict, phase: str) -> bool:
    """Whether a phase's mass met the stopping rule's target (its own Monte Carlo error at most mass_mcse), from a
    row of metrics.json."""
    v, target = c["mass_mcse"][phase], c["targets"]["mass_mcse"]
    return bool(target is None or (np.isfinite(v) and v <= target))


def _fmt(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return "none" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)
