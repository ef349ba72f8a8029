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
The estimate at the anchor itself is the SMC value (at the anchor plan of the fit's
:class:`bayesvm.normalization.budget.EvidenceBudget`: fixed work, no escalation), so the path is exactly
as accurate as tempered SMC there and degrades gracefully with distance; the
effective sample size says how far. Where several anchors serve a point their
estimates are blended (:func:`_blended`), each with a weight that falls to
zero where its particles stop serving, so that the estimate stays continuous
in x as the search moves from one anchor's neighbourhood to the next.

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
from .agreement import beyond_error, combined_se
from .annealing import DEFAULT_MAX_SHRINKS, AnnealingResult, as_key, product_route_log_likelihood
from .budget import EvidenceBudget, budgeted_log_normalization
from .smc import moves_at_target
from ..compilation import jit
from ..hyperparameters import MARGIN_RESOLUTION, kernel_at, penalty_at
from ..kernels import Kernel
from ..model import log_nu

Array = jax.Array

__all__ = [
    "Annealed",
    "FullPathPrior",
    "NormalizationPath",
    "PathEstimate",
    "PathPrior",
    "ReweightedPath",
]

#: relative jitters tried, in order, for the Cholesky factor of the prior
_JITTERS = (0.0, 1e-13, 1e-11, 1e-9, 1e-7)
#: re-anchor when the reweighted particles' effective sample size falls below this fraction: the reweighted value's
#: error grows as 1 / sqrt(ESS), so below a quarter it is more than twice that of the anchor's full set of particles,
#: and a lower fraction is no faster on the benchmark sets (theory: "Hyperparameter selection")
MIN_ESS_FRACTION = 0.25
#: an anchor's share of the blend of the anchors that serve a point rises from 0 at ``MIN_ESS_FRACTION`` to 1 at
#: this effective sample size (as a fraction of its particles): :func:`_blended`
_FULL_SHARE_FRACTION = 0.5
#: or when the point is further than this from every anchor (largest coordinate difference, in log units):
#: importance weights can look healthy while missing mass the anchor's particles never reached
_MAX_ANCHOR_DISTANCE = 1.0
#: an anchor serves every point this close to its own (largest coordinate difference, in log units) whatever its
#: weights: tempered SMC there would repeat the anchor's own random numbers and verdict (an anchor whose runs disagree
#: has weights too uneven to serve by the rule above), and reweighting over such a step shifts ln f by about 1e-6
#: times its derivative, far below the estimate's error
_SAME_POINT = 1e-6


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
    free of x; the path only needs ln f and a way to anneal at an anchor.
    """

    def log_integrand(self, x: Array, z: Array, aux: Any) -> Array:
        """ln f(z_s; x) for every row z_s of z (traceable and differentiable in x)."""

    def anneal(self, x: np.ndarray, key, budget: EvidenceBudget, role: str) -> Annealed | None:
        """Tempered SMC at x at ``budget``'s plan for ``role`` (:data:`bayesvm.normalization.budget.ROLES`), with its
        particles; None where the prior is not resolved at x."""


@jit
def _prior_factor(x: Array, X: Array, mask: Array, template: Kernel) -> tuple[Array, Array]:
    """Cholesky factor of K(x) + jitter I with the smallest working jitter of ``_JITTERS``, and that jitter.

    K(x) is the padded prior blockdiag(K_data(x), I) (``mask`` is positive at the data entries); the jitter is
    relative to the data entries' mean prior variance.
    """
    data = mask > 0
    K = _linalg.unit_padding(kernel_at(template, x)(X), data)
    scale = jnp.sum(jnp.where(data, jnp.diagonal(K), 0.0)) / jnp.sum(data)
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


@jit
def _whitened(L: Array, particles: Array) -> Array:
    """The anchor's particles theta = L z as whitened rows z (S, n)."""
    return solve_triangular(L, jnp.reshape(particles, (-1, L.shape[0])).T, lower=True).T


