"""Experiment kind ``fisher``: rank, spectrum and null-direction accounting of I(w) at sets of points.

Top level: [inputs] (or a [truth] whose inputs are used), optional ``sigma``, and
[fisher] with ``rtol`` (default D * eps) and one or more [[fisher.points]] tables, each
with ``source`` and a ``label``:

  source = "random"       widths = [...], count (per width, default 4), placement = "iid" (default:
                          every coordinate N(0, scale^2), scale default 1) or "crossing" (every
                          activation boundary through the central half of the box / within one std
                          of the origin): generic parameters, rank D - d expected.  With "iid", a
                          node whose boundary lies far out in the tails (or off the box) is
                          numerically inactive or linear on the inputs and adds excess directions.
  source = "m_symmetric"  m = [...], bias (default -0.3), q (default 1): the m-symmetric truths
  source = "truth"        the [truth] example's model base parameter (restricted model if it has one)
  source = "true_set"     count points along the [truth] example's W0 (restricted model)
  source = "degenerate"   width, cases = names from DEGENERATE_CASES, each a generic network (every
                          boundary crossing the input box) with node 0 made degenerate; the excess
                          is checked against the hand count
Any group may carry its own [fisher.points.inputs] table (same keys as [inputs]).
  source = "path"         width, start, end (flat parameter lists of length D), steps
  source = "points"       width, params = list of flat parameter lists

Outputs: rank_vs_bound.png, spectrum.png, arrays.npz (spectra), metrics.json.
"""
from __future__ import annotations

import numpy as np

from ..config import ConfigError, Table, read_example
from ..fisher import default_rtol, null_accounting
from ..inputs import UniformBox
from ..network import TwoLayer, from_flat, init_params, make_params, num_params, to_flat
from ..plots import rank_vs_bound_figure, spectrum_figure
from ..truths import m_symmetric

SOURCES = ["random", "m_symmetric", "truth", "true_set", "degenerate", "path", "points"]


def _excess_counts(n_in: int) -> dict:
    """Hand counts of the excess null directions (node 0 degenerate, all other nodes generic).

    q_zero: grad_{w_0, b_0} f = q_0 (x, 1) 1(a_0 > 0) = 0, so w_0, b_0 are n_in + 1 null
      directions; the generator v_0 = (w_0, b_0, 0) is one of them: excess n_in.
    w_zero_b_positive: node 0 is the constant relu(b_0) = b_0; grad over (b_0, q_0, c) is
      (q_0, b_0, 1), all constant: 3 parameters, 1 function: 2 null, one of them v_0: excess 1.
    shared_boundary: node 1 = 2 * node 0 in (w, b) (same boundary, same side): both nodes'
      gradients lie in span{x 1(a_0 > 0), 1(a_0 > 0)} (relu(a_0) = a_0 1(a_0 > 0) is in it):
      2 (n_in + 2) parameters, n_in + 1 functions, n_in + 3 null, minus v_0 and v_1:
      excess n_in + 1.
    dead_node: w_0 = 0, b_0 < 0: every gradient of node 0 vanishes: n_in + 2 null, minus v_0:
      excess n_in + 1.
    inactive_on_box (uniform inputs): node 0's boundary misses the box and it points away:
      as dead_node, excess n_in + 1.
    active_on_box (uniform inputs): node 0 is active on the whole box, so its gradients
      (q_0 x, q_0, a_0(x)) and c's (1) span {x_1..x_n, 1}: n_in + 3 parameters, n_in + 1
      functions, 2 null, minus v_0: excess 1.
    """
    return {"q_zero": n_in, "w_zero_b_positive": 1, "shared_boundary": n_in + 1, "dead_node": n_in + 1,
            "inactive_on_box": n_in + 1, "active_on_box": 1}


DEGENERATE_CASES = list(_excess_counts(1))


