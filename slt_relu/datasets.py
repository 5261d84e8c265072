"""Real data sets for the deep networks of :mod:`slt_relu.mlp`, shipped offline (nothing is downloaded).

``load_digits``: scikit-learn's copy of the UCI optical recognition of handwritten digits test set (Alpaydin &
Kaynak 1998), 1797 images of 8 x 8 pixels with grey levels 0..16 and labels 0..9 (174 to 183 per class), the
small offline stand-in for MNIST in Sattelberg et al. (2020)'s experiments (:mod:`slt_relu.local_maps`).
scikit-learn is the optional extra ``data`` (``pip install "slt_relu[data]"``), imported on first use.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_count

__all__ = ["Digits", "load_digits", "one_hot"]

NUM_DIGITS = 1797            # sklearn.datasets.load_digits: the number of images it ships


class Digits(NamedTuple):
    """A train / test split of the 8 x 8 digits, pixels scaled to [0, 1].

    Attributes:
        x_train: (n_train, 64) pixels / 16, row-major 8 x 8 images.
        y_train: (n_train,) int64 labels in 0..9.
        x_test: (n_test, 64) pixels / 16.
        y_test: (n_test,) int64 labels; n_train + n_test = 1797.
        train_index: (n_train,) the training images' rows in ``sklearn.datasets.load_digits().data``.
        test_index: (n_test,) the test images' rows there (disjoint from train_index).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    train_index: np.ndarray
    test_index: np.ndarray

    @property
    def num_classes(self) -> int:
        """The number of classes, ten (the digits 0 to 9)."""
        return 10


def _as_key(key) -> jax.Array:
    """A PRNG key from an int seed (``jax.random.PRNGKey``), or the key itself; None is seed 0."""
    if key is None:
        return jax.random.PRNGKey(0)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.PRNGKey(int(key))
    if isinstance(key, jax.Array) and (jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,)):
        return key
    raise ValueError(f"key: expected an int seed or a JAX PRNG key, got {key!r}")


def load_digits(*, test_fraction: float = 0.25, key=None, stratify: bool = True, dtype=None) -> Digits:
    """The 8 x 8 handwritten digits, pixels / 16 in [0, 1], split into train and test by a seeded permutation.

    The split: a permutation of the 1797 images from ``key`` (``jax.random.permutation``); with ``stratify`` each
    class c (n_c images) puts its first round(test_fraction * n_c) permuted images, clipped to [1, n_c - 1], in the
    test set, so every class keeps its share on both sides; without it the first round(test_fraction * 1797)
    permuted images are the test set.  Both sides keep the permuted order.  The same key gives the same split.

    Args:
        test_fraction: the share of test images, in (0, 1) (default 0.25: 450 test images, 1347 training).
        key: an int seed or a JAX PRNG key (default None: seed 0).
        stratify: split class by class (default True).
        dtype: the pixels' dtype (default: JAX's default float, float64 with ``jax_enable_x64``).

    Returns:
        Digits(x_train (n_train, 64), y_train (n_train,), x_test (n_test, 64), y_test (n_test,), train_index,
        test_index): NumPy arrays, labels int64.

    Raises:
        ImportError: scikit-learn is missing (the extra ``data``).

    References:
        Alpaydin & Kaynak 1998 (UCI optical recognition of handwritten digits); Pedregosa et al. 2011
        (scikit-learn's ``load_digits``).
    """
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as err:                                          # pragma: no cover
        raise ImportError('load_digits needs scikit-learn: pip install "slt_relu[data]"') from err
    f = float(test_fraction) if isinstance(test_fraction, (int, float, np.floating)) else np.nan
    if not 0.0 < f < 1.0:
        raise ValueError(f"test_fraction: expected a number in (0, 1), got {test_fraction!r}")
    dtype = np.dtype(dtype or jnp.zeros(()).dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype: expected a floating dtype, got {dtype}")
    bunch = sklearn_digits()
    x, y = np.asarray(bunch.data, np.float64) / 16.0, np.asarray(bunch.target, np.int64)
    order = np.asarray(jax.random.permutation(_as_key(key), len(y)))
    if stratify:
        test = np.zeros(len(y), bool)
        for c in np.unique(y):
            members = order[y[order] == c]                              # class c in permuted order
            n_test = int(np.clip(round(f * len(members)), 1, len(members) - 1))
            test[members[:n_test]] = True
        test_index, train_index = order[test[order]], order[~test[order]]
    else:
        n_test = int(np.clip(round(f * len(y)), 1, len(y) - 1))
        test_index, train_index = order[:n_test], order[n_test:]
    return Digits(x[train_index].astype(dtype), y[train_index], x[test_index].astype(dtype), y[test_index],
                  train_index, test_index)


def one_hot(labels, num_classes: int = 10, dtype=None) -> np.ndarray:
    """One-hot rows e_{y_k}: (n,) integer labels in [0, num_classes) -> (n, num_classes).

    Args:
        labels: (n,) integer labels.
        num_classes: the number of classes, >= 1 (default 10).
        dtype: the result's dtype (default: JAX's default float).

    Returns:
        (n, num_classes) array with a single 1 per row.
    """
    num_classes = check_count(num_classes, "num_classes")
    y = np.asarray(labels)
    if y.ndim != 1 or y.dtype.kind not in "iu" or (y.size and (y.min() < 0 or y.max() >= num_classes)):
        raise ValueError(f"labels: expected (n,) integers in [0, {num_classes}), got dtype {y.dtype}, shape {y.shape}")
    return np.eye(num_classes, dtype=np.dtype(dtype or jnp.zeros(()).dtype))[y]