@partial(jax.tree_util.register_dataclass, data_fields=["X", "mask", "template"], meta_fields=[])
@dataclass(frozen=True)
class FullPathPrior:
    """The exact prior N(0, K(x)) over the n training inputs, in whitened coordinates z = L(x)^-1 theta.

    ln f(z; x) = sum_i ln nu((L(x) z)_i; C(x)) over the data entries, L(x) the Cholesky factor of
    K(x) + jitter I, the jitter fixed per anchor (``aux``). Not resolved where the jitter's variance
    exceeds the margin's resolution (module docstring). ``X`` holds the distinct training inputs padded to
    :func:`bayesvm._linalg.problem_size` rows and ``mask`` their multiplicities, 0 at the padding (:meth:`of`):
    equal rows share one latent, so each distinct input's ln nu counts as many times as it occurs (exact); the
    padding entries are independent N(0, 1) latents outside the sum, which changes no value, and nearby
    sizes share one compiled program. With row weights the multiplicities are the summed weights (theory: "Weights
    and repeated rows").
    """

    X: Array
    mask: Array
    template: Kernel

    @classmethod
    def of(cls, X, template: Kernel, weights=None) -> "FullPathPrior":
        """The prior over the distinct rows of the training inputs X (n, d) (:func:`bayesvm._linalg.distinct_rows`),
        padded; each distinct input's exponent is its rows' summed ``weights`` (None: 1 each, so its count)."""
        index, counts = _linalg.distinct_rows(np.asarray(X), weights)
        size = _linalg.problem_size(index.size)
        return cls(_linalg.pad_rows(np.asarray(X)[index], size), _linalg.pad_rows(counts, size), template)

    def log_integrand(self, x: Array, z: Array, jitter: Array) -> Array:
        K = _linalg.unit_padding(kernel_at(self.template, x)(self.X), self.mask > 0)
        L = jnp.linalg.cholesky(K + jitter * jnp.eye(K.shape[0], dtype=K.dtype))
        return jnp.sum(self.mask * log_nu(z @ L.T, penalty_at(x)), axis=1)

    def anneal(self, x: np.ndarray, key, budget: EvidenceBudget, role: str) -> Annealed | None:
        factor = self._resolved_factor(x)
        if factor is None:
            return None
        L, jitter = factor
        result = budgeted_log_normalization(L, self.mask, float(np.exp(x[0])), budget=budget, key=key,
                                            role=role, keep_particles=True, move_last=True)
        return Annealed(result, _whitened(L, result.particles), jitter)

    def anchored(self, x: np.ndarray, result: AnnealingResult, key, n_mcmc_steps: int) -> Annealed | None:
        """An anchor at x from tempered SMC run there by another caller on the same prior (the selection's check,
        :func:`bayesvm.normalization.budget.budgeted_log_normalization`), whose ``particles`` are theta (R, N, M)
        over the padded inputs as its last resampling left them: moved ``n_mcmc_steps`` times at the target
        (:func:`bayesvm.normalization.smc.moves_at_target`, as the path's own anchors are after their last
        reweighting) and whitened by this prior's factor at x; None where the prior is not resolved at x.
        The other caller's square-root factor of K(x) may differ from this one's (an eigen-factor, another
        jitter): theta's distribution, which the particles represent, does not."""
        factor = self._resolved_factor(x)
        if factor is None:
            return None
        L, jitter = factor
        theta = moves_at_target(product_route_log_likelihood, L, as_key(key),
                                (penalty_at(jnp.asarray(x)), self.mask), result.particles,
                                n_mcmc_steps, max_shrinks=DEFAULT_MAX_SHRINKS)
        return Annealed(result, _whitened(L, theta), jitter)

    def _resolved_factor(self, x: np.ndarray) -> tuple[Array, Array] | None:
        """The factor of K(x) + jitter I and its jitter (:func:`_prior_factor`), or None where the factor failed or
        the jitter exceeds the margin's resolution (it is independent noise of that variance on every theta_i)."""
        L, jitter = _prior_factor(x, self.X, self.mask, self.template)
        if not (bool(np.all(np.isfinite(np.asarray(L)))) and float(jitter) <= MARGIN_RESOLUTION):
            return None
        return L, jitter


@jit
def _log_f(prior: PathPrior, x: Array, z: Array, aux) -> Array:
    return prior.log_integrand(x, z, aux)


class _Reweighted(NamedTuple):
    """An anchor's particles reweighted to x: ln of the mean weight, its gradient, the weights' effective sample size
    ESS = (sum_s w_s)^2 / sum_s w_s^2 with the gradient of ln ESS, and the mean's relative standard error."""

    value: Array
    gradient: Array
    ess: Array
    log_ess_gradient: Array
    relative_se: Array


