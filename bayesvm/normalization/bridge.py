"""ln N(D) at a new point from the particles of a nearby one: tempered SMC along the bridge between two integrands.

Along a search path (:mod:`bayesvm.normalization.path`) the integrand has the form

    N(D; x) = E_{w ~ N(0, I)}[ f(w; x) ],  ln f(w; x) = g(A(x) w; p(x)),

with A(x) a linear map (the prior's square-root factor) and g a sum over the
latents (sum_i ln nu(theta_i; C), or its smoothed form under a low-rank
prior). An anchor at x_a holds particles of pi_a(w), proportional to
N(w; 0, I) f(w; x_a), and ln N(D; x_a). At a nearby x_b,

    N(D; x_b) / N(D; x_a) = E_{w ~ pi_a}[ f(w; x_b) / f(w; x_a) ],

which tempered SMC anneals along the geometric bridge

    pi_beta(w) ~ N(w; 0, I) f(w; x_a)^(1 - beta) f(w; x_b)^beta,  beta: 0 -> 1

(annealing between two distributions, Neal 2001; the path-sampling view of a
ratio of normalising constants, Gelman & Meng 1998), starting from the
anchor's own particles. The elliptical slice moves run on the stacked linear
image theta = (w, A_a w, A_b w), whose prior has the square-root factor
(I; A_a; A_b): an ellipse in w is an ellipse in theta, so this is slice
sampling in w, and a likelihood evaluation costs O(M) instead of two matrix
products.

Each run continues one of the anchor's runs, ln Z_b,r = ln Z_a,r + ln(bridge
ratio)_r, so the runs remain independent estimates of ln N(D; x_b) along a
path that starts at the prior, and their agreement tests that whole path.
Where the prior-started path to x_b is hard (the runs disagree at the
prior's budget), the bridge from a point whose runs agree only has to cover
the change between two nearby posteriors (theory: "Hyperparameter selection",
bridging a new anchor from a nearby one).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._precision import float64
from .annealing import AnnealingResult, _as_key, _checked_runs, _padded_schedule, _sampler_settings, _summarise
from .smc import smc_runs

Array = jax.Array

__all__ = ["annealed_bridge"]


@functools.lru_cache(maxsize=None)
def _bridge_log_likelihoods(log_sum: Callable, r: int, k: int) -> tuple[Callable, Callable]:
    """B(theta) = g(A_a w; p_a) and L(theta) = g(A_b w; p_b) - B(theta) on theta = (w, A_a w, A_b w), w of length r
    and A w of length k (one pair of functions per (g, r, k), so that the sampler compiles once for each)."""

    def base(theta, params_a, params_b):
        return log_sum(theta[r:r + k], *params_a)

    def increment(theta, params_a, params_b):
        return log_sum(theta[r + k:], *params_b) - log_sum(theta[r:r + k], *params_a)

    return base, increment


@float64
def annealed_bridge(log_sum: Callable, w, log_z_from, form_from: tuple, form_to: tuple, *, key=0,
                    n_mcmc_steps: int = 3, target_ess: float = 0.5, max_temperatures: int = 1000,
                    max_shrinks: int = 12) -> AnnealingResult:
    """ln N(D; x_b) run by run from an anchor's runs at x_a, by tempered SMC along the bridge (module docstring).

    log_sum: g(u, *params), a JAX function summing over the last axis; w: the anchor's particles (R, N, r),
    equally weighted within each of its R runs; log_z_from: those runs' ln Z_a,r (R,); form_from, form_to:
    (A, params) at x_a and x_b, A of shape (k, r). Returns the estimate at x_b over the R continued runs
    (its ``log_z_runs`` are ln Z_a,r plus each run's bridge), with the final particles w (R, N, r) from pi_b.
    """
    w = jnp.asarray(w, dtype=jnp.float64)
    n_runs, n_particles, r = w.shape
    (A_a, params_a), (A_b, params_b) = form_from, form_to
    k = A_a.shape[0]
    settings = _sampler_settings(n_particles, n_runs, n_mcmc_steps, target_ess, max_temperatures, max_shrinks)
    base, increment = _bridge_log_likelihoods(log_sum, r, k)
    chol = jnp.concatenate([jnp.eye(r, dtype=w.dtype), A_a, A_b])
    theta = jnp.concatenate([w, w @ A_a.T, w @ A_b.T], axis=-1)
    log_z, steps, schedule, min_ess, evals, stuck, n_moves, final_beta, particles = smc_runs(
        increment, chol, _as_key(key), (params_a, params_b), _padded_schedule(None, settings["max_temperatures"]),
        jnp.asarray(True), theta, base_log_likelihood=base, move_last=True, **settings,
    )
    log_z = _checked_runs(log_z, final_beta, settings["max_temperatures"])
    result = _summarise(
        np.asarray(log_z_from, dtype=np.float64) + log_z, steps=np.asarray(steps), schedule=np.asarray(schedule),
        min_ess=float(np.min(min_ess)), slice_evals=float(evals) / max(float(n_moves), 1.0),
        stuck=float(stuck) / max(float(n_moves), 1.0), n_particles=n_particles, n_mcmc_steps=n_mcmc_steps,
    )
    return dataclasses.replace(result, particles=particles[..., :r])
