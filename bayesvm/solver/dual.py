"""MAP solution of the Bayesian SVM: the SVM dual without equality constraint.

The MAP latent function minimises 1/2 theta^T K^-1 theta + C sum_i l(y_i theta_i).
Its dual (theory: "MAP = SVM") is the box-constrained quadratic programme

    max_a  sum_i a_i - 1/2 sum_ij a_i a_j y_i y_j K_ij,   0 <= a_i <= C,

with theta = K (a * y). There is no equality constraint: the bias is part of
the kernel (its ``offset``). The KKT conditions, with g_i = 1 - y_i theta_i,
are g_i <= 0 where a_i = 0, g_i >= 0 where a_i = C and g_i = 0 on the
*marginal* set 0 < a_i < C. The evidence depends on that set, so the solver
identifies it exactly:

1. greedy coordinate ascent (pick the clipped Newton step of largest gain
   among single coordinates and SMO-like pairs, along which the offset
   cancels: ``_dual_ascent.best_step``) brings the KKT violation below a loose
   tolerance;
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
(C, k0) -> (C / s, s k0), like theta itself. A solve is held to the requested
tolerance or to the rounding floor n eps C max K_ii, whichever is larger
(:func:`kkt_tolerance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _linalg
from ._dual_ascent import active_set_polish, coordinate_ascent, monotone_polish, projected_gradient_abs
from .._precision import float64, numpy_leaves
from .._validation import check_inputs, check_kernel, check_labels, check_positive, training_data
from .._warnings import warn_user
from ..compilation import jit
from ..exceptions import ConvergenceWarning
from ..kernels import RBF, Kernel, gram_matrix

Array = jax.Array

__all__ = ["DualSolution", "MapSVM", "solve_dual", "solve_dual_batch", "solve_dual_boxes", "fit_map", "fit_map_on_gram",
           "kkt_tolerance", "kkt_violation"]

#: tolerance of the coordinate-ascent phase before the first exact polish
_INITIAL_ASCENT_TOL = 0.1
#: at most this many (ascent, polish) rounds, tightening the ascent tolerance by 100 each time
_MAX_OUTER_ROUNDS = 6
#: C max w_i K(x_i, x_i) from which the convergence warning blames the near hard-margin dual
_HARD_MARGIN_BOX = 1e3


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
    converged : whether the KKT violation reached ``tolerance``.
    tolerance : the tolerance it was held to, the requested one or the rounding floor
        n eps C max K_ii, whichever is larger (:func:`kkt_tolerance`).
    """

    alpha: Array
    theta: Array
    marginal: Array
    kkt_violation: Array
    n_iter: Array
    n_polish: Array
    converged: Array
    tolerance: Array


@float64
def kkt_violation(alpha: Array, theta: Array, y: Array, C: Array | float) -> Array:
    """Largest violation of the KKT conditions, in margin units.

    With g = 1 - y theta: |g| where 0 < alpha < C, max(g, 0) where alpha = 0
    and max(-g, 0) where alpha = C; also any excursion of alpha outside
    [0, C], relative to C.
    """
    return jnp.max(projected_gradient_abs(alpha, 1.0 - y * theta, C), initial=0.0) + jnp.max(
        jnp.maximum(-alpha, alpha - C) / C, initial=0.0
    ).clip(min=0.0)


@float64
def kkt_tolerance(K: Array, C: Array | float, tol: Array | float) -> Array:
    """The KKT tolerance a solve is held to: max(tol, n eps max_i C_i max_i K_ii).

    theta_i = sum_j K_ij alpha_j y_j sums terms up to max_j C_j max K_ij = C max K_ii (K is positive
    semi-definite, so its largest entry is on the diagonal); over n of them rounding leaves an error
    of up to n eps C max K_ii in theta, that is in g = 1 - y theta (Higham 2002, "Accuracy and
    Stability of Numerical Algorithms", section 3.1). A requested tolerance below that floor is
    unreachable in float64: it is raised to the floor. Invariant under (C, k0) -> (C / s, s k0)
    like the violation itself. (In the batched entry points n is the padded size.)
    """
    n = K.shape[-1]
    floor = n * jnp.finfo(K.dtype).eps * jnp.max(C) * jnp.max(jnp.diagonal(K, axis1=-2, axis2=-1))
    return jnp.maximum(tol, floor)


