"""A low-rank GP prior through m inducing inputs, for training sets too large for the n x n Gram matrix.

With inducing inputs Z (m rows) and the unit-amplitude shape ``base`` of the
kernel, the Nystrom approximation of the shape is

    Q = K_nm K_mm^-1 K_mn = U U^T,  U = K_nm L_mm^-T,  L_mm L_mm^T = K_mm + jitter I,

and the prior K = k0 base + k_b 1 1^T is replaced by

    K ~= V V^T + diag(d),  V = [sqrt(k0) U, sqrt(k_b) 1]   (n x (m + 1)),

with the offset kept exact as one more column. ``kind`` chooses d:

* ``"fitc"`` (the fully independent training conditional; Snelson &
  Ghahramani 2006): d = k0 (diag(base) - diag(Q)), so every prior variance
  K_ii is exact and only the correlations are low-rank;
* ``"dtc"`` (the deterministic training conditional / subset of regressors):
  d = 0, the plain Nystrom prior.

The theta_i then read theta = V w + eps, w ~ N(0, I), eps_i ~ N(0, d_i)
independent: every computation over them costs O(n m^2) time and O(n m)
memory (theory: "Large data: a low-rank prior").
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from ._precision import float64
from ._validation import check_inputs, check_kernel
from .compilation import jit
from .hyperparameters import kernel_at
from .kernels import Kernel

Array = jax.Array

__all__ = [
    "LowRankPrior",
    "KINDS",
    "INDUCING_METHODS",
    "inducing_inputs",
    "low_rank_prior",
    "low_rank_prior_at",
    "pivoted_cholesky",
]

KINDS = ("fitc", "dtc")
#: jitter added to the unit-amplitude K_mm, relative to its mean diagonal (FITC's d absorbs what it removes)
INDUCING_JITTER = 1e-8


class LowRankPrior(NamedTuple):
    """The prior covariance V V^T + diag(d) of theta at n inputs; V is (n, r), d (n,) is >= 0."""

    V: Array
    d: Array


@jit(static_argnames=("kind",))
def low_rank_prior(kernel: Kernel, X: Array, Z: Array, kind: str = "fitc") -> LowRankPrior:
    """The low-rank prior of ``kernel`` at the rows of X through the inducing inputs Z (module docstring); one
    compiled program per input shapes where it is called on concrete values."""
    base = kernel.replace(amplitude=1.0, offset=0.0)
    K_mm = base(Z)
    jitter = INDUCING_JITTER * jnp.mean(jnp.diagonal(K_mm))
    L_mm = jnp.linalg.cholesky(K_mm + jitter * jnp.eye(Z.shape[0], dtype=K_mm.dtype))
    U = solve_triangular(L_mm, base(Z, X), lower=True).T
    V = jnp.concatenate([jnp.sqrt(kernel.amplitude) * U, jnp.full((X.shape[0], 1), jnp.sqrt(kernel.offset))], axis=1)
    if kind == "dtc":
        return LowRankPrior(V, jnp.zeros(X.shape[0], dtype=V.dtype))
    d = kernel.amplitude * jnp.maximum(base.base_diag(X) - jnp.sum(U * U, axis=1), 0.0)
    return LowRankPrior(V, d)


def low_rank_prior_at(x: Array, X: Array, Z: Array, template: Kernel, kind: str = "fitc") -> LowRankPrior:
    """:func:`low_rank_prior` at the search coordinates x (traceable in x)."""
    return low_rank_prior(kernel_at(template, x), X, Z, kind)


# ---------------------------------------------------------------------------
# Choosing the inducing inputs
# ---------------------------------------------------------------------------

INDUCING_METHODS = ("kmeans", "pivoted-cholesky")
#: "kmeans" runs scikit-learn's MiniBatchKMeans above this many rows, full KMeans up to it: above it the mini-batch
#: form is much faster with the same trace error on the adult data (CHANGELOG.md, 2026-12-06)
MINIBATCH_ABOVE = 20_000
#: pivoted Cholesky stops updating once every remaining diagonal is below this fraction of the largest one
PIVOT_TOLERANCE = 1e-12


def inducing_inputs(X, m: int, *, method: str = "kmeans", kernel: Kernel | None = None, random_state=0,
                    sample_weight=None) -> np.ndarray:
    """m inducing inputs Z (an (m, d) float64 array) for :func:`low_rank_prior`, chosen from the inputs X.

    ``method``:

    * ``"kmeans"`` (default): the m cluster centres of k-means on X
      (scikit-learn's ``KMeans(n_clusters=m, n_init=1)``, k-means++ start;
      ``MiniBatchKMeans`` above :data:`MINIBATCH_ABOVE` rows). Z spreads
      where the inputs are dense, minimising sum_i min_j |x_i - z_j|^2; it does
      not depend on the kernel, so one Z serves a whole hyperparameter search
      and the approximate objective stays a smooth function of the
      hyperparameters. ``kernel`` is ignored; ``sample_weight`` (n,), the rows' weights, weighs the clustering
      (a row of weight 2 counts as the row twice). Where X has no more than m distinct rows, they are Z (the
      low-rank prior is then exact at the inputs).
    * ``"pivoted-cholesky"``: the m training rows picked by the greedy pivoted
      Cholesky factorisation of the unit-amplitude shape ``base`` of
      ``kernel`` (:func:`pivoted_cholesky`): each step takes the row whose
      variance is worst explained so far, the largest diagonal entry of
      base - Q, Q = K_nP K_PP^-1 K_Pn the Nystrom approximation through the
      rows P picked before, which then becomes exact. A greedy heuristic for a
      small trace error tr(base - Q) = sum of that diagonal (it removes the
      largest entry, not the largest reduction of the sum, and so favours
      isolated rows: on the breast cancer and adult data k-means centres give
      the smaller trace error, pivoted Cholesky the smaller largest entrywise
      error); O(n m^2) time, O(n m) memory, never the n x n matrix. Z depends on the
      kernel's shape parameters (the length scale): fix it before a search or
      re-pick (which makes the objective jump).

    ``random_state`` seeds k-means (pivoted Cholesky is deterministic; ties go
    to the first row). Raises ValueError for m < 1, m > n, an unknown method,
    a missing kernel, non-finite X, or k-means finding fewer than m distinct
    centres.

    References: S. Fine and K. Scheinberg, Efficient SVM training using
    low-rank kernel representations, JMLR 2 (2001) 243-264; H. Harbrecht,
    M. Peters and R. Schneider, On the low-rank approximation by the pivoted
    Cholesky decomposition, Applied Numerical Mathematics 62 (2012) 428-440.
    """
    X = check_inputs(X)
    m = _check_inducing_count(m, X.shape[0])
    if method == "kmeans":
        distinct = np.unique(X, axis=0)
        if distinct.shape[0] <= m:  # no more inputs than centres: the inputs themselves
            return distinct
        return _kmeans_centres(X, m, random_state, sample_weight)
    if method == "pivoted-cholesky":
        if kernel is None:
            raise ValueError('method="pivoted-cholesky" needs the kernel (its unit-amplitude shape is factorised)')
        pivots, _, _ = pivoted_cholesky(kernel, X, m)
        return X[pivots]
    raise ValueError(f"method must be one of {', '.join(map(repr, INDUCING_METHODS))}; got {method!r}")


def _check_inducing_count(m, n: int) -> int:
    if isinstance(m, bool) or not isinstance(m, numbers.Integral) or not 1 <= m <= n:
        raise ValueError(f"m (the number of inducing inputs) must be an integer in [1, n = {n}]; got {m!r}")
    return int(m)


def _kmeans_centres(X: np.ndarray, m: int, random_state, sample_weight=None) -> np.ndarray:
    """k-means centres of X, clustered about its mean (which KMeans does itself, MiniBatchKMeans not): an offset
    of every row moves every centre by the same offset. Mini-batch steps are too small to gain from threads (and
    lose much on a busy machine)."""
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from threadpoolctl import threadpool_limits

    mean = np.average(X, axis=0, weights=sample_weight)
    if X.shape[0] > MINIBATCH_ABOVE:
        with threadpool_limits(1):
            Z = MiniBatchKMeans(n_clusters=m, n_init=1, random_state=random_state).fit(
                X - mean, sample_weight=sample_weight).cluster_centers_
    else:
        Z = KMeans(n_clusters=m, n_init=1, random_state=random_state).fit(
            X - mean, sample_weight=sample_weight).cluster_centers_
    Z = np.asarray(Z, dtype=np.float64) + mean
    n_distinct = np.unique(Z, axis=0).shape[0]
    if n_distinct < m:
        raise ValueError(
            f"k-means found only {n_distinct} distinct centres for m = {m}; X has fewer than m distinct rows "
            "(use a smaller m)"
        )
    return Z


@float64
def pivoted_cholesky(kernel: Kernel, X, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy pivoted Cholesky of base(X, X), the unit-amplitude shape of ``kernel``, to rank m.

    Starting from the residual diagonal r = diag(base) and no pivots, step
    k = 1..m picks p_k = argmax_i r_i over the rows not yet picked, and sets

        l_k = (base(X, x_{p_k}) - sum_{j<k} l_j l_j[p_k]) / sqrt(r_{p_k}),   r <- r - l_k^2,

    so that L L^T (L = [l_1 .. l_m], n x m) is the Nystrom approximation
    Q = K_nP K_PP^-1 K_Pn through the picked rows P and r = diag(base - Q).
    Each step evaluates one kernel column: O(n d + n m) time, O(n m (d + m))
    in all (one compiled XLA loop), O(n m) memory; the n x n matrix is never formed.
    Once every remaining r_i is below :data:`PIVOT_TOLERANCE` times max diag(base)
    (rank exhausted), later pivots are still picked by the same rule but add
    no column (their l_k is 0).

    Returns (pivots (m,) int, L (n, m), r (n,)); tr(base - Q) = sum(r).
    References: Fine and Scheinberg (2001); Harbrecht, Peters and Schneider (2012).
    """
    X = check_inputs(X)
    m = _check_inducing_count(m, X.shape[0])
    base = check_kernel(kernel).replace(amplitude=1.0, offset=0.0)
    pivots, factor, residual = _pivoted_cholesky(base, jnp.asarray(X), m, PIVOT_TOLERANCE)
    return np.asarray(pivots, dtype=np.int64), np.asarray(factor).T, np.asarray(residual)


