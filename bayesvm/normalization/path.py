"""ln N(D) and its gradient along a search path, by reweighting tempered-SMC particles.

The normalisation factor over the n training inputs (theory: "The
normalisation factor") is a Gaussian integral,

    N(D; x) = E_{theta ~ N(0, K(x))}[ prod_i nu(theta_i; C(x)) ]
            = E_{z ~ N(0, I)}[ f(z; x) ],  f(z; x) = prod_i nu((L(x) z)_i; C(x)),

with L(x) the Cholesky factor of K(x) (whitened coordinates: the prior on z
no longer depends on x). Tempered SMC (Del Moral, Doucet & Jasra 2006;
:mod:`bayesvm.normalization.annealing`) at an anchor point x_a gives ln N(D; x_a) with its
standard error and S particles z_s from the normalised integrand
f(z; x_a) N(z; 0, I) / N(D; x_a). At any nearby x,

    N(D; x) / N(D; x_a) = E_{z ~ that distribution}[ f(z; x) / f(z; x_a) ]
                        ~= (1/S) sum_s w_s,  w_s = (Z_r(s) / Zbar) f(z_s; x) / f(z_s; x_a),

with each particle weighted by its run's share Z_r / Zbar of the anchor's
estimate (population annealing's weighted average over runs; Machta 2010),
an importance-sampling estimate that is a smooth, deterministic function of
x (the particles are held fixed: common random numbers), so a quasi-Newton
search can use it and its exact gradient (the Fisher identity
d ln N / dx = E[d ln f(z; x) / dx] under the reweighted particles, which is
what differentiating the estimate gives). When the weights degenerate (their
effective sample size falls below a fraction of S), or the point is far from
every anchor, the path re-anchors: tempered SMC runs again at the new point.
The estimate at the anchor itself is the SMC value (whose budget grows until
its runs agree, :func:`bayesvm.normalization.annealing.annealed_until_runs_agree`; under
the exact prior, where they still disagree at its cap, started again from EP's
Gaussian, :func:`bayesvm.normalization.ep_started.annealed_with_ep_fallback`), so the path is exactly
as accurate as tempered SMC there and degrades gracefully with distance; the
effective sample size says how far.

:class:`ReweightedPath` holds this logic for any prior; a :class:`PathPrior`
supplies the prior-specific parts: ln f(z; x) for the particles, how an
anchor is annealed, and where the prior counts as resolved.
:class:`NormalizationPath` is the path under the exact prior
(:class:`FullPathPrior`), :class:`bayesvm.normalization.low_rank.LowRankNormalizationPath`
the one under a low-rank prior (there z = w, the inducing coordinates).

Under the exact prior the factor L(x) carries the smallest diagonal jitter
(relative to the mean prior variance) that lets the Cholesky factorisation
succeed. The jitter is independent noise on every theta_i; where its
variance exceeds the margin's resolution (theory: "Numerical limits"), the
point is reported as not resolved and the search treats it as infeasible.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import logsumexp

from .. import _linalg
from .._precision import float64
from .annealing import AnnealingResult, _as_key, product_route_log_likelihood
from .bridge import annealed_bridge
from .ep_started import annealed_with_ep_fallback
from ..hyperparameters import MARGIN_RESOLUTION, kernel_at, penalty_at
from ..kernels import Kernel

Array = jax.Array

__all__ = [
    "ANCHOR_ANNEALING",
    "Annealed",
    "FullPathPrior",
    "NormalizationPath",
    "PathEstimate",
    "PathPrior",
    "ReweightedPath",
]

#: relative jitters tried, in order, for the Cholesky factor of the prior
_JITTERS = (0.0, 1e-13, 1e-11, 1e-9, 1e-7)
#: tempered-SMC budget at an anchor (64 particles x 8 runs = 512 particles to reweight)
ANCHOR_ANNEALING = {"n_particles": 64, "n_runs": 8, "n_mcmc_steps": 3}
#: re-anchor when the reweighted particles' effective sample size falls below this fraction
MIN_ESS_FRACTION = 0.25
#: or when the point is further than this from every anchor (largest coordinate difference, in log units):
#: importance weights can look healthy while missing mass the anchor's particles never reached
_MAX_ANCHOR_DISTANCE = 1.0
#: a new anchor is bridged from an anchor at most this far away (same distance), else annealed from the prior
_MAX_BRIDGE_DISTANCE = 2.0


class Annealed(NamedTuple):
    """What a prior's :meth:`PathPrior.anneal` hands the path: the SMC estimate and its particles.

    result: tempered SMC's ln N(D) at the anchor; z: its final particles as
    rows (S, k), in the coordinates whose distribution does not depend on x;
    aux: whatever else :meth:`PathPrior.log_integrand` needs, fixed per anchor.
    """

    result: AnnealingResult
    z: Array
    aux: Any


class PathPrior(Protocol):
    """The prior-specific part of a ln N(D) path (a JAX pytree, so that it enters jit as an argument).

    N(D; x) = E_{z ~ N(0, I)}[f(z; x)] for some coordinates z whose prior is
    free of x, with ln f(z; x) = log_sum(A z, *params) for a linear map A and
    parameters (A, params) = linear_form(x, aux); the path needs ln f, a way
    to anneal at an anchor, and the form at a new point for a bridge
    (:mod:`bayesvm.normalization.bridge`).
    """

    @staticmethod
    def log_sum(u: Array, *params) -> Array:
        """g(u; params): ln f as a sum over the last axis of u = A z."""

    def linear_form(self, x: Array, aux: Any) -> tuple[Array, tuple]:
        """(A, params) at x with what the prior fixed there (traceable and differentiable in x)."""

    def form_at(self, x: np.ndarray) -> tuple[Array, tuple, Any] | None:
        """(A, params, aux) at a new point x; None where the prior is not resolved at x."""

    def log_integrand(self, x: Array, z: Array, aux: Any) -> Array:
        """ln f(z_s; x) = log_sum(z_s A^T, *params) for every row z_s of z (traceable and differentiable in x)."""

    def anneal(self, x: np.ndarray, key, annealing: dict, *, first_round: bool = False) -> Annealed | None:
        """Tempered SMC at x with ``keep_particles``; None where the prior is not resolved at x. With
        ``first_round``: one round of the budget, neither grown nor started otherwise where its runs disagree."""


@jax.jit
def _prior_factor(x: Array, X: Array, mask: Array, template: Kernel) -> tuple[Array, Array]:
    """Cholesky factor of K(x) + jitter I with the smallest working jitter of ``_JITTERS``, and that jitter.

    K(x) is the padded prior blockdiag(K_data(x), I) (``mask`` marks the data entries); the jitter is
    relative to the data entries' mean prior variance.
    """
    K = _linalg.unit_padding(kernel_at(template, x)(X), mask)
    scale = jnp.sum(jnp.where(mask, jnp.diagonal(K), 0.0)) / jnp.sum(mask)
    eye = jnp.eye(K.shape[0], dtype=K.dtype)

    def attempt(i):
        return jnp.linalg.cholesky(K + jnp.asarray(_JITTERS)[i] * scale * eye)

    def failed(state):
        i, L = state
        return (i < len(_JITTERS) - 1) & ~jnp.all(jnp.isfinite(L))

    def next_jitter(state):
        i, _ = state
        return i + 1, attempt(i + 1)

    i, L = jax.lax.while_loop(failed, next_jitter, (0, attempt(0)))
    return L, jnp.asarray(_JITTERS)[i] * scale


@jax.jit
def _whitened(L: Array, particles: Array) -> Array:
    """The anchor's particles theta = L z as whitened rows z (S, n)."""
    return solve_triangular(L, jnp.reshape(particles, (-1, L.shape[0])).T, lower=True).T