def _ascend(K, y, C, tol, max_iter):
    zeros = jnp.zeros_like(y)
    return coordinate_ascent(K, y, C, zeros, zeros, jnp.maximum(tol, _INITIAL_ASCENT_TOL), max_iter, jnp.array(0))


def _finish(K, y, C, alpha, theta, n_iter, tol, max_iter, max_free):
    """Polish, and if needed resume coordinate ascent at a tighter tolerance, down to :func:`kkt_tolerance`."""
    tol = kkt_tolerance(K, C, tol)

    def cond(state):
        _, _, _, _, done, rounds, ascent_tol = state
        return ~done & (rounds < _MAX_OUTER_ROUNDS)

    def body(state):
        alpha, theta, n_iter, n_polish, _, rounds, ascent_tol = state
        # fast polish; where it cycles, the monotone one (never worse than its start)
        fast, fast_settled, fast_used = active_set_polish(K, y, C, alpha, max_free)
        fast_theta = K @ (fast * y)
        fast_exact = fast_settled & (kkt_violation(fast, fast_theta, y, C) <= tol)
        alpha, theta, fits, used = jax.lax.cond(
            fast_exact,
            lambda: (fast, fast_theta, jnp.array(True), jnp.array(0)),
            lambda: monotone_polish(K, y, C, alpha, theta, max_free, tol),
        )
        used = used + fast_used
        exact = fits & (kkt_violation(alpha, theta, y, C) <= tol)
        # if the free set outgrew the buffer or the rounds ran out, tighten the ascent and try again
        ascent_tol = jnp.maximum(ascent_tol * 1e-2, tol)
        alpha, theta, n_iter = jax.lax.cond(
            exact,
            lambda: (alpha, theta, n_iter),
            lambda: coordinate_ascent(K, y, C, alpha, theta, ascent_tol, max_iter, n_iter),
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
        tolerance=tol,
    )


def _default_max_iter(n: int) -> int:
    return 200 * n + 10_000


@float64
@jit(static_argnames=("max_iter", "max_free"))
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
    tol : KKT tolerance in margin units (raised to the rounding floor n eps C max K_ii where that is
        larger: :func:`kkt_tolerance`).
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


_ascend_jit = jit(_ascend, static_argnames=("max_iter",), rarely_run=True)
_finish_jit = jit(_finish, static_argnames=("max_iter", "max_free"), rarely_run=True)


def _over_batch(fn, strategy, *batched):
    """Apply ``fn`` over the leading axis: vectorised (vmap) or one problem after another (lax.map).

    Under vmap every problem runs as many steps as the slowest one; that pays
    on an accelerator, where the batch runs in parallel, but on a CPU
    ``lax.map`` (each problem stops at its own step count) does less work.
    """
    if strategy == "vmap":
        return jax.vmap(fn)(*batched)
    return jax.lax.map(lambda args: fn(*args), batched)


@jit(static_argnames=("max_iter", "strategy"))
def _ascend_batch(K, y, C, tol, max_iter, strategy):
    return _over_batch(lambda K_b, C_b: _ascend(K_b, y, C_b, tol, max_iter), strategy, K, C)


@jit(static_argnames=("max_iter", "max_free", "strategy"))
def _finish_batch(K, y, C, alpha, theta, n_iter, tol, max_iter, max_free, strategy):
    def finish_one(K_b, C_b, alpha_b, theta_b, n_iter_b):
        return _finish(K_b, y, C_b, alpha_b, theta_b, n_iter_b, tol, max_iter, max_free)

    return _over_batch(finish_one, strategy, K, C, alpha, theta, n_iter)


