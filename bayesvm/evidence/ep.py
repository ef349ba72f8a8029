"""Expectation propagation (EP) for the GP-prior reading of the SVM.

EP approximates integrals of the form

    Z = INT N(theta; 0, K) prod_i t_i(theta_i) dtheta

over the latent outputs theta at n training points by replacing every site
t_i with an unnormalised Gaussian in theta_i, chosen so that the
approximation matches the mean and variance of the "tilted" distribution
(cavity times exact site) one site at a time (Minka 2001; Rasmussen &
Williams 2006, GPML section 3.6). Two site families appear in the evidence
P(D) = Q(D) / N(D) (theory: "Expectation propagation"):

* labels, ``ep_log_evidence``: t_i = Q(y_i | theta_i) = kappa(C) exp(-C l(y_i theta_i)),
  so Z = Q(D), the naive evidence including its n ln kappa(C) term;
* normalisation, ``ep_log_normalization``: t_i = nu(theta_i) =
  kappa(C) [exp(-C l(theta_i)) + exp(-C l(-theta_i))], so Z = E_GP[prod_i nu(theta_i)],
  the single-draw estimate of N(D) with the training inputs (theory: "The
  single-draw identity").

The hinge site is log-concave, so its Gaussian site precisions are never
negative; nu is bimodal (maxima at theta = +-1) and gives negative site
precisions, which the posterior update handles by splitting the sites into
their positive and negative parts (see :func:`posterior_from_sites`).
The derivation and the stabilisation choices are written out on the
expectation-propagation page of the documentation.

Updates are parallel (all sites from the same posterior, then one Cholesky
recomputation), damped in natural parameters and run inside
``jax.lax.while_loop``: everything is jit-compiled with fixed shapes and
vmaps over batches of Gram matrices and C values. With label sites on a
dense prior, one compiled program per padded size (:func:`padded_label_run`)
serves every caller: the search from warm sites with the derivatives its
gradient needs (:mod:`bayesvm.evidence.ep_gradient`), the checks at its
answer and the posterior from cold sites with the predictor.

The loop (:func:`ep_loop`). The prior enters only through the posterior
of the prior times the Gaussian sites (:func:`posterior_from_sites` for a
dense K; :mod:`bayesvm.evidence.ep_low_rank` for a low-rank one) and through its
marginal variances K_ii. Each iteration: cavities from the current
posterior, tilted moments for all sites at once, proposed sites (label
sites: proposals clipped at precision 0, which they only cross by
rounding). The residual is max |proposed - old| / (1 + |old|) over both
site parameters measured in units of the prior (precision times K_ii,
shift times sqrt(K_ii)), infinite if any cavity is improper or any tilted
moment is not finite (such sites keep their values). The new sites are
old + step (proposed - old) in natural parameters, step = 1 - damping to
start with. If the posterior with the new sites is improper (possible only
with negative site precisions) the step is rejected and ``step`` halved; if
the residual grew, ``step`` shrinks by 0.8 (not below 0.05), which stops
the period-2 oscillation that parallel updates of the bimodal nu sites
fall into.

Converged: the residual is below ``tol``, or ln Z_EP changed by less than
``log_z_tol`` in each of the last three iterations (the evidence has
settled while some sites still move; GPML's ``infEP`` stops on the change
of ln Z alone). The loop also stops, unconverged, after ``max_iter``
iterations, when the step falls below 1e-8 or when the state is not
finite. ``log_z_tol = 0`` switches the second test off.

The prior units make the residual invariant under K -> s K. In raw units a
site precision is of order 1 / K_ii, so with a large amplitude (K_ii = 1e5
and more, where the evidence selection goes) every proposal looked
converged after one iteration: EP stopped at its first, factorised guess,
37-58 nats below the annealed estimate of ln N(D) (a test covers this).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

from .. import _linalg
from .._precision import float64
from ..compilation import jit
from .ep_posterior import (  # noqa: F401  (EPPredictor and ep_predict are re-exported)
    EPPredictor,
    GaussianPosterior,
    ep_predict,
    positive_part,
    posterior_from_sites,
    predictor_from_sites,
)
from .tilted import TiltedMoments, label_tilted_moments, nu_tilted_moments

Array = jax.Array

__all__ = [
    "EP_LOOPS",
    "EPResult",
    "LabelEP",
    "EPBatch",
    "EPPredictor",
    "ep_log_z_batch",
    "ep_log_evidence",
    "converged_ep",
    "ep_log_normalization",
    "ep_predict",
]

# ---------------------------------------------------------------------------
# The EP loop
# ---------------------------------------------------------------------------

SiteMoments = Callable[[Array, Array], TiltedMoments]


class EPResult(NamedTuple):
    """Result of an EP run.

    log_z: EP estimate of ln INT N(theta; 0, K) prod_i t_i(theta_i) dtheta
      (ln Q(D) including n ln kappa(C) for ``ep_log_evidence``;
      ln E_GP[prod_i nu(theta_i)] for ``ep_log_normalization``).
    mean, variance: approximate posterior mean and marginal variances of theta.
    site_precision, site_shift: Gaussian sites exp(-tau theta^2 / 2 + shift theta).
    converged: site parameters settled within tol, or (log_z_tol > 0) ln Z settled, and everything is finite.
    n_iter: number of parallel updates done.
    predictor: what :func:`ep_predict` needs.
    """

    log_z: Array
    mean: Array
    variance: Array
    site_precision: Array
    site_shift: Array
    converged: Array
    n_iter: Array
    predictor: EPPredictor


class _Cavity(NamedTuple):
    precision: Array
    shift: Array
    valid: Array


def cavity(post: GaussianPosterior, tau: Array, shift: Array) -> _Cavity:
    """Cavity natural parameters: posterior marginal minus own site (GPML eq. 3.56)."""
    precision = 1.0 / post.variance - tau
    return _Cavity(precision, post.mean / post.variance - shift, jnp.isfinite(precision) & (precision > 0.0))


def _site_proposal(cav: _Cavity, moments: SiteMoments) -> tuple[Array, Array, Array]:
    """Site parameters that make cavity * site match the tilted moments (GPML eq. 3.59).

    Returns (tau, shift, ok); ok is False where the cavity is improper or the
    tilted moments are not finite (those sites are then left unchanged).
    """
    safe_precision = jnp.where(cav.valid, cav.precision, 1.0)
    tilted = moments(cav.shift / safe_precision, 1.0 / safe_precision)
    tau = 1.0 / tilted.variance - safe_precision
    shift = tilted.mean / tilted.variance - cav.shift
    ok = cav.valid & jnp.isfinite(tau) & jnp.isfinite(shift)
    return tau, shift, ok


def _log_z_ep(post: GaussianPosterior, tau: Array, shift: Array, moments: SiteMoments) -> Array:
    """EP estimate of ln Z in natural parameters (no division by site precisions).

    ln Z_EP = sum_i c_i + 1/2 shift^T mu - 1/2 ln det(I + K S), with site constants
      c_i = ln Z_i - 1/2 mu_i^2/s_i^2 - 1/2 ln s_i^2 + 1/2 m_i^2/v_i + 1/2 ln v_i,
    (m_i, v_i) the cavity, (mu_i, s_i^2) the posterior marginal and Z_i the
    tilted normaliser: c_i makes INT cavity * site = Z_i. Equivalent to GPML eq. 3.65
    but finite at tau_i = 0.
    """
    cav = cavity(post, tau, shift)
    cav_var = 1.0 / cav.precision
    cav_mean = cav.shift * cav_var
    log_zi = moments(cav_mean, cav_var).log_z
    site_consts = (
        log_zi
        - 0.5 * post.mean**2 / post.variance
        - 0.5 * jnp.log(post.variance)
        + 0.5 * cav_mean * cav.shift
        + 0.5 * jnp.log(cav_var)
    )
    value = jnp.sum(site_consts) + 0.5 * jnp.dot(shift, post.mean) - 0.5 * post.log_det
    return jnp.where(jnp.all(cav.valid), value, jnp.nan)


def _is_finite_posterior(post: GaussianPosterior) -> Array:
    return jnp.isfinite(post.log_det) & jnp.all(jnp.isfinite(post.mean)) & jnp.all(post.variance > 0.0)


#: the evidence counts as settled after this many consecutive iterations that change it by less than log_z_tol
_SETTLED_ITERATIONS = 3
#: (damping, max_iter) of EP's loop, tried in turn from cold sites until one converges: the default, then a slower,
#: longer loop for the points where the parallel updates keep oscillating (measured on a 560-point 2-feature set:
#: the default's 200 sweeps did not converge at C 0.86, k0 99, length scale 0.97)
EP_LOOPS = ((0.5, 200), (0.8, 1000))
#: a step that makes the residual grow is shrunk by this factor, down to _MIN_OSCILLATION_STEP
_OSCILLATION_SHRINK = 0.8
_MIN_OSCILLATION_STEP = 0.05


class _EPState(NamedTuple):
    site_precision: Array
    site_shift: Array
    posterior: GaussianPosterior
    log_z: Array
    converged: Array
    n_iter: Array


class _LoopState(NamedTuple):
    """The carry of :func:`ep_loop`'s while_loop."""

    site_precision: Array
    site_shift: Array
    posterior: GaussianPosterior
    n_iter: Array
    step: Array  # fraction of the proposed change taken (1 - damping to start with)
    residual: Array  # of the last proposal, in units of the prior
    log_z: Array
    settled: Array  # consecutive iterations that changed ln Z by less than log_z_tol