def box_excess_count(params: TwoLayer, half_width: float) -> int:
    """Hand count of the excess null directions of an otherwise generic network on the box [-a, a]^n_in.

    A node is inactive on the box iff max_box a_i = |w_i|_1 a + b_i <= 0: all its gradients
    vanish, n_in + 1 excess each.  It is fully active iff min_box a_i = b_i - |w_i|_1 a >= 0:
    k fully active nodes and c have k (n_in + 2) + 1 parameters whose gradients span only
    {x_1, .., x_n, 1}: k (n_in + 2) + 1 - (n_in + 1) null directions, minus k generators:
    k (n_in + 1) - n_in excess (for k >= 1).
    """
    w, b = np.asarray(params.w), np.asarray(params.b)
    n_in = w.shape[1]
    reach = np.abs(w).sum(1) * half_width
    inactive = int(np.sum(reach + b <= 0))
    active = int(np.sum(b - reach >= 0))
    return inactive * (n_in + 1) + (active * (n_in + 1) - n_in if active else 0)


def make_degenerate(case: str, params: TwoLayer, inputs) -> TwoLayer:
    """Make node 0 of a generic network degenerate in the named way (see ``_excess_counts``)."""
    w, b, q, c = (np.array(x, dtype=float) for x in params)
    if case == "q_zero":
        q[0] = 0.0
    elif case == "w_zero_b_positive":
        w[0], b[0] = 0.0, abs(b[0]) + 0.5
    elif case == "dead_node":
        w[0], b[0] = 0.0, -abs(b[0]) - 0.5
    elif case == "shared_boundary":
        w[1], b[1] = 2.0 * w[0], 2.0 * b[0]
    elif case in ("inactive_on_box", "active_on_box"):
        a = inputs.half_width
        direction = w[0] / np.linalg.norm(w[0])
        margin = a * np.abs(direction).sum() + 0.5
        w[0] = direction
        b[0] = -margin if case == "inactive_on_box" else margin
    else:
        raise ValueError(f"case {case!r}: expected one of {DEGENERATE_CASES}")
    return make_params(w, b, q, c, dtype=params.w.dtype)


def _group_inputs(p: Table, default):
    """A group's own [fisher.points.inputs] table (same keys as [inputs]), or the default."""
    if not p.has("inputs"):
        return default
    sub = Table({"inputs": p.data["inputs"]}, p.path)
    p.used.add("inputs")
    _, inputs, _ = read_example(sub, required=False)
    sub.done()
    return inputs


def generic_crossing_params(key, width: int, n_in: int, half_width: float = 1.0, dtype=None) -> TwoLayer:
    """Generic parameters whose every activation boundary crosses the box [-a/2, a/2]^n_in:
    w_i ~ N(0, I), b_i = -<w_i, p_i> with p_i uniform in the box, q_i ~ N(0, 1), c ~ N(0, 1)."""
    import jax

    kw, kp, kq, kc = jax.random.split(key, 4)
    w = jax.random.normal(kw, (width, n_in), dtype)
    anchor = jax.random.uniform(kp, (width, n_in), dtype, -half_width / 2, half_width / 2)
    q = jax.random.normal(kq, (width,), dtype)
    return make_params(w, -(w * anchor).sum(1), q, jax.random.normal(kc, (), dtype), dtype=dtype)