def _solve_adaptive(ascend, finish, K, y, C, tol, max_iter, weights=None):
    """Both phases on the padded problem, with a free-set buffer sized from the first phase's free count.

    Point i's box is C w_i (``weights`` (n,), None: every w_i = 1): a row of weight w is w copies of it, whose dual
    coefficients add up to one in [0, w C] (theory: "Weights and repeated rows"). C is a scalar, or (B,) for a
    batch of Gram matrices.

    K (n, n) or (B, n, n) is padded to blockdiag(K, I) of size
    :func:`bayesvm._linalg.problem_size` (n), so that nearby n share one
    compiled program, with label +1 at the padding. The dual is separable
    across the two blocks: each padding point solves its own one-point dual
    (alpha = min(1, C), KKT violation zero) and the data points' solution is
    that of the unpadded problem; the padding is trimmed off (``n_iter``
    counts the padding points' single steps too).
    """
    n = K.shape[-1]
    size = _linalg.problem_size(n)
    K = _linalg.pad_gram(K, size)
    y = _linalg.pad_labels(y, size)
    row_weights = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    C = np.expand_dims(np.asarray(C, dtype=np.float64), -1) * _linalg.pad_vector(row_weights, size, fill=1.0)
    max_iter = _default_max_iter(size) if max_iter is None else max_iter
    alpha, theta, n_iter = ascend(K, y, C, tol, max_iter=max_iter)
    alpha_host = np.asarray(alpha)
    n_free = int(np.max(np.sum((alpha_host > 0) & (alpha_host < C), axis=-1)))
    # the free-set buffer is at least the smallest padded size: a smaller one would be one more compiled program
    # (per problem size) for a polish whose cost at that size is next to nothing
    max_free = _linalg.buffer_size(n_free, size, smallest=_linalg.SMALLEST_PROBLEM_SIZE)
    solution = finish(K, y, C, alpha, theta, n_iter, tol, max_iter=max_iter, max_free=max_free)
    return solution._replace(alpha=np.asarray(solution.alpha)[..., :n], theta=np.asarray(solution.theta)[..., :n],
                             marginal=np.asarray(solution.marginal)[..., :n])


@float64
def solve_dual_batch(
    K: Array, y: Array, C: Array, *, weights=None, tol: float = 1e-8, max_iter: int | None = None,
    strategy: str = "auto"
) -> DualSolution:
    """:func:`solve_dual` over a batch: ``K`` of shape (B, n, n), ``C`` of shape (B,), point i's box C w_i
    (``weights`` (n,); None: every w_i = 1).

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
    return _solve_adaptive(ascend, finish, K, jnp.asarray(y, dtype=K.dtype), C, tol, max_iter, weights)


def solve_dual_boxes(K: Array, y: Array, boxes: Array, **options) -> DualSolution:
    """:func:`solve_dual_batch` on one (n, n) Gram matrix ``K`` for each box in ``boxes`` (shape (B,)), point i's
    box ``boxes`` times its weight (``options["weights"]``).

    With K = k0 K_1 the MAP solution depends on (C, k0) only through the box
    P = C k0: the dual on K_1 with box P gives b, and alpha = b / k0 (theory:
    "Hyperparameter selection"). So one Gram matrix serves a whole line of
    hyperparameters.
    """
    K = jnp.asarray(K)
    boxes = jnp.asarray(boxes, dtype=K.dtype)
    return solve_dual_batch(jnp.broadcast_to(K, (boxes.shape[0], *K.shape)), y, boxes, **options)


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
    weights: np.ndarray | None = None

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
    def boxes(self) -> np.ndarray:
        """Each point's upper bound C w_i on alpha_i."""
        return self.C * (np.ones(self.X.shape[0]) if self.weights is None else np.asarray(self.weights))

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
        # fixed-size blocks of rows: one compiled Gram matrix for every number of inputs (_linalg.on_row_blocks)
        return _linalg.on_row_blocks(lambda X: np.asarray(gram_matrix(self.kernel, X, self.X[sv])) @ coef, X)

    @float64
    def predict(self, X) -> np.ndarray:
        """Class labels: ``classes[1]`` where theta*(x) > 0, else ``classes[0]`` (scikit-learn's tie rule)."""
        return np.where(self.decision_function(X) > 0, self.classes[1], self.classes[0])