#: the Gaussian posterior of the prior times sites (precision, shift); NaN/inf where improper
PosteriorFn = Callable[[Array, Array], GaussianPosterior]


def _residual(tau, shift, tau_prop, shift_prop, ok, prior_var) -> Array:
    """max |proposed - old| / (1 + |old|) in units of the prior (tau K_ii, shift sqrt(K_ii)); inf where not ok."""
    prior_sd = jnp.sqrt(prior_var)
    relative = jnp.maximum(
        jnp.abs(tau_prop - tau) * prior_var / (1.0 + jnp.abs(tau) * prior_var),
        jnp.abs(shift_prop - shift) * prior_sd / (1.0 + jnp.abs(shift) * prior_sd),
    )
    return jnp.max(jnp.where(ok, relative, jnp.inf))


def ep_loop(
    posterior: PosteriorFn,
    prior_var: Array,
    moments: SiteMoments,
    allow_negative: bool,
    damping,
    max_iter,
    tol,
    log_z_tol,
    init_sites: tuple[Array, Array] | None = None,
) -> _EPState:
    """Damped parallel EP (module docstring, "The loop") from ``init_sites`` (precision, shift).

    By default zero sites (posterior = prior). A warm start (the converged
    sites of a nearby hyperparameter value) is used as given when its
    posterior is proper, and replaced by zero sites otherwise. The prior
    enters only through ``posterior(tau, shift)`` (dense:
    :func:`posterior_from_sites`; low-rank: :mod:`bayesvm.evidence.ep_low_rank`) and
    its marginal variances ``prior_var`` (the residual's units).
    """
    zeros = jnp.zeros_like(prior_var)

    def cond(s: _LoopState):
        unconverged = (s.residual >= tol) & (s.settled < _SETTLED_ITERATIONS)
        return (s.n_iter < max_iter) & unconverged & (s.step > 1e-8) & _is_finite_posterior(s.posterior)

    def body(s: _LoopState):
        tau, shift, post = s.site_precision, s.site_shift, s.posterior
        tau_prop, shift_prop, ok = _site_proposal(cavity(post, tau, shift), moments)
        if not allow_negative:
            tau_prop = jnp.maximum(tau_prop, 0.0)
        residual = _residual(tau, shift, tau_prop, shift_prop, ok, prior_var)
        shrunk = jnp.maximum(_OSCILLATION_SHRINK * s.step, jnp.minimum(s.step, _MIN_OSCILLATION_STEP))
        step = jnp.where(residual > s.residual, shrunk, s.step)
        tau_try = jnp.where(ok, tau + step * (tau_prop - tau), tau)
        shift_try = jnp.where(ok, shift + step * (shift_prop - shift), shift)
        post_try = posterior(tau_try, shift_try)
        accept = _is_finite_posterior(post_try)
        tau, shift, post = jax.tree.map(
            lambda a, b: jnp.where(accept, a, b), (tau_try, shift_try, post_try), (tau, shift, post)
        )
        log_z = _log_z_ep(post, tau, shift, moments)
        quiet = accept & (jnp.abs(log_z - s.log_z) < log_z_tol)
        settled = jnp.where(quiet, s.settled + 1, 0)
        step = jnp.where(accept, step, 0.5 * step)
        return _LoopState(tau, shift, post, s.n_iter + 1, step, residual, log_z, settled)

    inf = jnp.asarray(jnp.inf, prior_var.dtype)
    tau0, shift0 = (zeros, zeros) if init_sites is None else init_sites
    post0 = posterior(tau0, shift0)
    if init_sites is not None:
        # the prior (zero sites) is factorised only when the warm start's posterior is improper
        tau0, shift0, post0 = jax.lax.cond(
            _is_finite_posterior(post0),
            lambda: (tau0, shift0, post0),
            lambda: (zeros, zeros, posterior(zeros, zeros)),
        )
    step0 = jnp.asarray(1.0 - damping, prior_var.dtype)
    start = _LoopState(tau0, shift0, post0, jnp.asarray(0), step0, inf, inf, jnp.asarray(0))
    end = jax.lax.while_loop(cond, body, start)
    tau, shift, post = end.site_precision, end.site_shift, end.posterior
    log_z = _log_z_ep(post, tau, shift, moments)
    settled = (end.residual < tol) | (end.settled >= _SETTLED_ITERATIONS)
    converged = settled & _is_finite_posterior(post) & jnp.isfinite(log_z)
    return _EPState(tau, shift, post, log_z, converged, end.n_iter)


