"""MAP solution of the Bayesian SVM: the SVM dual without equality constraint.

The MAP latent function minimises 1/2 theta^T K^-1 theta + C sum_i l(y_i theta_i).
Its dual (theory: "MAP = SVM") is the box-constrained quadratic programme

    max_a  sum_i a_i - 1/2 sum_ij a_i a_j y_i y_j K_ij,   0 <= a_i <= C,

with theta = K (a * y). There is no equality constraint: the bias is part of
the kernel (its ``offset``). The KKT conditions, with g_i = 1 - y_i theta_i,
are g_i <= 0 where a_i = 0, g_i >= 0 where a_i = C and g_i = 0 on the
*marginal* set 0 < a_i < C. The evidence depends on that set, so the solver
identifies it exactly:

1. greedy coordinate ascent (the single-variable analogue of SMO: pick the
   coordinate with the largest gain, take the clipped Newton step) brings the
   KKT violation below a loose tolerance;
2. a primal-dual active-set iteration (Hintermueller, Ito & Kunisch 2003)
   solves the linear system K_FF (a y)_F = y_F - theta^U_F on the free set
   exactly (Cholesky, iterative refinement) and moves points between the free
   and bound sets until they are stable; then the KKT conditions hold to
   rounding error. It takes a few rounds, but it is not monotone: where K_FF
   is numerically singular (inputs much denser than the length scale) the
   free-set solution lies far outside the box and the sets cycle;
3. there a monotone projected Newton iteration takes over: each round takes
   the best of the projected Newton point, the Newton direction cut at the
   first bound, and a single coordinate step, so the dual objective rises
   every round;
4. if the free set outgrows its buffer or the rounds run out, coordinate
   ascent resumes at a tighter tolerance and the polish is retried.

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
from ._precision import float64, numpy_leaves
from ._validation import check_inputs, check_kernel, check_labels, check_positive
from .kernels import RBF, Kernel, gram_matrix

Array = jax.Array

__all__ = ["DualSolution", "MapSVM", "solve_dual", "solve_dual_batch", "fit_map", "kkt_violation"]

#: tolerance of the coordinate-ascent phase before the first exact polish
_INITIAL_ASCENT_TOL = 0.1
#: at most this many active-set iterations per polish
_MAX_ACTIVE_SET_ROUNDS = 30
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


@float64
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


def _solve_free_set(K, y, C, upper, free, max_free):
    """Exact alpha for given bound/free sets: K_FF (a y)_F = y_F - theta^U_F.

    ``upper`` points sit at C, the rest of the non-free points at 0. Returns
    the (unclipped) alpha; free points beyond ``max_free`` are not solved for
    (the caller checks the count).
    """
    n = K.shape[0]
    theta_upper = K @ jnp.where(upper, C * y, 0.0)
    index, valid = _linalg.subset_indices(free, max_free)
    K_ff = _linalg.padded_submatrix(K, index, valid)
    rhs = _linalg.padded_vector(y - theta_upper, index, valid)
    u = _refined_solve(K_ff, rhs)
    alpha_free = _linalg.scatter_subset(u, index, valid, n) * y
    return jnp.where(free, alpha_free, jnp.where(upper, C, 0.0))


def _active_set_polish(K, y, C, alpha, max_free):
    """Primal-dual active-set iteration (Hintermueller, Ito & Kunisch 2003) from the sets of ``alpha``.

    Solves the free-set system exactly and moves points between the free and
    bound sets until the sets are stable; then the KKT conditions hold to
    rounding. Fast (a few rounds) but not monotone: on numerically singular
    K_FF the free-set solution lies far outside the box and the sets cycle.

    Returns (alpha, settled, rounds); ``settled`` is False when the sets kept
    changing or the free set outgrew ``max_free``.
    """
    upper = alpha >= C
    free = (alpha > 0.0) & ~upper

    def cond(state):
        _, _, _, changed, overflow, rounds = state
        return changed & ~overflow & (rounds < _MAX_ACTIVE_SET_ROUNDS)

    def body(state):
        _, upper, free, _, _, rounds = state
        alpha = _solve_free_set(K, y, C, upper, free, max_free)
        g = 1.0 - y * (K @ (alpha * y))
        lower = ~upper & ~free
        new_upper = (free & (alpha >= C)) | (upper & (g >= 0.0))
        new_lower = (free & (alpha <= 0.0)) | (lower & (g <= 0.0))
        new_free = ~new_upper & ~new_lower
        changed = jnp.any(new_upper != upper) | jnp.any(new_free != free)
        overflow = jnp.sum(new_free) > max_free
        return alpha, new_upper, new_free, changed, overflow, rounds + 1

    overflow0 = jnp.sum(free) > max_free
    state = (alpha, upper, free, jnp.array(True), overflow0, jnp.array(0))
    alpha, upper, free, changed, overflow, rounds = jax.lax.while_loop(cond, body, state)
    return alpha, ~changed & ~overflow, rounds


def _refined_solve(A, b):
    """Solve A u = b for a PSD A by a jittered Cholesky factor and iterative refinement.

    The refinement removes the jitter's bias on the well-conditioned part of
    A's range. The resulting operator is a positive polynomial in
    (A + eps I)^-1 A times (A + eps I)^-1, hence positive definite, also
    where A is singular.
    """
    jitter = _JITTER * jnp.max(jnp.diagonal(A))
    factor = jax.scipy.linalg.cho_factor(A + jitter * jnp.eye(A.shape[0], dtype=A.dtype), lower=True)
    u = jax.scipy.linalg.cho_solve(factor, b)
    for _ in range(_REFINEMENT_STEPS):  # static unroll
        u = u + jax.scipy.linalg.cho_solve(factor, b - A @ u)
    return u


def _monotone_polish(K, y, C, alpha, theta, max_free, tol):
    """Projected Newton iteration on the free set (monotone in the dual objective).

    Each round frees the points whose KKT conditions are violated at a bound
    (most violated first, up to the buffer) and computes the Newton direction
    d of the dual on the free set. Two feasible steps are compared by their
    exact gain g.D - D^T Q D / 2 (O(m^2) on the gathered free set):

    * the Newton point projected onto the box, clip(alpha + d, 0, C) - alpha,
      which sends many points to their bounds at once (the step of a
      primal-dual active-set method, Hintermueller, Ito & Kunisch 2003, taken
      only when it gains);
    * d without the components that would leave the box from a bound, to the
      exact line maximum, cut at the first bound (a ratio test; its gain is
      never negative);
    * the best single coordinate-ascent step, whose gain is positive while any
      KKT condition is violated, so the iteration cannot stall.

    The largest gain is taken, so the dual objective rises every round. Once the
    free set is right a full step lands on the exact solution, where y theta = 1
    on the free set to rounding. Returns (alpha, theta, fits, rounds); ``fits``
    is False if the free set outgrew ``max_free``.
    """

    diag = jnp.maximum(jnp.diagonal(K), jnp.finfo(K.dtype).tiny)

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
        free = free | ((at_bound_violation > 0.0) & (at_bound_violation >= threshold) & (capacity > 0))
        index, valid = _linalg.subset_indices(free, max_free)
        K_ff = _linalg.padded_submatrix(K, index, valid)
        y_f, g_f, a_f = (_linalg.padded_vector(v, index, valid) for v in (y, g, alpha))
        # Newton direction d = Q_FF^-1 g_F, Q = diag(y) K diag(y): an ascent direction even for
        # singular K_FF (the refined solve is positive definite); near-null components are long
        # steps that the line search and the bounds cut back
        newton_point = a_f + y_f * _refined_solve(K_ff, y_f * g_f)

        def gain(step):
            w = y_f * step
            return g_f @ step - 0.5 * w @ (K_ff @ w)

        # candidate 1: the Newton point on the free set projected onto the box (a primal-dual
        # active-set step: many points reach their bounds at once)
        projected = jnp.where(valid, jnp.clip(newton_point, 0.0, C) - a_f, 0.0)
        # candidate 2: along the Newton direction without components that would leave the box
        # from a bound, to the exact line maximum, cut at the first bound (which it lands on exactly)
        d = newton_point - a_f
        d = jnp.where(((a_f <= 0.0) & (d < 0.0)) | ((a_f >= C) & (d > 0.0)), 0.0, d)
        curvature = (y_f * d) @ (K_ff @ (y_f * d))
        line_max = jnp.where(curvature > 0.0, (g_f @ d) / curvature, jnp.inf)
        room = jnp.where(d > 0.0, (C - a_f) / d, jnp.where(d < 0.0, -a_f / d, jnp.inf))
        room = jnp.where(valid, room, jnp.inf)
        blocking = jnp.argmin(room)
        t = jnp.maximum(jnp.minimum(line_max, room[blocking]), 0.0)
        ratio = jnp.where(valid, jnp.clip(a_f + t * d, 0.0, C) - a_f, 0.0)
        snapped = jnp.where(d[blocking] > 0.0, C, 0.0) - a_f[blocking]
        ratio = jnp.where((room[blocking] <= line_max) & (jnp.arange(max_free) == blocking), snapped, ratio)
        newton = jnp.where(gain(projected) > gain(ratio), projected, ratio)
        # candidate 3: the best single coordinate step (positive gain while any KKT condition is violated)
        coordinate_steps = jnp.clip(alpha + g / diag, 0.0, C) - alpha
        coordinate_gains = coordinate_steps * g - 0.5 * coordinate_steps**2 * diag
        i = jnp.argmax(coordinate_gains)
        use_newton = gain(newton) >= coordinate_gains[i]
        newton = jnp.where(use_newton, newton, 0.0)
        coordinate = jnp.where(use_newton, 0.0, coordinate_steps[i])
        alpha = alpha.at[index].add(jnp.where(valid, newton, 0.0)).at[i].add(coordinate)
        theta = theta + K[:, index] @ (y_f * newton) + (coordinate * y[i]) * K[i]
        return alpha, theta, jnp.sum(free) > max_free, rounds + 1

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
        # fast polish; where it cycles, the monotone one (never worse than its start)
        fast, fast_settled, fast_used = _active_set_polish(K, y, C, alpha, max_free)
        fast_theta = K @ (fast * y)
        fast_exact = fast_settled & (kkt_violation(fast, fast_theta, y, C) <= tol)
        alpha, theta, fits, used = jax.lax.cond(
            fast_exact,
            lambda: (fast, fast_theta, jnp.array(True), jnp.array(0)),
            lambda: _monotone_polish(K, y, C, alpha, theta, max_free, tol),
        )
        used = used + fast_used
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


@float64
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


@float64
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

    def __getstate__(self):
        # JAX arrays would unpickle in the precision of the moment (float32 with the flag off): store NumPy
        return numpy_leaves(self.__dict__)

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

    @float64
    def decision_function(self, X) -> np.ndarray:
        """MAP output theta*(x) at new inputs, shape (n_samples,)."""
        X = check_inputs(X, n_features=self.X.shape[1])
        sv = self.support
        coef = self.alpha[sv] * self.y[sv]
        return np.asarray(gram_matrix(self.kernel, jnp.asarray(X), jnp.asarray(self.X[sv])) @ coef)

    @float64
    def predict(self, X) -> np.ndarray:
        """Class labels: ``classes[1]`` where theta*(x) > 0, else ``classes[0]`` (scikit-learn's tie rule)."""
        return np.where(self.decision_function(X) > 0, self.classes[1], self.classes[0])


@float64
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
            stacklevel=3,  # fit_map, its float64 wrapper, the caller
        )
    return MapSVM(X=X, y=y_pm, classes=classes, kernel=kernel, C=C, solution=solution)