@float64
def fit_map(X, y, *, C: float = 1.0, kernel: Kernel | None = None, sample_weight=None, tol: float = 1e-8,
            max_iter: int | None = None) -> MapSVM:
    """Fit the MAP SVM (the standard SVM with the bias folded into the kernel).

    Parameters
    ----------
    X : (n_samples, n_features) finite inputs.
    y : (n_samples,) labels of exactly two classes (any two values; the
        larger one in sorted order becomes +1).
    C : positive penalty (the likelihood's inverse temperature).
    kernel : a :mod:`bayesvm.kernels` kernel (default ``RBF()``).
    sample_weight : (n_samples,) non-negative weights: point i's box is C w_i, as in scikit-learn's SVC (theory:
        "Weights and repeated rows").
    tol : KKT tolerance in margin units (raised to the rounding floor n eps C max_i w_i K(x_i, x_i) where that
        is larger: :func:`kkt_tolerance`).
    max_iter : coordinate-ascent step budget.
    """
    data = training_data(X, y, sample_weight)
    if data.classes.size > 2:
        check_labels(y, np.shape(X)[0])  # raises: exactly two classes
    C = check_positive(C, "C")
    kernel = check_kernel(RBF() if kernel is None else kernel, data.X.shape[1])
    tol = check_positive(tol, "tol")
    return fit_map_on_gram(gram_matrix(kernel, data.X), data.X, data.Y[0], data.classes, C, kernel,
                           weights=data.weights, tol=tol, max_iter=max_iter)


def _convergence_message(solution: DualSolution, K: np.ndarray, C: float, weights, tol: float,
                         max_iter: int | None) -> str:
    """Why a solve stopped short of its tolerance, and what to pass instead.

    The box times the prior variance, C max_i w_i K(x_i, x_i), is what makes the dual hard: at or above
    :data:`_HARD_MARGIN_BOX` the solution is close to a hard-margin one, whose Gram matrix restricted to the
    support vectors is near-singular where inputs are (nearly) repeated, and both coordinate steps and the
    free-set Newton polish stall.
    """
    n = K.shape[0]
    budget = _default_max_iter(_linalg.problem_size(n)) if max_iter is None else max_iter
    largest_weight = 1.0 if weights is None else float(np.max(weights))
    box_variance = float(C) * largest_weight * float(np.max(np.diagonal(K)))
    steps = int(solution.n_iter)
    text = (f"the SVM dual solver stopped at KKT violation {float(solution.kkt_violation):.2e} > "
            f"{float(solution.tolerance):.2e} (tol={tol:g}, or the rounding floor n eps C max K(x, x) where that is "
            f"larger) after {steps} coordinate steps{' (all of max_iter)' if steps >= budget else ''} and "
            f"{int(solution.n_polish)} polish rounds, so the marginal set (and the evidence) may be inexact. ")
    remedies = [f"a larger max_iter (it was {budget})",
                f"a looser tol (if a violation of {float(solution.kkt_violation):.1e} margin units is acceptable)"]
    if box_variance >= _HARD_MARGIN_BOX:
        text += (f"The box times the largest prior variance, C max w_i K(x_i, x_i) = {box_variance:.3g}, is large: the "
                 "dual is then close to a hard-margin problem on a near-singular Gram matrix (nearly repeated inputs "
                 "among the support vectors), where coordinate steps and the Newton polish converge slowly. ")
        remedies.insert(0, f"a smaller C or a smaller kernel amplitude and offset (C max w_i K(x_i, x_i) below "
                           f"{_HARD_MARGIN_BOX:g})")
    return text + "Pass " + ", or ".join(remedies) + "."


def fit_map_on_gram(K, X: np.ndarray, y_pm: np.ndarray, classes: np.ndarray, C: float, kernel: Kernel, *,
                    weights: np.ndarray | None = None, tol: float = 1e-8, max_iter: int | None = None) -> MapSVM:
    """:func:`fit_map` on validated data whose prior covariance K = kernel(X, X) is already built (the layers
    below a public entry point, which share one Gram matrix between several fits and estimates); ``weights``: the
    rows' weights (None: 1 each)."""
    solution = _solve_adaptive(_ascend_jit, _finish_jit, K, np.asarray(y_pm, dtype=np.float64),
                               np.asarray(C, dtype=np.float64), tol, max_iter, weights)
    if not bool(solution.converged):
        warn_user(_convergence_message(solution, np.asarray(K), C, weights, tol, max_iter), ConvergenceWarning)
    return MapSVM(X=X, y=y_pm, classes=classes, kernel=kernel, C=C, solution=solution, weights=weights)
