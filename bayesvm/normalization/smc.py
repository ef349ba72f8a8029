"""Adaptive tempered sequential Monte Carlo with elliptical slice moves: the sampler behind :mod:`bayesvm.normalization.annealing`.

Pure JAX, jit-compiled, R independent runs of N particles batched on a
leading axis. Each step chooses the next temperature so that the incremental
weights keep a target effective sample size (Jasra et al. 2011; the
conditional rule of Zhou, Johansen & Aston 2016), adds the log mean weight
to ln Z, resamples systematically (Kitagawa 1996) and moves every particle by
elliptical slice sampling (Murray, Adams & MacKay 2010). The public entry
point, with input checks and the combination of the runs, is
:func:`bayesvm.normalization.annealing.annealed_log_expectation` (theory: "Annealing:
tempered sequential Monte Carlo").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from ..compilation import jit

Array = jax.Array

__all__ = ["SMCInfo", "SMCRuns", "SMCState", "build_step", "init", "moves_at_target", "smc_runs"]


def _ess_fraction(log_weights: Array) -> Array:
    """Effective sample size (sum w)^2 / sum w^2 over the last axis, as a fraction of its length."""
    n = log_weights.shape[-1]
    return jnp.exp(2.0 * logsumexp(log_weights, -1) - logsumexp(2.0 * log_weights, -1) - jnp.log(n))


def _next_increment(ll: Array, beta: Array, target_ess: Array | float, n_bisections: int = 60) -> Array:
    """Largest delta in (0, 1 - beta] with ESS(exp(delta ll)) >= target_ess, per run.

    The particles are equally weighted after resampling, so this is the
    conditional ESS rule of Zhou, Johansen & Aston (2016); the ESS of
    exp(delta ll) decreases in delta, so bisection finds it.
    """
    room = 1.0 - beta

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        good = _ess_fraction(mid[:, None] * ll) >= target_ess
        return jnp.where(good, mid, lo), jnp.where(good, hi, mid)

    lo, _ = jax.lax.fori_loop(0, n_bisections, bisect, (jnp.zeros_like(room), room))
    return jnp.where(_ess_fraction(room[:, None] * ll) >= target_ess, room, lo)


def _systematic_resample(key: Array, log_weights: Array) -> Array:
    """Systematic resampling indices (Kitagawa 1996), one row of weights per run."""
    n_runs, n = log_weights.shape
    cdf = jnp.cumsum(jax.nn.softmax(log_weights, axis=-1), axis=-1)
    cdf = cdf / cdf[:, -1:]
    u = (jax.random.uniform(key, (n_runs, 1), cdf.dtype) + jnp.arange(n)) / n
    return jnp.minimum(jax.vmap(jnp.searchsorted)(cdf, u), n - 1)


#: a slice move's shrinkage loop runs over all R N particles until at most the first of these shares of them is left
#: unaccepted, then over those alone (gathered) until at most the second share is left, then over those until every
#: one is accepted: the same moves as a lockstep loop over every particle until the slowest is accepted, in less
#: time, while each buffer's loop is another copy of the likelihood's program to compile (CHANGELOG.md, 2026-11-26)
STRAGGLER_SHARES = (1 / 2, 1 / 8)


def _elliptical_slice(key, theta, ll, beta, chol, loglik, max_shrinks: int):
    """One elliptical slice move (Murray, Adams & MacKay 2010) of every particle.

    Target N(theta; 0, chol chol^T) exp(beta L(theta)); theta has shape (R, N, M) with chol (M, D), D <= M (a tall
    factor carries linear images of the whitened draw besides it, see :func:`smc_runs`),
    ll = L(theta) shape (R, N), beta shape (R,); ``loglik`` maps (P, M) to (P,). The ellipse
    theta cos(phi) + nu sin(phi), nu = chol w, keeps the prior invariant; the
    bracket on phi shrinks towards 0 until beta L exceeds the slice level.
    After ``max_shrinks`` shrinkages without acceptance the particle stays put:
    the shrinkage sequence from x to x' and back has the same length, so the
    truncated kernel is still reversible. Returns the new theta, ll, the
    number of likelihood evaluations per particle and whether it moved.

    Every particle draws its uniforms (slice level, first angle, one per shrinkage) up front, so its path does
    not depend on the others, and the moves are exactly those of a loop over all of them in lockstep. That loop
    would run until the slowest is accepted (about 6 evaluations per move on average, but the cap nearly every
    time); here the particles still unaccepted are gathered into smaller buffers as they
    become few (:data:`STRAGGLER_SHARES`).
    """
    R, N, M = theta.shape
    D = chol.shape[1]
    k_nu, k_u = jax.random.split(key)
    w = jax.random.normal(k_nu, (R, N, D), theta.dtype)
    # uniforms for the slice level, the first angle and every shrinkage, in one draw
    u = jax.random.uniform(k_u, (max_shrinks + 2, R * N), ll.dtype)
    ll = ll.reshape(R * N)
    theta, nu = theta.reshape(R * N, M), (w @ chol.T).reshape(R * N, M)
    beta = jnp.repeat(beta, N)
    level = beta * ll + jnp.log(u[0])
    phi = 2.0 * jnp.pi * u[1]

    def propose(fixed, c):
        # evaluate the angle phi, accept it or shrink the bracket towards 0 and redraw
        theta, nu, beta, level, u = fixed
        i, new, new_ll, done, phi, lo, hi, evals = c
        cand = theta * jnp.cos(phi)[:, None] + nu * jnp.sin(phi)[:, None]
        cand_ll = loglik(cand)
        accept = ~done & (beta * cand_ll > level)
        new = jnp.where(accept[:, None], cand, new)
        new_ll = jnp.where(accept, cand_ll, new_ll)
        evals = evals + ~done
        done = done | accept
        lo = jnp.where(phi < 0, phi, lo)
        hi = jnp.where(phi > 0, phi, hi)
        phi = jnp.where(done, phi, lo + (hi - lo) * u[:, jnp.minimum(i + 2, max_shrinks + 1)])
        return i + 1, new, new_ll, done, phi, lo, hi, evals

    def shrink(fixed, carry, buffers: tuple[int, ...]):
        # shrink until at most buffers[0] particles are left unaccepted, then those alone in the next buffers
        if not buffers:
            return jax.lax.while_loop(lambda c: (c[0] <= max_shrinks) & ~jnp.all(c[3]),
                                      functools.partial(propose, fixed), carry)
        carry = jax.lax.while_loop(lambda c: (c[0] <= max_shrinks) & (jnp.sum(~c[3]) > buffers[0]),
                                   functools.partial(propose, fixed), carry)
        idx = jnp.argsort(carry[3], stable=True)[: buffers[0]]  # those not yet accepted first
        fixed_left, carry_left = jax.tree.map(lambda a: a[idx], (fixed, carry[1:]))
        left = shrink(fixed_left, (carry[0], *carry_left), buffers[1:])
        return (left[0], *jax.tree.map(lambda a, b: a.at[idx].set(b), carry[1:], left[1:]))

    fixed = (theta, nu, beta, level, u.T)
    carry = (0, theta, ll, jnp.zeros(ll.shape, bool), phi, phi - 2.0 * jnp.pi, phi, jnp.zeros_like(ll))
    buffers = tuple(sorted({int(R * N * share) for share in STRAGGLER_SHARES} - {0}, reverse=True))
    _, new, new_ll, done, phi, _, _, evals = shrink(fixed, carry, buffers)
    return new.reshape(R, N, -1), new_ll.reshape(R, N), evals.reshape(R, N), done.reshape(R, N)


class SMCState(NamedTuple):
    """R tempered-SMC runs between two steps; every field but ``t`` has the runs on its leading axis."""

    t: Array  # steps taken (scalar)
    theta: Array  # particles (R, N, M), equally weighted
    ll: Array  # their log-likelihoods L(theta) (R, N)
    beta: Array  # current temperature (R,)
    log_z: Array  # ln Z accumulated so far (R,)


class SMCInfo(NamedTuple):
    """What one step did, per run: whether the run was still below beta = 1 (``active``), the temperature it
    reached, the ESS fraction of its incremental weights, and for the moves at a temperature below 1 the mean slice
    evaluations per move and the share of moves that left a particle in place (summed over its moves) and their
    number."""

    active: Array
    beta: Array
    ess: Array
    evals: Array
    stuck: Array
    n_moves: Array


def init(key: Array, chol: Array, loglik: Callable, n_runs: int, n_particles: int) -> SMCState:
    """R runs of N particles drawn from the prior N(0, chol chol^T) at beta = 0 (``loglik`` maps (P, M) to (P,))."""
    w = jax.random.normal(key, (n_runs, n_particles, chol.shape[1]), chol.dtype)
    theta = w @ chol.T
    zeros = jnp.zeros(n_runs, chol.dtype)
    ll = loglik(theta.reshape(n_runs * n_particles, -1)).reshape(n_runs, n_particles)
    return SMCState(0, theta, ll, zeros, zeros)


def build_step(chol: Array, loglik: Callable, temperatures: Array, adaptive: Array, *, target_ess: Array | float,
               temperature_cap: Array | int, n_mcmc_steps: Array | int, max_shrinks: int,
               move_last: Array | bool) -> Callable[[Array, SMCState], tuple[SMCState, SMCInfo]]:
    """The tempering step ``step(key, state) -> (state, info)`` of :func:`smc_runs`' loop.

    Choose beta_{t+1} (adaptive: the largest step that keeps ``target_ess`` of the particles effective; otherwise
    the next of ``temperatures``; at ``temperature_cap`` steps the rest of the way to 1), add
    ln mean_i exp((beta_{t+1} - beta_t) L_i) to ln Z, resample systematically and move every particle
    ``n_mcmc_steps`` times at beta_{t+1} by elliptical slice sampling (after the last reweighting only with
    ``move_last``). Runs already at beta = 1 are left as they are.
    """

    def step(key: Array, c: SMCState) -> tuple[SMCState, SMCInfo]:
        t, beta = c.t, c.beta
        R, N = c.ll.shape
        zeros = jnp.zeros(R, c.ll.dtype)
        active = beta < 1.0
        delta = jax.lax.cond(
            adaptive,
            lambda: _next_increment(c.ll, beta, target_ess),
            lambda: jnp.full(R, temperatures[t + 1] - temperatures[t]),
        )
        # the cap's step goes the rest of the way: the work is bounded, the estimate still unbiased
        delta = jnp.where(active, jnp.where(t + 1 >= temperature_cap, 1.0 - beta, delta), 0.0)
        log_w = delta[:, None] * c.ll
        log_z = c.log_z + logsumexp(log_w, -1) - jnp.log(N)
        beta = jnp.where(active & (delta >= 1.0 - beta), 1.0, beta + delta)
        resample_key, move_key = jax.random.split(key)
        idx = _systematic_resample(resample_key, log_w)
        theta = jnp.take_along_axis(c.theta, idx[..., None], 1)
        ll = jnp.take_along_axis(c.ll, idx, 1)

        def moves(theta, ll):
            return _mutate(move_key, theta, ll, beta, chol, loglik, max_shrinks, n_mcmc_steps)

        # after the last reweighting the moves only serve callers that keep the particles
        theta, ll, evals, stuck = jax.lax.cond(
            jnp.any(beta < 1.0) | move_last, moves, lambda theta, ll: (theta, ll, zeros, zeros), theta, ll
        )
        counted = active & (beta < 1.0)
        info = SMCInfo(active, beta, _ess_fraction(log_w), jnp.where(counted, evals, 0.0),
                       jnp.where(counted, stuck, 0.0), jnp.where(counted, n_mcmc_steps, 0))
        return SMCState(t + 1, theta, ll, beta, log_z), info

    return step


class SMCRuns(NamedTuple):
    """The runs of :func:`smc_runs`: ln Z per run (R,), the steps each took, the temperatures reached (NaN-padded,
    (R, max_temperatures + 1)), the smallest ESS fraction of each run's incremental weights, the mean slice
    evaluations per move, the share of moves left in place and the number of moves (each summed over the runs),
    the final temperatures (R,) and the particles (R, N, M)."""

    log_z: Array
    steps: Array
    schedule: Array
    min_ess: Array
    evals: Array
    stuck: Array
    n_moves: Array
    beta: Array
    theta: Array


def _mutate(key, theta, ll, beta, chol, loglik, max_shrinks: int, n_steps: Array | int):
    """``n_steps`` elliptical slice moves of every particle at temperature beta; with the mean likelihood
    evaluations per move and the share of moves that left a particle in place, summed over the steps, per run."""
    zeros = jnp.zeros(theta.shape[0], theta.dtype)

    def move(i, m):
        theta, ll, evals, stuck = m
        theta, ll, n_eval, moved = _elliptical_slice(jax.random.fold_in(key, i), theta, ll, beta, chol, loglik,
                                                     max_shrinks)
        return theta, ll, evals + jnp.mean(n_eval, -1), stuck + jnp.mean(~moved, -1)

    return jax.lax.fori_loop(0, n_steps, move, (theta, ll, zeros, zeros))


@jit(static_argnames=("log_likelihood", "max_shrinks"))
def moves_at_target(log_likelihood: Callable, chol: Array, key: Array, args: tuple, theta: Array,
                    n_mcmc_steps: Array | int, *, max_shrinks: int) -> Array:
    """``n_mcmc_steps`` elliptical slice moves of particles theta (R, N, M) at beta = 1, the target
    N(theta; 0, chol chol^T) exp(log_likelihood(theta, *args)) (chol square): the moves :func:`smc_runs` makes after
    its last reweighting with ``move_last``, for particles kept without them (resampled, with duplicates) by a caller
    that needs them decorrelated only sometimes."""
    R, N, M = theta.shape
    loglik = jax.vmap(lambda t: log_likelihood(t, *args))
    ll = loglik(theta.reshape(R * N, M)).reshape(R, N)
    return _mutate(key, theta, ll, jnp.ones(R, theta.dtype), chol, loglik, max_shrinks, n_mcmc_steps)[0]


@jit(
    static_argnames=(
        "log_likelihood",
        "n_particles",
        "n_runs",
        "max_temperatures",
        "max_shrinks",
    ),
)
def smc_runs(
    log_likelihood: Callable,
    chol: Array,
    key: Array,
    args: tuple,
    temperatures: Array,
    adaptive: Array,
    *,
    n_particles: int,
    n_runs: int,
    n_mcmc_steps: Array | int,
    target_ess: Array | float,
    max_temperatures: int,
    max_shrinks: int,
    move_last: Array | bool = False,
    batch: Array | int = 0,
    temperature_cap: Array | int = 2**30,
):
    """R independent tempered SMC runs of N particles, batched on a leading axis: :func:`init`, then the step of
    :func:`build_step` until every run reaches beta = 1, recording the temperatures, the smallest ESS and the moves'
    work from each step's :class:`SMCInfo`.

    The step chooses beta_{t+1} adaptively, or from ``temperatures``, a
    schedule padded with ones to length max_temperatures + 1, so that both
    kinds of schedule share one compilation; after the last reweighting it moves the particles only with
    ``move_last``, when the particles themselves are wanted.
    ``n_mcmc_steps``, ``target_ess`` and ``move_last`` are traced, so every number of moves, every target and
    both kinds of caller share one compilation.

    ``chol`` (M, D) may be tall (M > D): the particles are then theta = chol w, w ~ N(0, I_D), of which the
    likelihood may read linear images beside w itself. The ellipse is linear in w, so every image moves with it
    at O(M) per likelihood evaluation instead of a matrix product inside the likelihood (the EP-started route,
    :mod:`bayesvm.normalization.ep_started`, carries its whitened latents and two images of them this way).
    ``temperature_cap`` (traced, at most ``max_temperatures``, the schedule's buffer) bounds the steps: a run that
    reaches it takes its last step to beta = 1 (every schedule gives an unbiased estimate; a coarse last step a
    noisier one), so the work is known before the run starts.
    ``batch`` (traced) is folded into ``key``: a caller that computes its runs in several calls gives each call its
    own index, so the calls draw independent runs from one key without splitting it on the host (an eagerly split
    key compiles programs of its own).
    Returns the :class:`SMCRuns`.
    """
    loglik = jax.vmap(lambda theta: log_likelihood(theta, *args))
    init_key, loop_key = jax.random.split(jax.random.fold_in(key, batch))
    step = build_step(chol, loglik, temperatures, adaptive, target_ess=target_ess, temperature_cap=temperature_cap,
                      n_mcmc_steps=n_mcmc_steps, max_shrinks=max_shrinks, move_last=move_last)
    state = init(init_key, chol, loglik, n_runs, n_particles)
    zeros = jnp.zeros(n_runs, chol.dtype)
    schedule = jnp.full((n_runs, max_temperatures + 1), jnp.nan, chol.dtype).at[:, 0].set(0.0)
    # what the runs record beside the state: the temperatures reached, the smallest ESS, the moves' work
    record = (schedule, jnp.ones(n_runs), zeros, zeros, zeros)

    def unfinished(carry) -> Array:
        state = carry[0]
        return jnp.any(state.beta < 1.0) & (state.t < jnp.minimum(temperature_cap, max_temperatures))

    def body(carry):
        state, (schedule, min_ess, evals, stuck, n_moves) = carry
        new, info = step(jax.random.fold_in(loop_key, state.t), state)
        schedule = schedule.at[:, state.t + 1].set(jnp.where(info.active, info.beta, jnp.nan))
        min_ess = jnp.where(info.active, jnp.minimum(min_ess, info.ess), min_ess)
        return new, (schedule, min_ess, evals + info.evals, stuck + info.stuck, n_moves + info.n_moves)

    final, (schedule, min_ess, evals, stuck, n_moves) = jax.lax.while_loop(unfinished, body, (state, record))
    steps = jnp.sum(jnp.isfinite(schedule), -1) - 1
    return SMCRuns(final.log_z, steps, schedule, min_ess, jnp.sum(evals), jnp.sum(stuck), jnp.sum(n_moves),
                   final.beta, final.theta)
