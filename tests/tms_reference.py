"""Independent references for the TMS tests: the population loss and the Fisher information by
Gauss-Legendre quadrature on the pieces between kinks (NumPy float64, the model's formula
f = relu((x W^T) W + b) evaluated at the nodes; no closed form shared with slt_relu.tms)."""
import jax
import numpy as np
from numpy.polynomial.legendre import leggauss


def pieces(W, b, i):
    """The breakpoints of input mu e_i in [0, 1]: 0, 1 and every kink -b_j / G_ji inside."""
    W, b = np.asarray(W, np.float64), np.asarray(b, np.float64)
    G = W.T @ W
    cuts = {0.0, 1.0}
    for j in range(len(b)):
        if G[j, i] != 0:
            m = -b[j] / G[j, i]
            if 0 < m < 1:
                cuts.add(float(m))
    return sorted(cuts)


def quadrature_loss(W, b, points: int = 12) -> float:
    """(1/c) sum_i int_0^1 ||mu e_i - f(mu e_i)||^2 dmu, each piece by a points-point Gauss-Legendre rule
    (exact to rounding: the integrand is a polynomial of degree 2 on every piece)."""
    W, b = np.asarray(W, np.float64), np.asarray(b, np.float64)
    c = len(b)
    nodes, weights = leggauss(points)
    total = 0.0
    for i in range(c):
        cuts = pieces(W, b, i)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            mu = lo + (hi - lo) * (nodes + 1) / 2
            X = mu[:, None] * np.eye(c)[i]
            f = np.maximum((X @ W.T) @ W + b, 0.0)
            total += np.sum((hi - lo) / 2 * weights * np.sum((X - f) ** 2, axis=1))
    return total / c


def quadrature_fisher(params, points: int = 6) -> np.ndarray:
    """E_x[J^T J] with J = d forward / d flat by jax.jacfwd at Gauss-Legendre nodes inside each piece."""
    from slt_relu.models.tms import forward, from_flat, to_flat

    W, b = np.asarray(params.W, np.float64), np.asarray(params.b, np.float64)
    c = len(b)
    flat = to_flat(params)
    jac = jax.jit(jax.jacfwd(lambda w, x: forward(from_flat(w, c), x)))
    nodes, weights = leggauss(points)
    F = np.zeros((flat.size, flat.size))
    for i in range(c):
        cuts = pieces(W, b, i)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            for t, wt in zip(nodes, weights):
                mu = lo + (hi - lo) * (t + 1) / 2
                J = np.asarray(jac(flat, mu * np.eye(c)[i]), np.float64)
                F += (hi - lo) / 2 * wt * J.T @ J
    return F / c