@partial(jax.tree_util.register_dataclass, data_fields=["X", "mask", "template"], meta_fields=[])
@dataclass(frozen=True)
class FullPathPrior:
    """The exact prior N(0, K(x)) over the n training inputs, in whitened coordinates z = L(x)^-1 theta.

    ln f(z; x) = sum_i ln nu((L(x) z)_i; C(x)) over the data entries, L(x) the Cholesky factor of
    K(x) + jitter I, the jitter fixed per anchor (``aux``). Not resolved where the jitter's variance
    exceeds the margin's resolution (module docstring). ``X`` holds the training inputs padded to
    :func:`bayesvm._linalg.problem_size` (n) rows and ``mask`` marks the n data rows (:meth:`of`): the
    padding entries are independent N(0, 1) latents outside the sum, which changes no value, and nearby
    n share one compiled program.
    """

    X: Array
    mask: Array
    template: Kernel

    @classmethod
    def of(cls, X, template: Kernel) -> "FullPathPrior":
        """The prior over the training inputs X (n, d), padded."""
        X = jnp.asarray(X, dtype=jnp.float64)
        n = X.shape[0]
        size = _linalg.problem_size(n)
        return cls(_linalg.pad_rows(X, size), jnp.asarray(_linalg.padding_mask(n, size)), template)

    #: sum_i ln nu(theta_i; C) over the data entries (0/1 ``mask``)
    log_sum = staticmethod(product_route_log_likelihood)

    def linear_form(self, x: Array, jitter: Array) -> tuple[Array, tuple]:
        """L(x), the Cholesky factor of K(x) + jitter I, and (C(x), mask)."""
        K = _linalg.unit_padding(kernel_at(self.template, x)(self.X), self.mask)
        L = jnp.linalg.cholesky(K + jitter * jnp.eye(K.shape[0], dtype=K.dtype))
        return L, (penalty_at(x), self.mask.astype(L.dtype))

    def form_at(self, x: np.ndarray) -> tuple[Array, tuple, Array] | None:
        L, jitter = _prior_factor(jnp.asarray(x), self.X, self.mask, self.template)
        # the jitter is independent noise of this variance on every theta_i (theta^2 units)
        if not (bool(np.all(np.isfinite(np.asarray(L)))) and float(jitter) <= MARGIN_RESOLUTION):
            return None
        return L, (np.exp(x[0]), self.mask.astype(L.dtype)), jitter

    def log_integrand(self, x: Array, z: Array, jitter: Array) -> Array:
        L, params = self.linear_form(x, jitter)
        return self.log_sum(z @ L.T, *params)

    def anneal(self, x: np.ndarray, key, annealing: dict, *, first_round: bool = False) -> Annealed | None:
        form = self.form_at(x)
        if form is None:
            return None
        L, _, jitter = form
        budget = {**annealing, "ladder": (1,)} if first_round else annealing
        routed = annealed_with_ep_fallback(L, float(np.exp(x[0])), self.mask.astype(L.dtype), key=key,
                                           fallback=not first_round, keep_particles=True, **budget)
        particles = routed.result.particles
        if routed.route == "ep":  # z from EP's Gaussian: the whitened latents are w = m + S z
            z = jnp.reshape(particles, (-1, L.shape[0]))
            return Annealed(routed.result, routed.start.mean + z @ routed.start.scale.T, jitter)
        return Annealed(routed.result, _whitened(L, particles), jitter)