def validate(root: Table) -> dict:
    example, inputs, sigma = read_example(root, required=False)
    t = root.table("fisher", required=True)
    s = {"example": example, "inputs": inputs, "sigma": sigma, "rtol": t.get("rtol", "float", None, low=0.0)}
    groups = []
    for p in t.tables("points"):
        g = {"source": p.get("source", "str", choices=SOURCES)}
        g["label"] = p.get("label", "str", g["source"])
        g["inputs"] = _group_inputs(p, inputs)
        src = g["source"]
        if src == "random":
            g["widths"] = p.get("widths", "list[int]", low=1, high=256)
            g["count"] = p.get("count", "int", 4, low=1)
            g["scale"] = p.get("scale", "float", 1.0, low=1e-12)
            g["placement"] = p.get("placement", "str", "iid", choices=["iid", "crossing"])
        elif src == "m_symmetric":
            if g["inputs"].n_in != 2:
                p.fail("source", "an input dimension of 2 for m-symmetric truths", src)
            g["m"] = p.get("m", "list[int]", low=1, high=256)
            g["bias"] = p.get("bias", "float", -0.3)
            g["q"] = p.get("q", "float", 1.0)
        elif src in ("truth", "true_set"):
            if example is None:
                p.fail("source", f"a [truth] table for source = {src!r}", src)
            if src == "true_set":
                if example.true_set is None:
                    p.fail("source", f"an example with a known W0 (not {example.name})", src)
                g["count"] = p.get("count", "int", 11, low=2)
                g["box"] = [p.get("x_range", "range", [-2.0, 2.0]), p.get("y_range", "range", [-2.0, 2.0])]
        elif src == "degenerate":
            g["width"] = p.get("width", "int", low=2, high=256)
            g["cases"] = p.get("cases", "list[str]")
            for case in g["cases"]:
                if case not in DEGENERATE_CASES:
                    p.fail("cases", "names from " + ", ".join(DEGENERATE_CASES), g["cases"])
                if case.endswith("_on_box") and not isinstance(g["inputs"], UniformBox):
                    p.fail("cases", f"uniform inputs for {case!r} (a Gaussian has no box)", g["cases"])
        elif src in ("path", "points"):
            g["width"] = p.get("width", "int", low=1, high=256)
            D = num_params(g["width"], inputs.n_in)
            if src == "path":
                g["start"] = p.get("start", "list[float]")
                g["end"] = p.get("end", "list[float]")
                g["steps"] = p.get("steps", "int", 11, low=2)
                vectors = {"start": g["start"], "end": g["end"]}
            else:
                vectors = {}
                raw = p.data.get("params")
                p.used.add("params")
                if not (isinstance(raw, list) and raw and all(isinstance(r, list) for r in raw)):
                    p.fail("params", "a non-empty list of flat parameter lists", raw)
                g["params"] = [Table({"v": r}, p.key("params")).get("v", "list[float]") for r in raw]
                vectors = {f"params[{i}]": v for i, v in enumerate(g["params"])}
            for name, vec in vectors.items():
                if len(vec) != D:
                    raise ConfigError(f"{p.key(name)}: expected {D} numbers (D for width {g['width']}, "
                                      f"n_in {inputs.n_in}), got {len(vec)}")
        p.done()
        groups.append(g)
    if not groups:
        raise ConfigError("fisher.points: expected at least one [[fisher.points]] table")
    t.done()
    s["groups"] = groups
    return s


def describe(s: dict) -> dict:
    return {"inputs": repr(s["inputs"]), "sigma": s["sigma"], "rtol": s["rtol"],
            "truth": s["example"].name if s["example"] else None,
            "groups": [{**g, "inputs": repr(g["inputs"])} for g in s["groups"]]}