def ep_loop_gram(
    K: Array,
    moments: SiteMoments,
    allow_negative: bool,
    damping,
    max_iter,
    tol,
    log_z_tol,
    init_sites: tuple[Array, Array] | None = None,
) -> _EPState:
    """:func:`ep_loop` over the dense prior N(0, K) (:func:`posterior_from_sites`)."""

    def posterior(tau, shift):
        return posterior_from_sites(K, tau, shift, allow_negative)

    return ep_loop(
        posterior, jnp.diagonal(K), moments, allow_negative, damping, max_iter, tol, log_z_tol, init_sites
    )


@float64
def run_ep(
    K: Array,
    moments: SiteMoments,
    allow_negative: bool,
    damping,
    max_iter,
    tol,
    log_z_tol,
    init_sites: tuple[Array, Array] | None = None,
) -> EPResult:
    """:func:`ep_loop` and the factors for predictions at new inputs."""
    state = ep_loop_gram(K, moments, allow_negative, damping, max_iter, tol, log_z_tol, init_sites)
    tau, shift = state.site_precision, state.site_shift
    predictor = predictor_from_sites(K, tau, state.posterior.mean, shift, allow_negative)
    return EPResult(
        state.log_z, state.posterior.mean, state.posterior.variance, tau, shift, state.converged, state.n_iter, predictor
    )


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------


