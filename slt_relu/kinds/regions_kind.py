"""Experiment kind ``regions``: linear regions and local affine maps (Sattelberg et al. 2020).

The XOR network is relu(x + y + 1) - 2 relu(x + y) - 1 (Sattelberg eq. 3.2): its regions,
dual points and k-means clusters; a wider network trained on XOR data and the affine map between
the two (Fig. 11); a 3-layer network trained on circle (r < inner) vs annulus (Fig. 5); regions
along random segments against the number of neurons (Hanin & Rolnick 2019).  Training:
full-batch Adam (optax) on the squared error to labels +-1.  Outputs: xor_regions.png,
xor_affine_map.png, annulus_regions.png, annulus_layers.png, lines.png, results.nc (one Dataset: the
picture grid as coordinates x, y (``resolution`` points on [-half_width, half_width]); the parameters of
the XOR, wide and annulus networks (PREFIX = xor, wide, annulus): PREFIX_Wl (PREFIX_hiddenl,
PREFIX_hidden(l-1)) and PREFIX_bl (PREFIX_hiddenl,) for l = 1..L, layer 1 reading ``input`` and layer L
writing PREFIX_out; the XOR network's distinct dual points, labels and values at the corners and k-means
errors, the affine map, the annulus network's first training points, its zero sets per layer, regions
along lines per ``lines_width``; the scalars as attributes), metrics.json.  Every figure is drawn from
that Dataset (``slt_relu.kinds.regions_report``): the pre-activations, activation patterns, outputs and
dual points on the grid are computed again from the stored parameters, with the functions the run uses.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from ..workflow.settings import SCALE_BOUND, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment
from .regions_report import dataset, figures, grid_data

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

SHOWN_SAMPLES = 300           # the annulus network's training points drawn in its picture
XOR_WEIGHTS = ([[1.0, 1.0], [1.0, 1.0]], [1.0, 0.0], [[1.0, -2.0]], [-1.0])
Positive = Annotated[int, Field(ge=1)]


class XorWide(Section):
    width: int = Field(20, ge=1, le=4096, description="width of the network trained on XOR data")
    steps: int = Field(2000, ge=0, description="Adam steps")
    learning_rate: float = Field(0.02, ge=0, le=SCALE_BOUND, description="Adam's learning rate")
    samples: int = Field(400, ge=4, description="training points")


class Annulus(Section):
    widths: tuple[Positive, ...] = Field((2, 8, 8, 8, 1), description="[2, hidden widths..., 1]")
    samples: int = Field(2000, ge=10, description="training points")
    steps: int = Field(4000, ge=0, description="Adam steps")
    learning_rate: float = Field(0.01, ge=0, le=SCALE_BOUND, description="Adam's learning rate")
    inner: float = Field(0.5, gt=0, le=SCALE_BOUND, description="radius of the inner disc")
    annulus: tuple[float, float] = Field((0.7, 1.0), description="[inner, outer] radii of the annulus")

    @model_validator(mode="after")
    def _shape(self):
        w = self.widths
        if len(w) < 3 or w[0] != 2 or w[-1] != 1:
            raise ValueError(f"widths: expected [2, hidden widths..., 1] with at least one hidden layer, got {list(w)}")
        if not self.annulus[0] < self.annulus[1]:
            raise ValueError(f"annulus: expected [low, high] with low < high, got {list(self.annulus)}")
        if not self.inner < self.annulus[0]:
            raise ValueError(f"inner: expected a radius below the annulus' inner radius {self.annulus[0]}, "
                             f"got {self.inner}")
        return self


class Lines(Section):
    n_in: int = Field(4, ge=1, description="input dimension")
    widths: tuple[Positive, ...] = Field((8, 16, 32, 64), min_length=1, description="hidden widths")
    hidden_layers: int = Field(3, ge=1, le=20, description="hidden layers")
    lines: int = Field(30, ge=2, description="random segments per width")
    bias_std: float = Field(0.3, ge=0, le=SCALE_BOUND, description="biases N(0, bias_std^2)")
    length: float = Field(4.0, gt=0, le=SCALE_BOUND, description="segment length")


class RegionsSettings(Section):
    half_width: float = Field(1.5, gt=0, le=SCALE_BOUND, description="the picture box [-a, a]^2")
    resolution: int = Field(401, ge=5, le=2001, description="grid points per axis (pictures, grid counts, dual points)")
    clusters: tuple[Positive, ...] = Field((1, 2, 3), min_length=1, description="k-means centres for the XOR "
                                           "network's dual points")
    xor_wide: XorWide = XorWide()
    annulus: Annulus = Annulus()
    lines: Lines = Lines()


class Settings(Experiment):
    kind: Literal["regions"]
    regions: RegionsSettings


def resolve(s: Settings, raw=None) -> RegionsSettings:
    return s.regions


def run(s: RegionsSettings, key, ctx) -> Output:
    import jax
    import jax.numpy as jnp

    from ..mlp import MLP, Dense, dual_points, init_mlp, mlp_forward, train_mlp
    from ..regions import affine_map_between, cluster_affine_maps, count_linear_regions, distinct_patterns

    a, R = s.half_width, s.resolution
    k_xor, k_wide, k_ann, k_lines = jax.random.split(key, 4)
    metrics = {}

    # --- Sattelberg's XOR network: regions (exact), dual points, clusters
    w1, b1, w2, b2 = (jnp.asarray(v, jnp.zeros(()).dtype) for v in XOR_WEIGHTS)
    xor = MLP((Dense(w1, b1), Dense(w2, b2)))
    pts, _, pats, _ = grid_data(xor, a, R)
    C = np.asarray(dual_points(xor, pts))
    clusters = {}
    for k in s.clusters:
        if k <= len(C):
            got = cluster_affine_maps(jax.random.fold_in(k_xor, k), xor, pts, k)
            clusters[str(k)] = {"rms_error": got.rms_error, "sign_agreement": got.sign_agreement}
    corners = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    metrics["xor"] = {
        "network": "relu(x + y + 1) - 2 relu(x + y) - 1",
        "regions_in_box_exact": count_linear_regions(xor, half_width=a),
        "regions_on_grid": distinct_patterns(pats.reshape(R * R, -1))[0],
        "regions_along_diagonal": count_linear_regions(xor, segment=([-a, -a], [a, a])),
        "patterns_seen": sorted({"".join("1" if v else "0" for v in p) for p in pats.reshape(-1, 2)}),
        "distinct_dual_points": int(len(np.unique(np.round(C, 9), axis=0))),
        "dual_points": np.unique(np.round(C, 9), axis=0),
        "values_at_corners": np.asarray(mlp_forward(xor, jnp.asarray(corners)))[:, 0],
        "clusters": clusters,
    }

    # --- a wide network trained on XOR data, and the affine map between the two networks' dual points
    wx = s.xor_wide
    kx, kn = jax.random.split(k_wide)
    labels = jnp.asarray([-1.0, -1.0, 1.0, 1.0])
    which = jax.random.randint(kx, (wx.samples,), 0, 4)
    xs = jnp.asarray(corners)[which] + 0.1 * jax.random.normal(kn, (wx.samples, 2))
    wide, wide_loss = train_mlp(k_wide, (2, wx.width, 1), xs, labels[which], wx.steps, wx.learning_rate)
    C2 = np.asarray(dual_points(wide, pts))
    M, resid = affine_map_between(C, C2)
    Xt = np.concatenate([np.asarray(pts), np.ones((len(C), 1))], 1)
    mapped = np.sum((C @ M) * Xt, 1)
    f2 = np.asarray(mlp_forward(wide, pts))[:, 0]
    metrics["xor_affine_map"] = {
        "wide_width": wx.width, "wide_train_loss": wide_loss,
        "wide_sign_accuracy_on_corners": float(np.mean(np.sign(np.asarray(mlp_forward(wide, jnp.asarray(corners)))[:, 0])
                                                       == np.asarray(labels))),
        "M": M, "relative_residual": resid, "relative_residual_wide_to_xor": affine_map_between(C2, C)[1],
        "sign_agreement_mapped_vs_wide": float(np.mean(np.sign(mapped) == np.sign(f2))),
        "wide_regions_in_box_exact": count_linear_regions(wide, half_width=a),
    }

    # --- circle vs annulus, trained; regions and layer-by-layer boundaries (Figure 5)
    an = s.annulus
    k1, k2, k3 = jax.random.split(k_ann, 3)
    inside = jax.random.bernoulli(k1, 0.5, (an.samples,))
    lo, hi = an.annulus
    radius = jnp.where(inside, an.inner * jnp.sqrt(jax.random.uniform(k2, (an.samples,))),
                       jnp.sqrt(lo ** 2 + (hi ** 2 - lo ** 2) * jax.random.uniform(k2, (an.samples,))))
    angle = 2 * jnp.pi * jax.random.uniform(k3, (an.samples,))
    xa = jnp.stack([radius * jnp.cos(angle), radius * jnp.sin(angle)], 1)
    ya = jnp.where(inside, 1.0, -1.0)
    net, ann_loss = train_mlp(k_ann, tuple(an.widths), xa, ya, an.steps, an.learning_rate)
    apts, apre, apats, _ = grid_data(net, a, R)
    CA = np.asarray(dual_points(net, apts))
    metrics["annulus"] = {
        "widths": an.widths, "train_loss": ann_loss,
        "train_accuracy": float(np.mean(np.sign(np.asarray(mlp_forward(net, xa))[:, 0]) == np.asarray(ya))),
        "regions_on_grid": distinct_patterns(apats.reshape(R * R, -1))[0],
        "distinct_dual_points_on_grid": int(len(np.unique(np.round(CA, 9), axis=0))),
        "neurons_with_a_zero_set_in_box": [int(sum(p[..., k].min() < 0 < p[..., k].max() for k in range(p.shape[-1])))
                                           for p in apre],
    }

    # --- regions along random lines vs neurons (Hanin & Rolnick)
    ln = s.lines
    rng_keys = jax.random.split(k_lines, len(ln.widths))
    neurons, means, ses = [], [], []
    for n, kw in zip(ln.widths, rng_keys):
        widths = (ln.n_in,) + (n,) * ln.hidden_layers + (1,)
        counts = []
        for j in range(ln.lines):
            kp, ka, kd = jax.random.split(jax.random.fold_in(kw, j), 3)
            p = init_mlp(kp, widths, bias_std=ln.bias_std)
            centre = np.array(jax.random.normal(ka, (ln.n_in,)), np.float64)
            d = np.array(jax.random.normal(kd, (ln.n_in,)), np.float64)
            d /= np.linalg.norm(d)
            counts.append(count_linear_regions(p, segment=(centre - ln.length / 2 * d, centre + ln.length / 2 * d)))
        neurons.append(n * ln.hidden_layers)
        means.append(float(np.mean(counts)))
        ses.append(float(np.std(counts) / np.sqrt(len(counts))))
    N, m = np.array(neurons, float), np.array(means)
    slope = float(np.sum(N * (m - 1)) / np.sum(N * N))
    metrics["lines"] = {"neurons": neurons, "mean_regions": means, "se": ses, "slope_per_neuron": slope,
                        "regions_per_neuron": list((m - 1) / N)}
    pictures = {"xor_label": np.asarray(labels), "annulus_sample_point": np.asarray(xa[:SHOWN_SAMPLES]),
                "annulus_sample_label": np.asarray(ya[:SHOWN_SAMPLES])}
    ds = dataset(metrics, s, corners, {"xor": xor, "wide": wide, "annulus": net}, pictures)
    return Output(metrics, ds)


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    r = s.regions
    widest = max([r.xor_wide.width, *r.annulus.widths, *r.lines.widths])
    return [Need("regions.resolution", "the activation patterns of the picture's grid",
                 r.resolution ** 2 * widest * max(len(r.annulus.widths), r.lines.hidden_layers)),
            Need("regions.lines.n_in, regions.lines.widths", "one network's weights",
                 max(r.lines.widths) ** 2 * r.lines.hidden_layers + max(r.lines.widths) * r.lines.n_in)]


def headline(metrics: dict) -> list[str]:
    """The XOR network's regions, the trained circle-vs-annulus network's, regions along random lines."""
    lines = []
    if "xor" in metrics:
        x = metrics["xor"]
        lines.append(f"XOR network: {x['regions_in_box_exact']} regions in the box (grid {x['regions_on_grid']}), "
                     f"patterns {', '.join(x['patterns_seen'])}")
    if "annulus" in metrics:
        a = metrics["annulus"]
        lines.append(f"circle vs annulus {a['widths']}: train accuracy {a['train_accuracy']:.3f}, "
                     f"{a['regions_on_grid']} regions on the grid")
    if "lines" in metrics:
        ln = metrics["lines"]
        lines.append("regions along random segments: " + ", ".join(f"{r:.1f} ({n} neurons)" for n, r in
                                                                   zip(ln["neurons"], ln["mean_regions"]))
                     + f"; {ln['slope_per_neuron']:.2f} per neuron")
    return lines


KIND = register_kind(Kind("regions", Settings, resolve, run, headline,
                          description=first_line(__doc__), memory=memory, figures=figures))
