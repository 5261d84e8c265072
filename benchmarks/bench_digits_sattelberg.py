"""Sattelberg et al. (2020)'s Tables 1 and 2 on real data: ReLU MLPs on scikit-learn's 8 x 8 digits.

Trains three ReLU classifiers with optax (Adam, cross-entropy, batches of 64) on 1347 training digits (a stratified
split, seed 0; slt_relu.datasets.load_digits) and measures on the 450 test digits:

- Table 1 (slt_relu.local_maps.cluster_accuracy): each output's local affine maps at the training digits clustered
  by k-means into k centres, every test digit classified by the centres nearest its own maps;
- Table 2 (slt_relu.local_maps.map_between): the least-squares map M_j of network A's dual points onto network B's
  (fitted on the training digits), A's test maps sent through it, and the accuracy of the result (diagonal: B's
  own accuracy), with the mean R^2 of the mapped dual points at the test digits.

The paper's MNIST numbers (correct test labels out of 10,000) are printed beside ours, copied from
Sattelberg, Cavalieri, Kirby, Peterson & Beveridge, "Locally linear attributes of ReLU neural networks" (2020),
Tables 1 and 2.  The networks are the paper's dense network (one hidden layer, 784-128-10 on MNIST) scaled to
64 pixels, a second one from another seed, and a deeper one; the paper's other three are convolutional.

    .venv/bin/python benchmarks/bench_digits_sattelberg.py [--steps 1000] [--x64]
"""
from __future__ import annotations

import os

# the least-squares problems here are small (1347 x 65): OpenBLAS's threads only wait on each other, and on a busy
# machine a 5 ms lstsq took 0.3-0.7 s with them (measured on 2 cores under load)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

KS = (1, 2, 5, 10, 20, 50, 100)
CORNER = "from \\ to"
NETWORKS = {"dense": ((64, 64, 10), 1), "dense'": ((64, 64, 10), 2), "deep": ((64, 32, 32, 10), 3)}

# Sattelberg et al. 2020, Table 1: correct MNIST test labels (of 10,000) with k clusters per output
PAPER_TABLE1 = {"k": ("Original", 1, 10, 100, 1000, 10000),
                "Dense": (9603, 8679, 9231, 9434, 9508, 9554), "Conv": (9807, 6766, 8639, 9382, 9586, 9696),
                "Inception": (9908, 974, 9660, 9689, 9695, 9752), "ResNet": (9892, 1432, 8166, 8458, 8982, 9381)}
# Sattelberg et al. 2020, Table 2: correct MNIST test labels after the map from the row's network to the column's
PAPER_TABLE2 = {"Dense": (9603, 9536, 9290, 9068), "Conv": (9567, 9807, 9662, 9588),
                "Inception": (8868, 9488, 9908, 9536), "ResNet": (9320, 9738, 9838, 9892)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000, help="Adam steps per network (batches of 64)")
    ap.add_argument("--x64", action="store_true", help="float64 throughout (default: float32, as the paper's PyTorch)")
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", args.x64)
    from slt_relu.datasets import load_digits
    from slt_relu.local_maps import cluster_accuracy, map_between
    from slt_relu.mlp import train_classifier

    start = time.perf_counter()
    data = load_digits(key=0)
    n_test = len(data.y_test)
    print(f"digits: {len(data.y_train)} training, {n_test} test images of 8 x 8 pixels, {data.x_train.dtype}")
    nets = {}
    for name, (widths, seed) in NETWORKS.items():
        t = time.perf_counter()
        nets[name], loss = train_classifier(jax.random.PRNGKey(seed), widths, data.x_train, data.y_train,
                                            steps=args.steps, learning_rate=3e-3, batch_size=64)
        print(f"  {name:7s} {'-'.join(map(str, widths)):12s} trained in {time.perf_counter() - t:4.1f} s, "
              f"training loss {loss:.4f}")

    t = time.perf_counter()
    tables = {name: cluster_accuracy(jax.random.PRNGKey(10), params, data.x_test, data.y_test, KS,
                                     fit_x=data.x_train) for name, params in nets.items()}
    print(f"\nTable 1 on the digits: correct test labels of {n_test} with k centres per output "
          f"({time.perf_counter() - t:.1f} s)")
    print(f"  {'k':>8s}" + "".join(f"{name:>14s}" for name in nets))
    print(f"  {'Original':>8s}" + "".join(f"{round(tab.network_accuracy * n_test):>7d} ({tab.network_accuracy:5.1%})"
                                          for tab in tables.values()))
    for i, k in enumerate(KS):
        print(f"  {k:>8d}" + "".join(f"{tab.correct[i]:>7d} ({tab.accuracy[i]:5.1%})" for tab in tables.values()))
    print(f"  {'regions':>8s}" + "".join(f"{tab.regions:>14d}" for tab in tables.values())
          + f"   (distinct activation patterns among the {len(data.y_train)} training digits)")

    print("\nTable 1 of Sattelberg et al. 2020 (MNIST, correct of 10,000 test labels):")
    print(f"  {'k':>8s}" + "".join(f"{name:>10s}" for name in list(PAPER_TABLE1)[1:]))
    for i, k in enumerate(PAPER_TABLE1["k"]):
        print(f"  {k!s:>8s}" + "".join(f"{PAPER_TABLE1[name][i]:>10d}" for name in list(PAPER_TABLE1)[1:]))

    t = time.perf_counter()
    maps = {(a, b): map_between(nets[a], nets[b], data.x_test, data.y_test, fit_x=data.x_train)
            for a in nets for b in nets}
    print(f"\nTable 2 on the digits: correct test labels of {n_test} after the map from the row's network to the "
          f"column's [mean R^2 of the mapped dual points at the test digits] ({time.perf_counter() - t:.1f} s)")
    print(f"  {CORNER:>9s}" + "".join(f"{b:>20s}" for b in nets))
    for a in nets:
        print(f"  {a:>9s}" + "".join(f"{round(maps[a, b].accuracy * n_test):>7d} ({maps[a, b].accuracy:5.1%}) "
                                     f"[{np.mean(maps[a, b].r2):4.2f}]" for b in nets))
    print("\nTable 2 of Sattelberg et al. 2020 (MNIST, correct of 10,000 test labels, from the row's network to the "
          "column's):")
    print(f"  {CORNER:>9s}" + "".join(f"{name:>10s}" for name in PAPER_TABLE2))
    for a, row in PAPER_TABLE2.items():
        print(f"  {a:>9s}" + "".join(f"{v:>10d}" for v in row))
    print(f"\nwall time {time.perf_counter() - start:.1f} s (JAX {jax.__version__}, {jax.devices()[0].platform}, "
          f"{os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