def label_sites(y: Array, C) -> SiteMoments:
    def moments(mean, variance):
        return label_tilted_moments(mean, variance, C, y)

    return moments


def nu_sites(C) -> SiteMoments:
    def moments(mean, variance):
        return nu_tilted_moments(mean, variance, C)

    return moments


def flat_at_padding(moments: SiteMoments, mask: Array) -> SiteMoments:
    """``moments`` at the data entries (mask True), a flat site t_i = 1 at the padding.

    A flat site's tilted distribution is its own cavity (ln Z_i = 0), so its
    Gaussian site stays exactly zero: under the padded prior blockdiag(K, I)
    (:func:`bayesvm._linalg.pad_gram`) the padding entries then leave ln Z,
    the posterior of the data entries and the predictor unchanged.
    """

    def padded(mean, variance):
        at_data = moments(mean, variance)
        return TiltedMoments(
            jnp.where(mask, at_data.log_z, 0.0),
            jnp.where(mask, at_data.mean, mean),
            jnp.where(mask, at_data.variance, variance),
        )

    return padded


def shifted_sites(moments: SiteMoments, shift: Array) -> SiteMoments:
    """The sites t_i(theta_i + shift_i) from the sites t_i: the tilted moments of t_i(theta + shift) under the
    cavity N(mean, variance) are t_i's at the cavity N(mean + shift, variance), with the mean moved back by the
    shift (the ln N(D) of the latents around a common value, :mod:`bayesvm.normalization.common_direction`)."""

    def at(mean, variance):
        moved = moments(mean + shift, variance)
        return TiltedMoments(moved.log_z, moved.mean - shift, moved.variance)

    return at