@jit(static_argnums=2)
def _pivoted_cholesky(base: Kernel, X: Array, m: int, relative_tolerance: float):
    """The loop of :func:`pivoted_cholesky`, compiled: factor holds the rows l_k^T (rows >= k still 0)."""
    residual = base.base_diag(X)
    tolerance = relative_tolerance * jnp.max(residual)

    def step(k, state):
        factor, residual, free, pivots = state
        p = jnp.argmax(jnp.where(free, residual, -jnp.inf))
        column = base.base(jax.lax.dynamic_slice_in_dim(X, p, 1), X)[0] - factor[:, p] @ factor
        keep = residual[p] > tolerance
        l_k = jnp.where(keep, column / jnp.sqrt(jnp.where(keep, residual[p], 1.0)), 0.0)
        residual = jnp.maximum(residual - l_k * l_k, 0.0).at[p].set(0.0)
        return factor.at[k].set(l_k), residual, free.at[p].set(False), pivots.at[k].set(p)

    n = X.shape[0]
    state = (jnp.zeros((m, n), X.dtype), residual, jnp.ones(n, dtype=bool), jnp.zeros(m, dtype=jnp.int64))
    factor, residual, _, pivots = jax.lax.fori_loop(0, m, step, state)
    return pivots, factor, residual
