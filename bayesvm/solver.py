"""MAP solution of the Bayesian SVM: the SVM dual without equality constraint.

The MAP latent function minimises 1/2 theta^T K^-1 theta + C sum_i l(y_i theta_i).
Its dual (DESIGN.md section 1) is the box-constrained quadratic programme

    max_a  sum_i a_i - 1/2 sum_ij a_i a_j y_i y_j K_ij,   0 <= a_i <= C,

with theta = K (a * y). There is no equality constraint: the bias is part of
the kernel (its ``offset``). The KKT conditions, with g_i = 1 - y_i theta_i,
are g_i <= 0 where a_i = 0, g_i >= 0 where a_i = C and g_i = 0 on the
*marginal* set 0 < a_i < C. The evidence depends on that set, so the solver
identifies it exactly:

1. greedy coordinate ascent (the single-variable analogue of SMO: pick the
   coordinate with the largest gain, take the clipped Newton step) brings the
   KKT violation below a loose tolerance;
2. a projected Newton iteration on the free set then finishes the job: it
   frees the bound points whose KKT conditions are violated, takes the Newton
   step of the dual on the free set (a Cholesky solve of K_FF), shortened to
   the exact line maximum and to the first bound it meets (a primal
   active-set method with ratio test: the dual objective rises every round,
   also where K_FF is numerically singular). Once the free set is right one
   full step lands on the exact solution, where y theta = 1 on the free set to
   rounding error. If the free set outgrows its buffer or the rounds run out,
   coordinate ascent resumes at a tighter tolerance and the polish is retried.

Both phases have fixed array shapes; the free set is gathered into a padded
buffer of static size ``max_free`` (the whole problem by default), so the pure
function :func:`solve_dual` is jit- and vmap-compatible. :func:`fit_map` picks
a small buffer from the first phase's free count, which is what makes a single
solve fast.

The KKT violation is measured in margin units, max_i of |g_i| on the free
set and of the wrong-signed part of g_i at the bounds. It is invariant under
(C, k0) -> (C / s, s k0), like theta itself.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _linalg
from ._validation import check_inputs, check_kernel, check_labels, check_positive
from .kernels import RBF, Kernel, gram_matrix

Array = jax.Array

__all__ = ["DualSolution", "MapSVM", "solve_dual", "solve_dual_batch", "fit_map", "kkt_violation"]

#: tolerance of the coordinate-ascent phase before the first exact polish
_INITIAL_ASCENT_TOL = 0.1
#: at most this many active-set iterations per polish
_MAX_ACTIVE_SET_ROUNDS = 100
#: at most this many (ascent, polish) rounds, tightening the ascent tolerance by 100 each time
_MAX_OUTER_ROUNDS = 6
#: relative jitter of the free-set Cholesky; iterative refinement removes its effect on the solution
_JITTER = 1e-12
_REFINEMENT_STEPS = 3


class DualSolution(NamedTuple):
    """Solution of the dual on a Gram matrix (a pytree; batched under vmap).

    Attributes
    ----------
    alpha : (n,) dual coefficients in [0, C].
    theta : (n,) MAP outputs at the training inputs, K (alpha * y).
    marginal : (n,) bool, 0 < alpha < C (equivalently y theta = 1).
    kkt_violation : scalar, in margin units (see module docstring).
    n_iter : coordinate-ascent steps taken.
    n_polish : active-set iterations taken.
    converged : whether the KKT violation reached the requested tolerance.
    """

    alpha: Array
    theta: Array
    marginal: Array
    kkt_violation: Array
    n_iter: Array
    n_polish: Array
    converged: Array


def kkt_violation(alpha: Array, theta: Array, y: Array, C: Array | float) -> Array:
    """Largest violation of the KKT conditions, in margin units.

    With g = 1 - y theta: |g| where 0 < alpha < C, max(g, 0) where alpha = 0
    and max(-g, 0) where alpha = C; also any excursion of alpha outside
    [0, C], relative to C.
    """
    return jnp.max(_projected_gradient_abs(alpha, 1.0 - y * theta, C), initial=0.0) + jnp.max(
        jnp.maximum(-alpha, alpha - C) / C, initial=0.0
    ).clip(min=0.0)


def _projected_gradient_abs(alpha, g, C):
    at_lower = alpha <= 0.0
    at_upper = alpha >= C
    return jnp.where(at_lower, jnp.maximum(g, 0.0), jnp.where(at_upper, jnp.maximum(-g, 0.0), jnp.abs(g)))


def _coordinate_ascent(K, y, C, alpha, theta, tol, max_iter, n_iter):
    """Greedy coordinate ascent until the KKT violation is <= tol.

    Each step picks i maximising the gain of the clipped Newton step
    d_i = clip(a_i + g_i / K_ii, 0, C) - a_i, gain d_i g_i - d_i^2 K_ii / 2,
    and updates theta += d_i y_i K[i] (O(n) per step).
    """
    diag = jnp.maximum(jnp.diagonal(K), jnp.finfo(K.dtype).tiny)

    def violation(alpha, theta):
        return jnp.max(_projected_gradient_abs(alpha, 1.0 - y * theta, C))

    def cond(state):
        alpha, theta, it = state
        return (violation(alpha, theta) > tol) & (it < max_iter)

    def body(state):
        alpha, theta, it = state
        g = 1.0 - y * theta
        step = jnp.clip(alpha + g / diag, 0.0, C) - alpha
        gain = step * g - 0.5 * step**2 * diag
        i = jnp.argmax(gain)
        alpha = alpha.at[i].add(step[i])
        theta = theta + (step[i] * y[i]) * K[i]
        return alpha, theta, it + 1

    alpha, theta, n_iter = jax.lax.while_loop(cond, body, (alpha, theta, n_iter))
    # clear the rounding error accumulated by the incremental updates
    return alpha, K @ (alpha * y), n_iter


def _free_set_newton_direction(K, y, g, free, max_free):
    """Newton direction on the free set, d_F = Q_FF^-1 g_F with Q = diag(y) K diag(y).

    Solves K_FF z = y_F g_F by a jittered Cholesky factor with iterative
    refinement and returns d = y z on F (zero elsewhere) and the curvature
    d^T Q d. The refined operator is a positive polynomial in (K + eps I)^-1 K
    times (K + eps I)^-1, hence positive definite: d is an ascent direction
    even where K_FF is singular (near-duplicate inputs, long length scales),
    and there the near-null components are long steps that the line search
    and the ratio test cut back.
    """
    n = K.shape[0]
    index, valid = _linalg.subset_indices(free, max_free)
    K_ff = _linalg.padded_submatrix(K, index, valid)
    y_f = _linalg.padded_vector(y, index, valid)
    rhs = y_f * _linalg.padded_vector(g, index, valid)
    jitter = _JITTER * jnp.max(jnp.diagonal(K_ff))
    factor = jax.scipy.linalg.cho_factor(K_ff + jitter * jnp.eye(max_free, dtype=K.dtype), lower=True)
    z = jax.scipy.linalg.cho_solve(factor, rhs)
    for _ in range(_REFINEMENT_STEPS):  # static unroll: removes the jitter's bias on the range of K_ff
        z = z + jax.scipy.linalg.cho_solve(factor, rhs - K_ff @ z)
    curvature = z @ (K_ff @ z)
    return _linalg.scatter_subset(y_f * z, index, valid, n), curvature, index, valid, z


def _polish(K, y, C, alpha, theta, max_free, tol):
    """Projected Newton iteration on the free set with exact line search and a ratio test.

    Each round frees the points whose KKT conditions are violated at a bound
    (most violated first, up to the buffer), takes the Newton step of the dual
    on the free set, shortened to the exact line maximum and to the first
    bound it meets (that point is set exactly on its bound). The dual
    objective increases at every round; once the free set is right, one full
    Newton step lands on the exact solution, where the free points satisfy
    y theta = 1 to rounding. Returns (alpha, theta, exact, rounds).
    """

    def violation(alpha, theta):
        return _projected_gradient_abs(alpha, 1.0 - y * theta, C)

    def cond(state):
        alpha, theta, overflow, rounds = state
        return (jnp.max(violation(alpha, theta)) > tol) & ~overflow & (rounds < _MAX_ACTIVE_SET_ROUNDS)

    def body(state):
        alpha, theta, _, rounds = state
        g = 1.0 - y * theta
        free = (alpha > 0.0) & (alpha < C)
        capacity = max_free - jnp.sum(free)
        at_bound_violation = jnp.where(free, 0.0, violation(alpha, theta))
        threshold = jnp.sort(at_bound_violation)[::-1][jnp.clip(capacity - 1, 0, alpha.shape[0] - 1)]
        released = (at_bound_violation > 0.0) & (at_bound_violation >= threshold) & (capacity > 0)
        free = free | released
        direction, curvature, index, valid, _ = _free_set_newton_direction(K, y, g, free, max_free)
        ascent = direction @ g
        line_max = jnp.where(curvature > 0.0, ascent / curvature, jnp.inf)
        room = jnp.where(direction > 0.0, (C - alpha) / direction, jnp.where(direction < 0.0, -alpha / direction, jnp.inf))
        room = jnp.where(free, room, jnp.inf)
        blocking = jnp.argmin(room)
        step = jnp.minimum(line_max, room[blocking])
        new_alpha = jnp.clip(alpha + step * direction, 0.0, C)
        # the blocking point lands exactly on its bound (no rounding residue inside the box)
        new_alpha = jnp.where(
            (room[blocking] <= line_max) & (jnp.arange(alpha.shape[0]) == blocking),
            jnp.where(direction[blocking] > 0.0, C, 0.0),
            new_alpha,
        )
        change = (new_alpha - alpha) * y
        theta = theta + K[:, index] @ jnp.where(valid, change[index], 0.0)
        overflow = jnp.sum(free) > max_free
        return new_alpha, theta, overflow, rounds + 1

    overflow0 = jnp.sum((alpha > 0.0) & (alpha < C)) > max_free
    alpha, theta, overflow, rounds = jax.lax.while_loop(cond, body, (alpha, theta, overflow0, jnp.array(0)))
    theta = K @ (alpha * y)  # clear the rounding of the incremental updates
    return alpha, theta, ~overflow, rounds


def _ascend(K, y, C, tol, max_iter):
    zeros = jnp.zeros_like(y)
    return _coordinate_ascent(K, y, C, zeros, zeros, jnp.maximum(tol, _INITIAL_ASCENT_TOL), max_iter, jnp.array(0))


def _finish(K, y, C, alpha, theta, n_iter, tol, max_iter, max_free):
    """Polish, and if needed resume coordinate ascent at a tighter tolerance."""

    def cond(state):
        _, _, _, _, done, rounds, ascent_tol = state
        return ~done & (rounds < _MAX_OUTER_ROUNDS)

    def body(state):
        alpha, theta, n_iter, n_polish, _, rounds, ascent_tol = state
        # polish the current iterate (monotone: the result is never worse than its start)
        alpha, theta, fits, used = _polish(K, y, C, alpha, theta, max_free, tol)
        exact = fits & (kkt_violation(alpha, theta, y, C) <= tol)
        # if the free set outgrew the buffer or the rounds ran out, tighten the ascent and try again
        ascent_tol = jnp.maximum(ascent_tol * 1e-2, tol)
        alpha, theta, n_iter = jax.lax.cond(
            exact,
            lambda: (alpha, theta, n_iter),
            lambda: _coordinate_ascent(K, y, C, alpha, theta, ascent_tol, max_iter, n_iter),
        )
        done = kkt_violation(alpha, theta, y, C) <= tol
        return alpha, theta, n_iter, n_polish + used, done, rounds + 1, ascent_tol

    start_tol = jnp.maximum(tol, _INITIAL_ASCENT_TOL)
    state = (alpha, theta, n_iter, jnp.array(0), jnp.array(False), jnp.array(0), start_tol)
    alpha, theta, n_iter, n_polish, _, _, _ = jax.lax.while_loop(cond, body, state)
    violation = kkt_violation(alpha, theta, y, C)
    return DualSolution(
        alpha=alpha,
        theta=theta,
        marginal=(alpha > 0.0) & (alpha < C),
        kkt_violation=violation,
        n_iter=n_iter,
        n_polish=n_polish,
        converged=violation <= tol,
    )


def _default_max_iter(n: int) -> int:
    return 200 * n + 10_000


@partial(jax.jit, static_argnames=("max_iter", "max_free"))
def solve_dual(
    K: Array,
    y: Array,
    C: Array | float,
    *,
    tol: float = 1e-8,
    max_iter: int | None = None,
    max_free: int | None = None,
) -> DualSolution:
    """Solve the box-constrained SVM dual on a Gram matrix.

    Pure, jit-compiled and vmap-compatible (``jax.vmap(solve_dual)`` over a
    batch of Gram matrices and/or C values works). No input checking: use
    :func:`fit_map` for user data.

    Parameters
    ----------
    K : (n, n) positive semi-definite Gram matrix (kernel with its offset).
    y : (n,) labels in {-1, +1} as floats.
    C : positive scalar.
    tol : KKT tolerance in margin units.
    max_iter : coordinate-ascent step budget (default 200 n + 10000).
    max_free : static size of the free-set buffer (default n). A smaller
        buffer is faster; if the free set outgrows it the solver falls back
        to coordinate ascent, so the answer stays correct.
    """
    n = K.shape[0]
    max_iter = _default_max_iter(n) if max_iter is None else max_iter
    max_free = n if max_free is None else min(max_free, n)
    alpha, theta, n_iter = _ascend(K, y, C, tol, max_iter)
    return _finish(K, y, C, alpha, theta, n_iter, tol, max_iter, max_free)


_ascend_jit = jax.jit(_ascend, static_argnames=("max_iter",))
_finish_jit = jax.jit(_finish, static_argnames=("max_iter", "max_free"))


def _over_batch(fn, strategy, *batched):
    """Apply ``fn`` over the leading axis: vectorised (vmap) or one problem after another (lax.map).

    Under vmap every problem runs as many steps as the slowest one; that pays
    on an accelerator, where the batch runs in parallel, but on a CPU
    ``lax.map`` (each problem stops at its own step count) does less work.
    """
    if strategy == "vmap":
        return jax.vmap(fn)(*batched)
    return jax.lax.map(lambda args: fn(*args), batched)


@partial(jax.jit, static_argnames=("max_iter", "strategy"))
def _ascend_batch(K, y, C, tol, max_iter, strategy):
    return _over_batch(lambda K_b, C_b: _ascend(K_b, y, C_b, tol, max_iter), strategy, K, C)


@partial(jax.jit, static_argnames=("max_iter", "max_free", "strategy"))
def _finish_batch(K, y, C, alpha, theta, n_iter, tol, max_iter, max_free, strategy):
    def finish_one(K_b, C_b, alpha_b, theta_b, n_iter_b):
        return _finish(K_b, y, C_b, alpha_b, theta_b, n_iter_b, tol, max_iter, max_free)

    return _over_batch(finish_one, strategy, K, C, alpha, theta, n_iter)


def _solve_adaptive(ascend, finish, K, y, C, tol, max_iter):
    """Both phases with a free-set buffer sized from the first phase's free count."""
    n = K.shape[-1]
    max_iter = _default_max_iter(n) if max_iter is None else max_iter
    alpha, theta, n_iter = ascend(K, y, C, tol, max_iter=max_iter)
    n_free = int(jnp.max(jnp.sum((alpha > 0) & (alpha < jnp.expand_dims(C, -1)), axis=-1)))
    max_free = _linalg.buffer_size(n_free, n)
    return finish(K, y, C, alpha, theta, n_iter, tol, max_iter=max_iter, max_free=max_free)