def _site_family(sites: str, y: Array | None, C) -> SiteMoments:
    if sites == "labels":
        return label_sites(y, C)
    if sites == "nu":
        return nu_sites(C)
    raise ValueError(f"sites must be one of {SITE_FAMILIES}; got {sites!r}")


class LabelEP(NamedTuple):
    """EP for ln Q(D) (label sites) on a Gram matrix, with what the gradient of ln Z_EP needs at its fixed point.

    At a fixed point ln Z_EP is stationary in the site parameters, so its derivatives hold the sites and the
    cavities fixed (theory: "Expectation propagation"; :mod:`bayesvm.evidence.ep_gradient` applies them):

    result: the run (:class:`EPResult`, its predictor included);
    gram_cotangent: d ln Z_EP / dK = 1/2 (b b^T - R), b = shift - S mu = K^-1 mu, R = S^1/2 B^-1 S^1/2,
      B = I + S^1/2 K S^1/2 (Rasmussen & Williams 2006, eq. 5.27, in natural parameters; zero at the padding);
    penalty_derivative: d ln Z_EP / dC through the tilted normalisers ln Z_i(m_i, v_i; C) at the fixed
      cavities, kappa(C) included (:func:`label_penalty_derivative`).
    """

    result: EPResult
    gram_cotangent: Array
    penalty_derivative: Array


def label_penalty_derivative(post: GaussianPosterior, tau: Array, shift: Array, y: Array, C,
                             mask: Array | None = None) -> Array:
    """d/dC of sum_i ln Z_i(m_i, v_i; C), the label sites' tilted normalisers at the fixed cavities (m_i, v_i) of
    the posterior ``post`` with sites (tau, shift); ``mask`` (optional, bool per entry) leaves padding out."""
    cav = cavity(post, tau, shift)
    cav_var = 1.0 / cav.precision

    def log_z_sites(c):
        log_z = label_tilted_moments(cav.shift * cav_var, cav_var, c, y).log_z
        return jnp.sum(log_z if mask is None else jnp.where(mask, log_z, 0.0))

    return jax.grad(log_z_sites)(C)


@jit
def _padded_label_run(K, y, mask, C, sites, damping, max_iter, tol, log_z_tol) -> LabelEP:
    """EP with label sites on the padded prior K from the sites (precision, shift) (zeros: a cold start), with its
    predictor and the derivatives of :class:`LabelEP`: the one program behind ln Q(D) by EP on the full prior, for
    the search (warm sites, loose tolerances, the derivatives), the checks at its answer and the posterior (cold
    sites, tight tolerances, the predictor). The derivatives cost one more solve with B's factor; sharing the
    program saves a compilation per padded size (documentation: speed, twenty-eighth session)."""
    moments = flat_at_padding(label_sites(y, C), mask)
    state = ep_loop_gram(K, moments, False, damping, max_iter, tol, log_z_tol, sites)
    tau, shift, post = state.site_precision, state.site_shift, state.posterior
    sqrt_pos, chol, _ = positive_part(K, tau)
    alpha = shift - tau * post.mean
    R = sqrt_pos[:, None] * cho_solve((chol, True), jnp.diag(sqrt_pos))
    predictor = EPPredictor(alpha, chol, sqrt_pos, jnp.zeros((0, K.shape[0]), dtype=K.dtype))
    result = EPResult(state.log_z, post.mean, post.variance, tau, shift, state.converged, state.n_iter, predictor)
    return LabelEP(result, 0.5 * (jnp.outer(alpha, alpha) - R), label_penalty_derivative(post, tau, shift, y, C, mask))


def padded_label_run(K, y, mask, C, sites, damping, max_iter, tol, log_z_tol) -> LabelEP:
    """:func:`_padded_label_run` on a problem already padded to its static size (``mask`` marks the data entries;
    ``sites`` (precision, shift) of that size), its arguments with fixed types (:func:`_fixed_types`): every
    caller, whichever Python, NumPy or JAX values it holds, shares one compiled program."""
    y, precision, shift = (_linalg._array_module(v).asarray(v, dtype=np.float64) for v in (y, *sites))
    C, damping, max_iter, tol, log_z_tol = _fixed_types(C, damping, max_iter, tol, log_z_tol)
    return _padded_label_run(K, y, mask, C, (precision, shift), damping, max_iter, tol, log_z_tol)


