"""The loop of expectation propagation (EP) and its site families, for any Gaussian prior.

The machinery behind :mod:`bayesvm.inference.ep` (a dense prior N(0, K)) and
:mod:`bayesvm.inference.ep_low_rank` (a low-rank one): the damped parallel
loop, the site families of the evidence (labels: Q(y_i | theta_i); nu: the
label-emission probability; probit: the GP classifier's Phi(y_i theta_i)) and
the result with its predictor (theory: "Expectation propagation";
documentation: expectation propagation, for the derivation and the
stabilisation choices).

Updates are parallel (all sites from the same posterior, then one Cholesky
recomputation), damped in natural parameters and run inside
``jax.lax.while_loop``: everything is jit-compiled with fixed shapes and
vmaps over batches of Gram matrices and C values.

The loop (:func:`ep_loop`). The prior enters only through the posterior
of the prior times the Gaussian sites (:func:`bayesvm.inference.ep_posterior.posterior_from_sites` for a
dense K; :mod:`bayesvm.inference.ep_low_rank` for a low-rank one) and through its
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
and more, where the evidence selection goes) every proposal would look
converged after one iteration and EP would stop at its first, factorised
guess, tens of nats below the annealed estimate of ln N(D) (a test covers this).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._precision import float64
from .ep_posterior import EPPredictor, GaussianPosterior, posterior_from_sites, predictor_from_sites
from .probit import probit_tilted_moments
from .tilted import TiltedMoments, label_tilted_moments, nu_tilted_moments

Array = jax.Array

__all__ = [
    "EP_LOOPS",
    "EPResult",
    "SITE_FAMILIES",
    "SiteMoments",
    "cavity",
    "ep_loop",
    "ep_loop_gram",
    "run_ep",
    "label_sites",
    "merged_label_weights",
    "probit_sites",
    "nu_sites",
    "flat_at_padding",
    "shifted_sites",
    "site_family",
]

# ---------------------------------------------------------------------------
# The EP loop
# ---------------------------------------------------------------------------

SiteMoments = Callable[[Array, Array], TiltedMoments]


class EPResult(NamedTuple):
    """Result of an EP run.

    log_z: EP estimate of ln INT N(theta; 0, K) prod_i t_i(theta_i) dtheta
      (ln Q(D) including n ln kappa(C) for :func:`bayesvm.inference.ep.ep_log_evidence` with the hinge
      likelihood, ln P(D) of the GP classifier with the probit one;
      ln E_GP[prod_i nu(theta_i)] for ``ep_log_normalization``).
    mean, variance: approximate posterior mean and marginal variances of theta.
    site_precision, site_shift: Gaussian sites exp(-tau theta^2 / 2 + shift theta).
    converged: site parameters settled within tol, or (log_z_tol > 0) ln Z settled, and everything is finite.
    n_iter: number of parallel updates done.
    predictor: what :func:`bayesvm.inference.ep_posterior.ep_predict` needs.
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
#: longer loop for the points where the parallel updates keep oscillating (documentation: expectation propagation,
#: "The posterior from the sites, including negative precisions")
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
    :func:`posterior_from_sites`; low-rank: :mod:`bayesvm.inference.ep_low_rank`) and
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
# Site families
# ---------------------------------------------------------------------------


def label_sites(y: Array, C, weights: Array | float = 1.0, opposite: Array | None = None) -> SiteMoments:
    """The label sites Q(y_i | theta_i)^{w_i} Q(-y_i | theta_i)^{o_i} (:func:`bayesvm.inference.tilted.label_tilted_moments`;
    ``opposite`` o_i: None where no site carries both labels, :func:`merged_label_weights`)."""

    def moments(mean, variance):
        return label_tilted_moments(mean, variance, C, y, weights, opposite)

    return moments


def probit_sites(y: Array, weights: Array | float = 1.0, opposite: Array | None = None) -> SiteMoments:
    """The GP classifier's label sites Phi(y_i theta_i)^{w_i} Phi(-y_i theta_i)^{o_i}
    (:func:`bayesvm.inference.probit.probit_tilted_moments`: in closed form where ``weights`` is the number 1 and
    ``opposite`` None, by quadrature otherwise)."""

    def moments(mean, variance):
        return probit_tilted_moments(mean, variance, y, weights, opposite)

    return moments


def merged_label_weights(X, Y, weights=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The label sites' weights of k binary problems with the rows of each distinct input merged into one site.

    Rows with equal inputs share one latent theta, so their likelihood terms are one factor of it: EP with one site
    per input approximates that factor as a whole, while one site per row would be another, coarser approximation
    (theory: "Weights and repeated rows"). X: (n, d) inputs; Y: (k, n) or (n,) labels in {-1, +1}; weights: (n,)
    row weights (None: 1 each). Returns ``(weights, opposite)``, (k, n) arrays: at the first row of positive weight
    of each input, the summed weight of its rows with that row's label (``weights``) and with the other label
    (``opposite``; None where no input of any problem has both); 0 (a flat site) at the input's other rows. Where
    every input is distinct, ``weights`` is the row weights for each problem.
    """
    X = np.asarray(X)
    n = X.shape[0]
    Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    _, group = np.unique(X.reshape(n, -1), axis=0, return_inverse=True)
    group = group.ravel()
    if group.max(initial=-1) + 1 == n:
        return np.broadcast_to(w, Y.shape).copy(), None
    # each input's site sits on its first row of positive weight (on its first row where none has)
    order = np.lexsort((np.arange(n), w <= 0, group))
    site = np.empty(group.max() + 1, dtype=np.int64)
    site[group[order[::-1]]] = order[::-1]
    is_site = np.zeros(n, dtype=bool)
    is_site[site] = True
    same = Y == Y[:, site[group]]
    totals = [np.stack([np.bincount(group, weights=w * s, minlength=site.size)[group] * is_site for s in label])
              for label in (same, ~same)]
    own, opposite = totals
    return own, (opposite if np.any(opposite > 0) else None)


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
    shift."""

    def at(mean, variance):
        moved = moments(mean + shift, variance)
        return TiltedMoments(moved.log_z, moved.mean - shift, moved.variance)

    return at


def site_family(sites: str, y: Array | None, C, weights: Array | float = 1.0,
                opposite: Array | None = None) -> SiteMoments:
    """The site family called ``sites``: ``"labels"`` (the hinge likelihood Q(y | theta), penalty C), ``"probit"``
    (the GP classifier's Phi(y theta); C is not used) or ``"nu"`` (the label-emission probability at penalty C)."""
    if sites == "labels":
        return label_sites(y, C, weights, opposite)
    if sites == "probit":
        return probit_sites(y, weights, opposite)
    if sites == "nu":
        return nu_sites(C)
    raise ValueError(f"sites must be one of {SITE_FAMILIES}; got {sites!r}")


SITE_FAMILIES = ("labels", "probit", "nu")
