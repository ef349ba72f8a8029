"""The phases of the box-constrained SVM dual solver of :mod:`bayesvm.solver.dual`.

Greedy coordinate ascent (single and pair steps) to a loose tolerance, then an exact polish of the
free set: the primal-dual active-set iteration (fast, not monotone) and the
monotone projected Newton iteration that takes over where it cycles. The
module docstring of :mod:`bayesvm.solver.dual` describes how they are combined.
All functions are pure and jit/vmap-compatible (fixed array shapes; the free
set lives in a padded buffer of static size ``max_free``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _linalg

#: at most this many active-set iterations per polish
_MAX_ACTIVE_SET_ROUNDS = 30
#: relative jitter of the free-set Cholesky; iterative refinement removes its effect on the solution
_JITTER = 1e-12
_REFINEMENT_STEPS = 3


def projected_gradient_abs(alpha, g, C):
    at_lower = alpha <= 0.0
    at_upper = alpha >= C
    return jnp.where(at_lower, jnp.maximum(g, 0.0), jnp.where(at_upper, jnp.maximum(-g, 0.0), jnp.abs(g)))


def best_step(K, y, C, alpha, g, diag):
    """The better of the best single-coordinate step and the best two-coordinate (pair) step.

    With beta = alpha * y and G = y g the dual gradient in beta:

    * single coordinate k: the clipped Newton step to clip(a_k + g_k / K_kk, 0, C_k), gain
      d_k g_k - d_k^2 K_kk / 2;
    * pair (i, j): beta_i rises by t and beta_j falls by t, a direction along which the constant part
      of K (the offset, the bias's prior variance) cancels: its curvature is
      K_ii + K_jj - 2 K_ij, not K_ii. i maximises G over the points whose beta can rise, t is the
      Newton step (G_i - G_j) / (K_ii + K_jj - 2 K_ij) cut at both boxes, and j maximises the exact
      gain t (G_i - G_j) - t^2 (K_ii + K_jj - 2 K_ij) / 2 (the second-order working-set selection of
      Fan, Chen & Lin 2005, JMLR 6, with the clipped gain).

    Single steps alone stall where the offset dominates K: each moves the bias by a whole K_kk-sized
    amount and the next one moves it back; SMO's pair steps leave the bias alone (for SMO they are
    forced by the equality constraint sum a_i y_i = 0; here they are merely good directions). The
    curvature is floored at eps (K_ii + K_jj), its rounding error. O(n): one row of K.

    Returns (index, new, gain): the two coordinates changed (equal for a single step), their new
    values (end points are set exactly at the bound they reach) and the step's gain.
    """
    C = jnp.broadcast_to(C, alpha.shape)
    single_new = jnp.clip(alpha + g / diag, 0.0, C)
    single_step = single_new - alpha
    single_gain = single_step * g - 0.5 * single_step**2 * diag
    k = jnp.argmax(single_gain)

    G = y * g
    up_room = jnp.where(y > 0.0, C - alpha, alpha)  # how far beta may rise
    down_room = jnp.where(y > 0.0, alpha, C - alpha)  # how far beta may fall
    i = jnp.argmax(jnp.where(up_room > 0.0, G, -jnp.inf))
    curvature = diag[i] + diag - 2.0 * K[i]
    curvature = jnp.maximum(curvature, jnp.finfo(K.dtype).eps * (diag[i] + diag))
    room = jnp.minimum(up_room[i], down_room)
    t = jnp.clip((G[i] - G) / curvature, 0.0, room)
    pair_gain = jnp.where(jnp.arange(alpha.shape[0]) == i, 0.0, t * (G[i] - G) - 0.5 * t**2 * curvature)
    j = jnp.argmax(pair_gain)
    t_j = t[j]
    new_i = jnp.where(t_j >= up_room[i], jnp.where(y[i] > 0.0, C[i], 0.0), alpha[i] + t_j * y[i])
    new_j = jnp.where(t_j >= down_room[j], jnp.where(y[j] > 0.0, 0.0, C[j]), alpha[j] - t_j * y[j])

    use_pair = pair_gain[j] > single_gain[k]
    index = jnp.where(use_pair, jnp.stack([i, j]), jnp.stack([k, k]))
    new = jnp.where(use_pair, jnp.stack([new_i, new_j]), jnp.stack([single_new[k], single_new[k]]))
    return index, new, jnp.maximum(pair_gain[j], single_gain[k])


def take_step(K, y, alpha, theta, index, new):
    """Set alpha[index] = new and update theta = K (alpha y) by the changed rows (O(n) per row)."""
    delta = new - alpha[index]
    delta = delta.at[1].set(jnp.where(index[0] == index[1], 0.0, delta[1]))  # a single step: one row
    return alpha.at[index].set(new), theta + (y[index] * delta) @ K[index]


def coordinate_ascent(K, y, C, alpha, theta, tol, max_iter, n_iter):
    """Greedy single- and two-coordinate ascent until the KKT violation is <= tol.

    Each step takes the better of the best clipped single-coordinate Newton step and the best pair
    step (:func:`best_step`) and updates theta by one or two rows of K (O(n) per step).
    """
    diag = jnp.maximum(jnp.diagonal(K), jnp.finfo(K.dtype).tiny)

    def violation(alpha, theta):
        return jnp.max(projected_gradient_abs(alpha, 1.0 - y * theta, C))

    def cond(state):
        alpha, theta, it = state
        return (violation(alpha, theta) > tol) & (it < max_iter)

    def body(state):
        alpha, theta, it = state
        index, new, _ = best_step(K, y, C, alpha, 1.0 - y * theta, diag)
        alpha, theta = take_step(K, y, alpha, theta, index, new)
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
    u = refined_solve(K_ff, rhs)
    alpha_free = _linalg.scatter_subset(u, index, valid, n) * y
    return jnp.where(free, alpha_free, jnp.where(upper, C, 0.0))


def active_set_polish(K, y, C, alpha, max_free):
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


def refined_solve(A, b):
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


def monotone_polish(K, y, C, alpha, theta, max_free, tol):
    """Projected Newton iteration on the free set (monotone in the dual objective).

    Each round frees the points whose KKT conditions are violated at a bound
    (most violated first, up to the buffer) and computes the Newton direction
    d of the dual on the free set. Three feasible steps are compared by their
    exact gain g.D - D^T Q D / 2 (O(m^2) on the gathered free set):

    * the Newton point projected onto the box, clip(alpha + d, 0, C) - alpha,
      which sends many points to their bounds at once (the step of a
      primal-dual active-set method, Hintermueller, Ito & Kunisch 2003, taken
      only when it gains);
    * d without the components that would leave the box from a bound, to the
      exact line maximum, cut at the first bound (a ratio test; its gain is
      never negative);
    * the best single- or two-coordinate step (:func:`best_step`), whose gain is positive while any
      KKT condition is violated, so the iteration cannot stall.

    The largest gain is taken, so the dual objective rises every round. Once the
    free set is right a full step lands on the exact solution, where y theta = 1
    on the free set to rounding. Returns (alpha, theta, fits, rounds); ``fits``
    is False if the free set outgrew ``max_free``.
    """

    diag = jnp.maximum(jnp.diagonal(K), jnp.finfo(K.dtype).tiny)
    C = jnp.broadcast_to(C, alpha.shape)  # one box per point, gathered with the free set

    def violation(alpha, theta):
        return projected_gradient_abs(alpha, 1.0 - y * theta, C)

    def cond(state):
        alpha, theta, overflow, rounds = state
        return (jnp.max(violation(alpha, theta)) > tol) & ~overflow & (rounds < _MAX_ACTIVE_SET_ROUNDS)

    def body(state):
        alpha, theta, _, rounds = state
        g = 1.0 - y * theta
        free = _free_with_worst_violators(alpha, violation(alpha, theta), C, max_free)
        index, valid = _linalg.subset_indices(free, max_free)
        K_ff = _linalg.padded_submatrix(K, index, valid)
        y_f, g_f, a_f, C_f = (_linalg.padded_vector(v, index, valid) for v in (y, g, alpha, C))
        # Newton direction d = Q_FF^-1 g_F, Q = diag(y) K diag(y): an ascent direction even for
        # singular K_FF (the refined solve is positive definite); near-null components are long
        # steps that the line search and the bounds cut back
        newton_point = a_f + y_f * refined_solve(K_ff, y_f * g_f)

        def gain(step):
            w = y_f * step
            return g_f @ step - 0.5 * w @ (K_ff @ w)

        # candidate 1: the Newton point on the free set projected onto the box (a primal-dual
        # active-set step: many points reach their bounds at once)
        projected = jnp.where(valid, jnp.clip(newton_point, 0.0, C_f) - a_f, 0.0)
        # candidate 2: along the Newton direction, cut at the first bound
        ratio = _ratio_test_step(K_ff, y_f, g_f, a_f, newton_point - a_f, valid, C_f)
        newton = jnp.where(gain(projected) > gain(ratio), projected, ratio)
        # candidate 3: the best single- or two-coordinate step (positive gain while any KKT condition is violated)
        step_index, step_new, step_gain = best_step(K, y, C, alpha, g, diag)

        def newton_round():
            return alpha.at[index].add(jnp.where(valid, newton, 0.0)), theta + K[:, index] @ (y_f * newton)

        alpha, theta = jax.lax.cond(gain(newton) >= step_gain, newton_round,
                                    lambda: take_step(K, y, alpha, theta, step_index, step_new))
        return alpha, theta, jnp.sum(free) > max_free, rounds + 1

    overflow0 = jnp.sum((alpha > 0.0) & (alpha < C)) > max_free
    alpha, theta, overflow, rounds = jax.lax.while_loop(cond, body, (alpha, theta, overflow0, jnp.array(0)))
    theta = K @ (alpha * y)  # clear the rounding of the incremental updates
    return alpha, theta, ~overflow, rounds


def _free_with_worst_violators(alpha, violation, C, max_free):
    """The free set 0 < alpha < C plus the bound points with the largest KKT violations, up to ``max_free``."""
    free = (alpha > 0.0) & (alpha < C)
    capacity = max_free - jnp.sum(free)
    at_bound_violation = jnp.where(free, 0.0, violation)
    threshold = jnp.sort(at_bound_violation)[::-1][jnp.clip(capacity - 1, 0, alpha.shape[0] - 1)]
    return free | ((at_bound_violation > 0.0) & (at_bound_violation >= threshold) & (capacity > 0))


def _ratio_test_step(K_ff, y_f, g_f, a_f, d, valid, C):
    """Step along the Newton direction ``d`` to the exact line maximum, cut at the first bound.

    Components of ``d`` that would leave the box from a bound are dropped; the
    step lands exactly on the bound that blocks it. Its gain is never negative.
    """
    d = jnp.where(((a_f <= 0.0) & (d < 0.0)) | ((a_f >= C) & (d > 0.0)), 0.0, d)
    curvature = (y_f * d) @ (K_ff @ (y_f * d))
    line_max = jnp.where(curvature > 0.0, (g_f @ d) / curvature, jnp.inf)
    room = jnp.where(d > 0.0, (C - a_f) / d, jnp.where(d < 0.0, -a_f / d, jnp.inf))
    room = jnp.where(valid, room, jnp.inf)
    blocking = jnp.argmin(room)
    t = jnp.maximum(jnp.minimum(line_max, room[blocking]), 0.0)
    ratio = jnp.where(valid, jnp.clip(a_f + t * d, 0.0, C) - a_f, 0.0)
    snapped = jnp.where(d[blocking] > 0.0, C, 0.0) - a_f[blocking]
    return jnp.where((room[blocking] <= line_max) & (jnp.arange(a_f.shape[0]) == blocking), snapped, ratio)