def _fixed_types(C, damping, max_iter, tol, log_z_tol) -> tuple:
    """The loop's scalars as float64 (the iteration cap as int64): a weakly typed Python scalar and a NumPy one
    would compile a program each. NumPy on the host, jax.numpy under the caller's transformation."""
    xp = _linalg._array_module(C, damping, max_iter, tol, log_z_tol)
    real = partial(xp.asarray, dtype=np.float64)
    return real(C), real(damping), xp.asarray(max_iter, dtype=np.int64), real(tol), real(log_z_tol)


@jit(rarely_run=True)
def _padded_nu_run(K, mask, C, damping, max_iter, tol, log_z_tol) -> EPResult:
    moments = flat_at_padding(nu_sites(C), mask)
    return run_ep(K, moments, True, damping, max_iter, tol, log_z_tol)


def _trimmed(result: EPResult, n: int) -> EPResult:
    """The EP result of a padded problem restricted to its first n (data) entries: sliced on the host (NumPy)
    unless the call is traced (:func:`bayesvm._linalg._array_module`), where a program of its own would compile
    for every n."""
    result = jax.tree_util.tree_map(_linalg._array_module(result.mean).asarray, result)
    p = result.predictor
    predictor = EPPredictor(p.alpha[:n], p.chol_positive[:n, :n], p.sqrt_positive[:n], p.negative_factor[:n, :n])
    return result._replace(
        mean=result.mean[:n],
        variance=result.variance[:n],
        site_precision=result.site_precision[:n],
        site_shift=result.site_shift[:n],
        predictor=predictor,
    )


def _run_padded(K: Array, y: Array | None, C, sites: str, damping, max_iter, tol, log_z_tol) -> EPResult:
    """EP from cold sites on the problem padded to :func:`bayesvm._linalg.problem_size` (n) with flat sites, trimmed
    to n.

    The result is that of the unpadded problem (:func:`flat_at_padding`);
    problems of nearby sizes share one compiled program.
    """
    n = K.shape[-1]
    size = _linalg.problem_size(n)
    mask = _linalg.padding_mask(n, size)
    K = _linalg.pad_gram(K, size)
    if sites == "labels":
        zeros = np.zeros(size)
        result = padded_label_run(K, _linalg.pad_labels(y, size), mask, C, (zeros, zeros), damping, max_iter, tol,
                                  log_z_tol).result
    else:
        result = _padded_nu_run(K, mask, *_fixed_types(C, damping, max_iter, tol, log_z_tol))
    return _trimmed(result, n)


@float64
def ep_log_evidence(
    K: Array, y: Array, C: Array | float, *, damping=0.5, max_iter=200, tol=1e-8, log_z_tol=0.0
) -> EPResult:
    """EP for the naive evidence ln Q(D) = n ln kappa(C) + ln INT N(theta; 0, K) exp(-C sum_i l(y_i theta_i)).

    K: (n, n) Gram matrix of the training inputs; y: (n,) labels in {-1, +1};
    C > 0. ``result.log_z`` is the EP estimate of ln Q(D). damping is the
    fraction of the old site parameters kept at each parallel update; tol and
    log_z_tol the two convergence tests of :func:`run_ep`. ``log_z_tol = 0``
    (the default) switches the second off: the posterior moments are then
    converged too, not only ln Z (with one site ln Z is exact at once while
    the site is still moving). Callers that use ln Z alone may pass e.g. 1e-6.
    Inputs are not validated here (pure function, jit- and vmap-compatible;
    see the public wrappers). Compiled once per padded size
    (:func:`bayesvm._linalg.problem_size`), not once per n.
    """
    xp = _linalg._array_module(K, y)  # NumPy on the host: _run_padded pads it there
    K = xp.asarray(K, dtype=np.float64)
    return _run_padded(K, xp.asarray(y, dtype=K.dtype), C, "labels", damping, max_iter, tol, log_z_tol)