@jax.jit
def _log_f(prior: PathPrior, x: Array, z: Array, aux) -> Array:
    return prior.log_integrand(x, z, aux)


@jax.jit
def _linear_form(prior: PathPrior, x: Array, aux) -> tuple[Array, tuple]:
    return prior.linear_form(x, aux)


def _log_mean_ratio(x, prior, z, log_f_anchor, aux):
    log_w = prior.log_integrand(x, z, aux) - log_f_anchor
    return logsumexp(log_w) - math.log(z.shape[0]), log_w


@jax.jit
def _reweighted(prior: PathPrior, x, z, log_f_anchor, aux):
    """ln of the mean weight, its gradient in x, and the weights' effective sample size."""
    (value, log_w), grad = jax.value_and_grad(_log_mean_ratio, has_aux=True)(x, prior, z, log_f_anchor, aux)
    ess = jnp.exp(2.0 * logsumexp(log_w) - logsumexp(2.0 * log_w))
    w = jnp.exp(log_w - jnp.max(log_w))
    relative_se = jnp.std(w, ddof=1) / (jnp.sqrt(w.shape[0]) * jnp.mean(w))
    return value, grad, ess, relative_se


class _Anchor(NamedTuple):
    x: np.ndarray
    value: float
    se: float
    runs_agree: bool
    log_z_runs: np.ndarray  # ln Z_r of each run; z holds the runs' particles run by run
    z: Array
    log_f: Array
    aux: Any
    bridged: bool  # made by a bridge from another anchor, not from the prior