def solve_dual_batch(
    K: Array, y: Array, C: Array, *, tol: float = 1e-8, max_iter: int | None = None, strategy: str = "auto"
) -> DualSolution:
    """:func:`solve_dual` over a batch: ``K`` of shape (B, n, n), ``C`` of shape (B,).

    Sizes the shared free-set buffer from the largest free count in the batch.
    ``strategy``: ``"vmap"`` (vectorised: best on a GPU), ``"map"`` (one after
    another in one compiled loop: best on a CPU) or ``"auto"`` (by backend).
    """
    if strategy == "auto":
        strategy = "map" if jax.default_backend() == "cpu" else "vmap"
    if strategy not in ("map", "vmap"):
        raise ValueError(f"strategy must be 'auto', 'map' or 'vmap'; got {strategy!r}")
    K = jnp.asarray(K)
    C = jnp.broadcast_to(jnp.asarray(C, dtype=K.dtype), K.shape[:1])
    ascend = partial(_ascend_batch, strategy=strategy)
    finish = partial(_finish_batch, strategy=strategy)
    return _solve_adaptive(ascend, finish, K, jnp.asarray(y, dtype=K.dtype), C, tol, max_iter)


@dataclass(frozen=True)
class MapSVM:
    """A fitted MAP SVM: the dual solution together with its data and hyperparameters.

    ``decision_function(X)`` evaluates theta*(x) = sum_j alpha_j y_j K(x, x_j).
    """

    X: np.ndarray
    y: np.ndarray
    classes: np.ndarray
    kernel: Kernel
    C: float
    solution: DualSolution

    @property
    def alpha(self) -> np.ndarray:
        return np.asarray(self.solution.alpha)

    @property
    def theta(self) -> np.ndarray:
        return np.asarray(self.solution.theta)

    @property
    def marginal(self) -> np.ndarray:
        return np.asarray(self.solution.marginal)

    @property
    def support(self) -> np.ndarray:
        """Indices of the support vectors (alpha > 0)."""
        return np.flatnonzero(self.alpha > 0)

    @property
    def kkt_violation(self) -> float:
        return float(self.solution.kkt_violation)

    @property
    def n_iter(self) -> int:
        return int(self.solution.n_iter)

    @property
    def converged(self) -> bool:
        return bool(self.solution.converged)

    def decision_function(self, X) -> np.ndarray:
        """MAP output theta*(x) at new inputs, shape (n_samples,)."""
        X = check_inputs(X, n_features=self.X.shape[1])
        sv = self.support
        coef = self.alpha[sv] * self.y[sv]
        return np.asarray(gram_matrix(self.kernel, jnp.asarray(X), jnp.asarray(self.X[sv])) @ coef)

    def predict(self, X) -> np.ndarray:
        """Class labels: ``classes[1]`` where theta*(x) > 0, else ``classes[0]`` (scikit-learn's tie rule)."""
        return np.where(self.decision_function(X) > 0, self.classes[1], self.classes[0])