@float64
def converged_ep(K, y, C: float, *, tol: float = 1e-8, log_z_tol: float = 0.0) -> EPResult:
    """EP for ln Q(D) with its predictor (:func:`bayesvm.evidence.ep.ep_log_evidence`), each slower loop of
    ``EP_LOOPS`` in turn, from cold sites, until one converges: that loop's run (the last one where none does),
    with ``n_iter`` the sweeps of every loop tried."""
    sweeps = 0
    for damping, max_iter in EP_LOOPS:
        result = ep_log_evidence(K, y, C, damping=damping, max_iter=max_iter, tol=tol, log_z_tol=log_z_tol)
        sweeps += int(result.n_iter)
        if bool(result.converged):
            break
    return result._replace(n_iter=np.asarray(sweeps))


@float64
def ep_log_normalization(
    K: Array, C: Array | float, *, damping=0.5, max_iter=200, tol=1e-8, log_z_tol=0.0
) -> EPResult:
    """EP for ln E_{theta ~ N(0, K)}[prod_i nu(theta_i)], the single-draw ln N(D) (theory: "The single-draw identity").

    ``result.log_z`` is the estimate. nu is bimodal and its Gaussian sites
    can have negative precision; see :func:`run_ep` for how that is kept stable.
    Options and compilation as in :func:`ep_log_evidence`.
    """
    K = jnp.asarray(K, dtype=jnp.float64)
    return _run_padded(K, None, C, "nu", damping, max_iter, tol, log_z_tol)


SITE_FAMILIES = ("labels", "nu")


class EPBatch(NamedTuple):
    """ln Z by EP at a batch of hyperparameters (leading axis), with convergence flags and iteration counts."""

    log_z: Array
    converged: Array
    n_iter: Array


@float64
def ep_log_z_batch(
    base: Array, scales: Array, C: Array, y: Array | None = None, *, sites: str = "labels", damping=0.5,
    max_iter=200, tol=1e-4, log_z_tol=1e-3,
) -> EPBatch:
    """ln Z by EP at the priors N(0, scales[t] * base) with site parameter C[t], for every t.

    ``sites="labels"``: ln Q(D) as :func:`ep_log_evidence` (needs ``y``);
    ``sites="nu"``: ln E[prod_i nu(theta_i)] as :func:`ep_log_normalization`.
    Only ln Z is formed (no predictor), and the runs stop once it changes by
    less than ``log_z_tol`` nats an iteration (three in a row). EP converges
    linearly, slowly for the nu sites, so that leaves ln Z up to a few 1e-2
    nats from its fixed point (measured: 0.022 at most on the tests' path):
    ten times below EP's own error against sampling, and ample for comparing
    grid cells (the documentation's expectation-propagation page, "Cost"). The runs go one after
    another on a CPU (each stops at its own iteration count) and vectorised
    on an accelerator, where the batch runs in parallel. Every run starts
    from zero sites. Like :func:`ep_log_evidence`, compiled once per padded size.
    """
    _site_family(sites, y, 1.0)  # an unknown family is refused before anything is compiled
    base = jnp.asarray(base, dtype=jnp.float64)
    scales = jnp.asarray(scales, dtype=base.dtype)
    C = jnp.broadcast_to(jnp.asarray(C, dtype=base.dtype), scales.shape)
    n = base.shape[-1]
    size = _linalg.problem_size(n)
    y = None if y is None else _linalg.pad_vector(jnp.asarray(y, dtype=base.dtype), size)
    return _padded_batch(_linalg.pad_gram(base, size), scales, C, y, _linalg.padding_mask(n, size), damping,
                         max_iter, tol, log_z_tol, sites=sites)


@jit(static_argnames=("sites",))
def _padded_batch(base, scales, C, y, mask, damping, max_iter, tol, log_z_tol, *, sites: str) -> EPBatch:
    def run(point):
        scale, c = point
        K = _linalg.unit_padding(scale * base, mask)  # the padding stays at unit variance whatever the scale
        moments = flat_at_padding(_site_family(sites, y, c), mask)
        state = ep_loop_gram(K, moments, sites == "nu", damping, max_iter, tol, log_z_tol)
        return EPBatch(state.log_z, state.converged, state.n_iter)

    batch_size = 1 if jax.default_backend() == "cpu" else scales.shape[0]
    return jax.lax.map(run, (scales, C), batch_size=batch_size)
