"""Exact linear regions of deep ReLU networks on 2-D slices against fine grids, and the pictures.

For random He-initialised MLPs (2 inputs; depth 3-5, widths 8-64; biases N(0, 0.5^2)) on the square [-1, 1]^2,
``slt_relu.regions.exact_regions_2d`` (polygon subdivision, exact) against the number of distinct activation
patterns on grids of 100^2, 400^2 and 1600^2 points (a lower bound that converges as the grid refines: regions
thinner than the spacing are missed), with the time of each; then a picture: the regions coloured by pattern and
the zero sets of each layer (Sattelberg et al. 2020's figures; Hanin & Rolnick 2019), and the regions of one network
at four checkpoints of its training (the regions along training).

    .venv/bin/python benchmarks/bench_regions_exact.py [--figure regions.png]

Prints a row per network: widths, exact count (seconds), the grid counts (seconds) and the share of the exact count
each grid finds.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from slt_relu.mlp import Dense, MLP, init_mlp, train_mlp
from slt_relu.regions import count_regions_grid, exact_regions_2d

NETWORKS = [(2, 8, 8, 1), (2, 16, 16, 16, 1), (2, 10, 10, 10, 10, 1), (2, 32, 32, 1), (2, 64, 64, 1),
            (2, 16, 16, 16, 16, 1)]


def network(key, widths):
    """He weights, biases N(0, 0.5^2) (so the zero sets cross the square rather than all passing through 0)."""
    k1, k2 = jax.random.split(key)
    p = init_mlp(k1, widths, dtype=jnp.float64)
    keys = jax.random.split(k2, len(p.layers))
    return MLP(tuple(Dense(L.w, 0.5 * jax.random.normal(k, L.b.shape, jnp.float64)) for L, k in zip(p.layers, keys)))


def draw(ax, regions, title, zero_sets=True):
    """The polygons coloured by their pattern (a colour per region), the layers' zero sets on top."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PolyCollection

    rng = np.random.default_rng(0)
    ax.add_collection(PolyCollection(regions.polygons, facecolors=plt.cm.tab20(rng.integers(0, 20, regions.count)),
                                     edgecolors="none"))
    if zero_sets:
        for layer, segs in enumerate(regions.zero_sets):
            ax.add_collection(LineCollection(segs, colors=f"C{layer}", linewidths=0.6, label=f"layer {layer + 1}"))
    ax.set_xlim(-1, 1)
    ax.set_ylim(-1, 1)
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--figure", default=None)
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", True)
    origin, u, v = np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0])
    print(f"{'widths':>22} {'exact':>7} {'(s)':>6} " + " ".join(f"{f'grid {r}^2':>11} {'(s)':>5} {'share':>6}"
                                                                 for r in (100, 400, 1600)))
    nets = []
    for i, w in enumerate(NETWORKS):
        p = network(jax.random.PRNGKey(i), w)
        t = time.time()
        ex = exact_regions_2d(p, origin, u, v, 1.0)
        te = time.time() - t
        cells = []
        for res in (100, 400, 1600):
            count_regions_grid(p, 1.0, res)                        # compile
            t = time.time()
            g = count_regions_grid(p, 1.0, res)
            cells.append(f"{g:11d} {time.time() - t:5.2f} {g / ex.count:6.1%}")
            assert g <= ex.count, "a grid found more patterns than the exact count"
        print(f"{'-'.join(map(str, w)):>22} {ex.count:7d} {te:6.2f} " + " ".join(cells))
        nets.append((w, ex))
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 4, figsize=(16, 8.6), constrained_layout=True)
        for ax, (w, ex) in zip(axes[0], nets[:3]):
            draw(ax, ex, f"{'-'.join(map(str, w))}: {ex.count} regions, zero sets by layer")
        axes[0][0].legend(fontsize=7, loc="lower left")
        draw(axes[0][3], nets[1][1], f"{'-'.join(map(str, nets[1][0]))}: the regions alone", zero_sets=False)
        # one network along training: fit sin(3 x1) cos(2 x2) on the square
        x = jax.random.uniform(jax.random.PRNGKey(9), (512, 2), jnp.float64, -1, 1)
        y = jnp.sin(3 * x[:, 0]) * jnp.cos(2 * x[:, 1])
        for ax, steps in zip(axes[1], (0, 100, 1000, 5000)):
            p, _ = train_mlp(jax.random.PRNGKey(3), (2, 16, 16, 1), x, y, steps, 1e-2)
            ex = exact_regions_2d(p, origin, u, v, 1.0)
            draw(ax, ex, f"2-16-16-1 fitting sin(3x1) cos(2x2): step {steps}, {ex.count} regions")
        fig.suptitle("Exact activation regions of ReLU networks on [-1, 1]^2 (slt_relu.regions.exact_regions_2d)")
        fig.savefig(args.figure, dpi=110)


if __name__ == "__main__":
    main()