def fit_map(X, y, *, C: float = 1.0, kernel: Kernel | None = None, tol: float = 1e-8, max_iter: int | None = None) -> MapSVM:
    """Fit the MAP SVM (the standard SVM with the bias folded into the kernel).

    Parameters
    ----------
    X : (n_samples, n_features) finite inputs.
    y : (n_samples,) labels of exactly two classes (any two values; the
        larger one in sorted order becomes +1).
    C : positive penalty (the likelihood's inverse temperature).
    kernel : a :mod:`bayesvm.kernels` kernel (default ``RBF()``).
    tol : KKT tolerance in margin units.
    max_iter : coordinate-ascent step budget.
    """
    X = check_inputs(X)
    y_pm, classes = check_labels(y, X.shape[0])
    C = check_positive(C, "C")
    kernel = check_kernel(RBF() if kernel is None else kernel)
    tol = check_positive(tol, "tol")
    K = gram_matrix(kernel, jnp.asarray(X))
    solution = _solve_adaptive(_ascend_jit, _finish_jit, K, jnp.asarray(y_pm), jnp.asarray(C), tol, max_iter)
    if not bool(solution.converged):
        warnings.warn(
            f"the SVM dual solver stopped at KKT violation {float(solution.kkt_violation):.2e} > tol={tol:g}; "
            "raise max_iter or loosen tol. The marginal set (and so the evidence) may be inexact.",
            RuntimeWarning,
            stacklevel=2,
        )
    return MapSVM(X=X, y=y_pm, classes=classes, kernel=kernel, C=C, solution=solution)