class PathEstimate(NamedTuple):
    """ln N(D) at one point of the path.

    value, gradient: the estimate and its exact gradient in the search coordinates;
    se: standard error (the anchor's SMC error and the reweighting's, combined);
    ess: effective number of the anchor's particles behind it;
    anchored: True when tempered SMC ran at this very point;
    resolved: False when the prior is not resolved there (for the full prior:
    its factor needed more jitter than the margin tolerates);
    runs_agree: the anchor's SMC runs agreed (otherwise its value is biased low).
    """

    value: float
    gradient: np.ndarray
    se: float
    ess: float
    anchored: bool
    resolved: bool
    runs_agree: bool


class ReweightedPath:
    """ln N(D) along a sequence of search points for any :class:`PathPrior` (module docstring).

    Mutable by design: it owns the anchors met so far and counts the work.
    """

    def __init__(self, prior: PathPrior, key: int = 0, annealing: dict | None = None,
                 min_ess_fraction: float = MIN_ESS_FRACTION):
        self.prior = prior
        self.key = key
        self.annealing = dict(ANCHOR_ANNEALING if annealing is None else annealing)
        self.min_ess_fraction = min_ess_fraction
        self.anchors: list[_Anchor] = []
        self.n_evaluations = 0
        self.n_bridges = 0  # bridges tried (those whose runs agreed are the anchors with ``bridged``)

    def _anchor_at(self, x: np.ndarray) -> _Anchor | None:
        """A new anchor at x (None where the prior is not resolved there): tempered SMC from the prior, one round
        of the budget; where its runs disagree, the bridge from the nearest anchor whose runs agree
        (:meth:`_bridged`); where that fails too, the prior's whole route (its budget grows, then other starts:
        :meth:`PathPrior.anneal`)."""
        with warnings.catch_warnings():  # runs that disagree here are the reason to go on, not a result
            warnings.simplefilter("ignore", RuntimeWarning)
            first = self.prior.anneal(x, self.key, self.annealing, first_round=True)
        if first is None:
            return None
        if first.result.runs_agree:
            anchor = self._anchor_of(x, first, bridged=False)
        else:
            anchor = self._bridged(x) or self._anchor_of(x, self.prior.anneal(x, self.key, self.annealing),
                                                         bridged=False)
        self.anchors.append(anchor)
        return anchor

    def _anchor_of(self, x: np.ndarray, annealed: Annealed, *, bridged: bool) -> _Anchor:
        result, z, aux = annealed
        # each run's particles carry its weight Z_r / mean Z (population annealing's weighted average; rows are
        # run by run): folded into ln f at the anchor, the reweighted mean at the anchor itself is exactly 1
        run_log_weight = np.repeat(result.log_z_runs - result.value, result.n_particles)
        log_f = _log_f(self.prior, jnp.asarray(x), z, aux) - run_log_weight
        return _Anchor(np.array(x), result.value, result.se, result.runs_agree, np.asarray(result.log_z_runs), z,
                       log_f, aux, bridged)

    def _bridged(self, x: np.ndarray) -> _Anchor | None:
        """An anchor at x by the bridge (:func:`bayesvm.normalization.bridge.annealed_bridge`) from the nearest
        anchor whose runs agree, within ``_MAX_BRIDGE_DISTANCE``, continuing the first of its runs and particles
        up to this path's budget; None where there is no such anchor, the prior is not resolved at x, or the
        continued runs disagree."""
        parents = [a for a in self.anchors if a.runs_agree and np.max(np.abs(a.x - x)) <= _MAX_BRIDGE_DISTANCE]
        if not parents:
            return None
        form = self.prior.form_at(x)
        if form is None:
            return None
        parent = min(parents, key=lambda a: float(np.sum((a.x - x) ** 2)))
        n_runs = len(parent.log_z_runs)
        runs = min(n_runs, self.annealing["n_runs"])
        w = jnp.reshape(parent.z, (n_runs, -1, parent.z.shape[-1]))[:runs, :self.annealing["n_particles"]]
        A, params, aux = form
        self.n_bridges += 1
        result = annealed_bridge(self.prior.log_sum, w, parent.log_z_runs[:runs],
                                 _linear_form(self.prior, jnp.asarray(parent.x), parent.aux), (A, params),
                                 key=jax.random.fold_in(_as_key(self.key), len(self.anchors)),
                                 n_mcmc_steps=self.annealing["n_mcmc_steps"])
        if not result.runs_agree:
            return None
        z = jnp.reshape(result.particles, (-1, w.shape[-1]))
        return self._anchor_of(x, Annealed(result, z, aux), bridged=True)

    @float64
    def estimate(self, x) -> PathEstimate:
        """ln N(D) and its gradient at the coordinates x, re-anchoring where the weights degenerate.

        The nearest anchors (at most three within ``_MAX_ANCHOR_DISTANCE``) are
        tried first, with what their prior fixed where they were made (the full
        prior's jitter). Only when none serves does tempered SMC run here, if
        the prior is resolved here.
        """
        x = np.asarray(x, dtype=np.float64)
        self.n_evaluations += 1
        near = [a for a in self.anchors if np.max(np.abs(a.x - x)) <= _MAX_ANCHOR_DISTANCE]
        for anchor in sorted(near, key=lambda a: float(np.sum((a.x - x) ** 2)))[:3]:
            reweighted = _reweighted(self.prior, jnp.asarray(x), anchor.z, anchor.log_f, anchor.aux)
            value, _, ess, _ = reweighted
            if float(ess) >= self.min_ess_fraction * anchor.z.shape[0] and np.isfinite(float(value)):
                return _path_estimate(anchor, reweighted, anchored=False)
        anchor = self._anchor_at(x)
        if anchor is None:
            return PathEstimate(-np.inf, np.zeros_like(x), np.inf, 0.0, False, False, False)
        reweighted = _reweighted(self.prior, jnp.asarray(x), anchor.z, anchor.log_f, anchor.aux)
        return _path_estimate(anchor, reweighted, anchored=True)

    @property
    def n_anchors(self) -> int:
        return len(self.anchors)

    @property
    def n_bridged(self) -> int:
        """Anchors made by a bridge from another anchor."""
        return sum(anchor.bridged for anchor in self.anchors)


class NormalizationPath(ReweightedPath):
    """ln N(D) along a search path under the exact prior (:class:`FullPathPrior`).

    ``X`` (n, d) are the training inputs, ``template`` the kernel family,
    ``annealing`` the tempered-SMC budget at each anchor.
    """

    def __init__(self, X: Array, template: Kernel, key: int = 0, annealing: dict | None = None,
                 min_ess_fraction: float = MIN_ESS_FRACTION):
        super().__init__(FullPathPrior.of(X, template), key, annealing, min_ess_fraction)


def _path_estimate(anchor: _Anchor, reweighted, *, anchored: bool) -> PathEstimate:
    """The anchor's SMC value plus the reweighted log mean ratio, with the two standard errors combined."""
    value, grad, ess, rel_se = reweighted
    return PathEstimate(
        value=anchor.value + float(value),
        gradient=np.asarray(grad),
        se=float(np.hypot(anchor.se, float(rel_se))),
        ess=float(ess),
        anchored=anchored,
        resolved=True,
        runs_agree=anchor.runs_agree,
    )