@jit
def _reweighted(prior: PathPrior, x, z, log_f_anchor, aux, ramp) -> _Reweighted:
    """The anchor's particles reweighted to x (:class:`_Reweighted`).

    With log-weights l_s(x) = ln f(z_s; x) - ln f(z_s; x_a), p = softmax(l) and q = softmax(2 l):
    d ln mean(w) / dx = sum_s p_s dl_s / dx and d ln ESS / dx = 2 sum_s (p_s - q_s) dl_s / dx. The second is
    computed only where ESS / S lies strictly inside ``ramp`` = (lower, upper) (elsewhere the blend of
    :func:`_blended` does not use it, and it is returned as zeros).
    """
    def log_sum_weights(x):
        log_w = prior.log_integrand(x, z, aux) - log_f_anchor
        return logsumexp(log_w), log_w

    def log_ess(x):
        log_sum, log_w = log_sum_weights(x)
        return 2.0 * log_sum - logsumexp(2.0 * log_w)

    (log_mean, log_w), gradient = jax.value_and_grad(log_sum_weights, has_aux=True)(x)
    ess = jnp.exp(2.0 * log_mean - logsumexp(2.0 * log_w))
    fraction = ess / z.shape[0]
    # a pass of its own inside the branch: sharing the first pass's residuals with it slowed every call by half
    log_ess_gradient = jax.lax.cond((fraction > ramp[0]) & (fraction < ramp[1]),
                                    lambda: jax.grad(log_ess)(x), lambda: jnp.zeros_like(gradient))
    w = jnp.exp(log_w - jnp.max(log_w))
    relative_se = jnp.std(w, ddof=1) / (jnp.sqrt(w.shape[0]) * jnp.mean(w))
    return _Reweighted(log_mean - math.log(z.shape[0]), gradient, ess, log_ess_gradient, relative_se)