def _points(g, s, key):
    """Yield (label, params, free mask or None, expected_excess or None) for one group."""
    import jax

    ex, inputs = s["example"], g["inputs"]
    dtype = jax.numpy.zeros(()).dtype
    src = g["source"]
    if src == "random":
        for width in g["widths"]:
            for i, k in enumerate(jax.random.split(jax.random.fold_in(key, width), g["count"])):
                if g["placement"] == "iid":
                    params = init_params(k, width, inputs.n_in, g["scale"], dtype)
                    expected = box_excess_count(params, inputs.half_width) if isinstance(inputs, UniformBox) else None
                else:
                    half = inputs.half_width if isinstance(inputs, UniformBox) else inputs.std
                    params = generic_crossing_params(k, width, inputs.n_in, half, dtype)
                    expected = 0
                yield f"random d={width} #{i}", params, None, expected
    elif src == "m_symmetric":
        for m in g["m"]:
            yield f"{m}-symmetric", m_symmetric(m, g["bias"], g["q"]), None, 0
    elif src == "truth":
        yield ex.name, ex.model.base, ex.model.free, None
    elif src == "true_set":
        curve = np.concatenate(ex.true_set(tuple(g["box"]), 400))
        for i, th in enumerate(curve[np.linspace(0, len(curve) - 1, g["count"]).astype(int)]):
            yield f"W0 #{i} {np.round(th, 3).tolist()}", ex.model.embed(th), ex.model.free, 0
    elif src == "degenerate":
        counts = _excess_counts(inputs.n_in)
        for case in g["cases"]:
            half = inputs.half_width if isinstance(inputs, UniformBox) else 1.0
            base = generic_crossing_params(jax.random.fold_in(key, DEGENERATE_CASES.index(case)), g["width"],
                                           inputs.n_in, half, dtype)
            yield case, make_degenerate(case, base, inputs), None, counts[case]
    elif src == "path":
        start, end = np.array(g["start"]), np.array(g["end"])
        for tau in np.linspace(0, 1, g["steps"]):
            yield f"path t={tau:.2f}", from_flat((1 - tau) * start + tau * end, g["width"], inputs.n_in), None, None
    elif src == "points":
        for i, vec in enumerate(g["params"]):
            yield f"point {i}", from_flat(np.array(vec), g["width"], inputs.n_in), None, None


def _max_finite(values) -> float | None:
    """Largest |I v_i| over the generators inside the (restricted) model; None if there are none."""
    finite = np.asarray(values)[np.isfinite(values)]
    return float(finite.max()) if finite.size else None


def run(s: dict, outdir, key, progress: bool = True) -> dict:
    import jax
    from tqdm.auto import tqdm

    rows = []
    todo = []
    for gi, g in enumerate(s["groups"]):
        todo += [(g["label"], g["inputs"], *pt) for pt in _points(g, s, jax.random.fold_in(key, gi))]
    for group, inputs, label, params, free, expected in tqdm(todo, desc="fisher", disable=not progress, leave=False):
        acc = null_accounting(params, inputs, s["sigma"], s["rtol"], free=free)
        D = acc.num_params
        d = params.width
        rows.append({
            "group": group, "label": label, "width": d, "D": D,
            "bound": D - d if free is None else D - acc.generator_rank,
            "rank": acc.rank, "nullity": acc.nullity, "generator_rank": acc.generator_rank,
            "excess": acc.excess, "expected_excess": expected,
            "max_generator_residual": _max_finite(acc.generator_residuals),
            "rtol": s["rtol"] if s["rtol"] is not None else default_rtol(D, acc.spectrum.dtype),
            "spectrum": acc.spectrum, "params": to_flat(params),
        })
    np.savez_compressed(outdir / "arrays.npz", **{f"spectrum_{i}": r["spectrum"] for i, r in enumerate(rows)},
                        **{f"params_{i}": np.asarray(r["params"]) for i, r in enumerate(rows)})
    rank_vs_bound_figure(outdir / "rank_vs_bound.png", rows)
    spectrum_figure(outdir / "spectrum.png", rows)
    summary = {}
    for g in dict.fromkeys(r["group"] for r in rows):
        sel = [r for r in rows if r["group"] == g]
        checked = [r for r in sel if r["expected_excess"] is not None]
        summary[g] = {
            "points": len(sel),
            "fraction_at_bound": float(np.mean([r["rank"] == r["bound"] for r in sel])),
            "matches_hand_count": (float(np.mean([r["excess"] == r["expected_excess"] for r in checked]))
                                   if checked else None),
        }
    public = [{k: v for k, v in r.items() if k not in ("spectrum", "params")} for r in rows]
    return {"summary": summary, "points": public}