class _Anchor(NamedTuple):
    x: np.ndarray
    value: float
    se: float
    runs_agree: bool
    z: Array
    log_f: Array
    aux: Any


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

    Mutable by design: it owns the anchors met so far and counts the work. ``budget`` fixes each anchor's
    tempered SMC (its anchor plan; after a refinement, the check's moves per temperature: runs with too few moves
    agree while missing the same mass, which is what a refinement found).
    """

    def __init__(self, prior: PathPrior, key: int = 0, budget: EvidenceBudget = EvidenceBudget(),
                 min_ess_fraction: float = MIN_ESS_FRACTION):
        self.prior = prior
        self.key = key
        self.budget = budget
        self.min_ess_fraction = min_ess_fraction
        self.anchors: list[_Anchor] = []
        self.n_evaluations = 0
        self.n_anchors = 0  # tempered-SMC runs made (anchors dropped by :meth:`refine` included)
        self.n_refinements = 0
        self.likelihood_evaluations = 0  # the anchors' work

    def _annealed_anchor(self, x: np.ndarray, key, role: str) -> _Anchor | None:
        """Tempered SMC at x as an anchor (not yet one of the path's), at the budget's plan for ``role``; None where
        not resolved."""
        annealed = self.prior.anneal(x, key, self.budget, role)
        self.n_anchors += 1
        if annealed is None:
            return None
        self.likelihood_evaluations += annealed.result.likelihood_evaluations
        return self._anchor(x, annealed)

    def _anchor(self, x: np.ndarray, annealed: Annealed) -> _Anchor:
        """The anchor at x of tempered SMC's estimate and particles there."""
        result, z, aux = annealed
        # each run's particles carry its weight Z_r / mean Z (population annealing's weighted average; rows are
        # run by run): folded into ln f at the anchor, the reweighted mean at the anchor itself is exactly 1
        run_log_weight = np.repeat(result.log_z_runs - result.value, result.n_particles)
        log_f = np.asarray(_log_f(self.prior, x, z, aux)) - run_log_weight
        return _Anchor(np.array(x), result.value, result.se, result.runs_agree, z, log_f, aux)

    def _reweight(self, anchor: _Anchor, x: np.ndarray) -> _Reweighted:
        """The anchor's particles reweighted to x, with the gradient of ln ESS where its share of a blend moves (one
        compiled program for every call: the ramp's ends are arguments, not constants)."""
        return _reweighted(self.prior, x, anchor.z, anchor.log_f, anchor.aux,
                           (self.min_ess_fraction, _FULL_SHARE_FRACTION))

    def _served(self, anchor: _Anchor, x: np.ndarray) -> tuple[_Reweighted, float] | None:
        """The anchor's reweighting at x (:func:`_reweighted`) with its share of the blend (:func:`_blend_share`) if its
        particles serve x: x within ``_MAX_ANCHOR_DISTANCE`` and an effective sample size of at least
        ``min_ess_fraction`` of them, or x within ``_SAME_POINT`` (the anchor's own point, share 1); else None."""
        distance = np.max(np.abs(anchor.x - x))
        if distance > _MAX_ANCHOR_DISTANCE:
            return None
        reweighted = self._reweight(anchor, x)
        fraction = float(reweighted.ess) / anchor.z.shape[0]
        share = 1.0 if distance <= _SAME_POINT else _blend_share(fraction, self.min_ess_fraction)
        enough = distance <= _SAME_POINT or fraction >= self.min_ess_fraction
        return (reweighted, share) if enough and np.isfinite(float(reweighted.value)) else None

    @float64
    def estimate(self, x) -> PathEstimate:
        """ln N(D) and its gradient at the coordinates x, re-anchoring where the weights degenerate.

        The nearest anchors (at most three within ``_MAX_ANCHOR_DISTANCE``), with what their prior fixed where they
        were made (the full prior's jitter), serve x if their weights do (:meth:`_served`); those whose runs agreed
        are blended, newest first (:func:`_blended`), and only where none of them serves does an anchor whose runs
        disagreed give the estimate (with ``runs_agree`` False). Only when no anchor serves does tempered SMC run
        here, if the prior is resolved here.
        """
        x = np.asarray(x, dtype=np.float64)
        self.n_evaluations += 1
        near = [i for i, a in enumerate(self.anchors) if np.max(np.abs(a.x - x)) <= _MAX_ANCHOR_DISTANCE]
        nearest = sorted(near, key=lambda i: float(np.sum((self.anchors[i].x - x) ** 2)))[:3]
        candidates = [self.anchors[i] for i in sorted(nearest, reverse=True)]  # newest first: a fixed order in x
        served = []
        for anchor in (a for a in candidates if a.runs_agree):
            serving = self._served(anchor, x)
            if serving is not None:
                served.append((anchor, *serving))
                if serving[1] >= 1.0:
                    break  # the older anchors' weights are zero
        if served:
            return _blended(served, self.min_ess_fraction)
        for anchor in (a for a in candidates if not a.runs_agree):
            serving = self._served(anchor, x)
            if serving is not None:
                return _path_estimate(anchor, serving[0], anchored=False)
        anchor = self._annealed_anchor(x, self.key, "anchor" if self.n_refinements == 0 else "refined anchor")
        if anchor is None:
            return _unresolved(x)
        self.anchors.append(anchor)
        return self._at_own_anchor(anchor)

    @float64
    def refine(self, x, tolerance: float, reference: AnnealingResult | None = None) -> PathEstimate:
        """Anchor again at x at the budget's check plan and random numbers of its own (the path's key folded with the
        number of refinements), or on ``reference``, tempered SMC already run at x with its particles
        (:meth:`FullPathPrior.anchored`, moved with its moves and those random numbers), and drop every
        anchor whose estimate at x this one contradicts; later anchors take the check's moves too.

        For where a fresh estimate at x has shown the path's value there to be off: agreeing runs of a small
        budget can all miss the same mass and lie low, and a search then climbs towards where they do. An anchor
        contradicts the new one when its particles serve x (:meth:`estimate`'s rules) and its estimate there
        differs from the new value by more than ``tolerance`` nats and three combined standard errors
        (:func:`bayesvm.normalization.agreement.beyond_error`); anchors
        that do not serve x are kept. Returns the estimate at x from the new anchor. Where the new anchor is not
        resolved, or its own runs disagree (its value is then likely low itself, so it can show nothing wrong with
        the others), the path is left as it was.
        """
        x = np.asarray(x, dtype=np.float64)
        self.n_refinements += 1
        key = jax.random.fold_in(as_key(self.key), self.n_refinements)
        if reference is None:
            new = self._annealed_anchor(x, key, "check")
        else:
            annealed = self.prior.anchored(x, reference, key, reference.n_mcmc_steps)
            new = None if annealed is None else self._anchor(x, annealed)
        if new is None:
            return _unresolved(x)
        if not new.runs_agree:
            return self._at_own_anchor(new)
        kept = []
        for anchor in self.anchors:
            serving = self._served(anchor, x)
            if serving is not None:
                old = _path_estimate(anchor, serving[0], anchored=False)
                if beyond_error(old.value, new.value, se=combined_se(old.se, new.se), floor=tolerance):
                    continue
            kept.append(anchor)
        self.anchors = [*kept, new]
        return self._at_own_anchor(new)

    def _at_own_anchor(self, anchor: _Anchor) -> PathEstimate:
        """The estimate at the anchor's own point (its SMC value, with the reweighting's gradient there)."""
        reweighted = self._reweight(anchor, anchor.x)
        return _path_estimate(anchor, reweighted, anchored=True)


class NormalizationPath(ReweightedPath):
    """ln N(D) along a search path under the exact prior (:class:`FullPathPrior`).

    ``X`` (n, d) are the training inputs, ``template`` the kernel family,
    ``budget`` the fit's :class:`~bayesvm.normalization.budget.EvidenceBudget`, ``weights`` (n,) the rows'
    weights (None: 1 each).
    """

    def __init__(self, X: Array, template: Kernel, key: int = 0, budget: EvidenceBudget = EvidenceBudget(),
                 min_ess_fraction: float = MIN_ESS_FRACTION, weights=None):
        super().__init__(FullPathPrior.of(X, template, weights), key, budget, min_ess_fraction)


def _unresolved(x: np.ndarray) -> PathEstimate:
    """The estimate where the prior is not resolved (no anchor can be made there)."""
    return PathEstimate(-np.inf, np.zeros_like(x), np.inf, 0.0, False, False, False)


def _path_estimate(anchor: _Anchor, reweighted: _Reweighted, *, anchored: bool) -> PathEstimate:
    """The anchor's SMC value plus the reweighted log mean ratio, with the two standard errors combined."""
    return PathEstimate(
        value=anchor.value + float(reweighted.value),
        gradient=np.asarray(reweighted.gradient),
        se=float(np.hypot(anchor.se, float(reweighted.relative_se))),
        ess=float(reweighted.ess),
        anchored=anchored,
        resolved=True,
        runs_agree=anchor.runs_agree,
    )


def _blend_share(fraction: float, min_fraction: float) -> float:
    """An anchor's share t of the blend from its effective sample size as a ``fraction`` of its particles: 0 at
    ``min_fraction`` (where it stops serving), rising linearly to 1 at ``_FULL_SHARE_FRACTION``."""
    return float(np.clip((fraction - min_fraction) / (_FULL_SHARE_FRACTION - min_fraction), 0.0, 1.0))


def _blended(served: list[tuple[_Anchor, _Reweighted, float]], min_fraction: float) -> PathEstimate:
    """The estimates of the anchors that serve x, newest first, blended so that ln N(D) is continuous in x.

    With anchor i's estimate v_i (:func:`_path_estimate`) and share t_i (:func:`_blend_share`), anchor i takes
    w_i = t_i prod_{j<i} (1 - t_j) and V = sum_i w_i v_i / W, W = sum_i w_i = 1 - prod_i (1 - t_i) (one anchor:
    V = v_1). An anchor's weight falls to 0 where it stops serving, so V does not jump there as switching to the
    next anchor did (a line search then bisects onto the jump); in a
    fixed order (not by distance) so that no tie between anchors moves it either. The gradient is exact:
    sum_i (w_i / W) dv_i plus sum_k dV/dt_k dt_k, with dt_k = ESS_k / (S_k (t_full - t_min)) d ln ESS_k on the
    ramp. The standard errors combine as independent: sqrt(sum_i (w_i / W)^2 se_i^2).
    """
    estimates = [_path_estimate(anchor, reweighted, anchored=False) for anchor, reweighted, _ in served]
    t = np.array([share for *_, share in served])
    if len(served) == 1 or not np.any(t > 0.0):
        return estimates[0]
    v = np.array([e.value for e in estimates])
    keep = np.concatenate([[1.0], np.cumprod(1.0 - t)[:-1]])  # prod_{j<i} (1 - t_j)
    w = t * keep
    W = float(np.sum(w))
    value = float(np.sum(w * v) / W)
    gradient = sum(wi / W * e.gradient for wi, e in zip(w, estimates))
    for k, (anchor, reweighted, share) in enumerate(served):
        if not 0.0 < share < 1.0:
            continue  # off the ramp (or the anchor's own point): its share does not move
        # N = sum_i w_i v_i: dN/dt_k = keep_k v_k - sum_{i>k} w_i v_i / (1 - t_k); dW/dt_k = (1 - W) / (1 - t_k)
        d_share = (keep[k] * v[k] - (np.sum(w[k + 1:] * v[k + 1:]) + value * (1.0 - W)) / (1.0 - share)) / W
        fraction = float(reweighted.ess) / anchor.z.shape[0]
        d_t = fraction / (_FULL_SHARE_FRACTION - min_fraction) * np.asarray(reweighted.log_ess_gradient)
        gradient = gradient + d_share * d_t
    return PathEstimate(
        value=value,
        gradient=np.asarray(gradient),
        se=float(np.sqrt(np.sum((w / W) ** 2 * np.array([e.se for e in estimates]) ** 2))),
        ess=float(sum(e.ess for e in estimates)),
        anchored=False,
        resolved=True,
        runs_agree=True,
    )
