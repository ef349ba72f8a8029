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

A third, ``ep_log_evidence(..., likelihood="probit")``, is the GP classifier's: t_i = Phi(y_i theta_i), a
normalised likelihood, so Z = P(D), its whole evidence (theory: "The GP classifier: a normalised likelihood").

The hinge site is log-concave, so its Gaussian site precisions are never
negative; nu is bimodal (maxima at theta = +-1) and gives negative site
precisions, which the posterior update handles by splitting the sites into
their positive and negative parts (see :func:`bayesvm.inference.ep_posterior.posterior_from_sites`).
The derivation and the stabilisation choices are written out in the
documentation (documentation: expectation propagation).

The loop itself and the site families are in :mod:`bayesvm.inference.ep_loop`
(damped parallel updates, their convergence tests and why the residual is
measured in units of the prior); here are the compiled programs on a dense
prior N(0, K) and the public entry points. With label sites, one compiled
program per padded size (:func:`padded_label_run`) serves every caller: the
search from warm sites with the derivatives its gradient needs
(:mod:`bayesvm.inference.ep_gradient`), the checks at its answer and the
posterior from cold sites with the predictor.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

from .. import _linalg
from .._precision import float64
from ..compilation import jit
from .ep_posterior import EPPredictor, GaussianPosterior, ep_predict, positive_part
from .ep_loop import (EP_LOOPS, EPResult, cavity, ep_loop_gram, flat_at_padding, nu_sites, run_ep,
                      site_family)
from .tilted import label_tilted_moments

Array = jax.Array

__all__ = [
    "FULL_TOLERANCE",
    "EP_LOOPS",
    "EPResult",
    "LabelEP",
    "EPBatch",
    "EPPredictor",
    "ep_log_z_batch",
    "ep_log_evidence",
    "converged_ep",
    "LIKELIHOODS",
    "ep_log_normalization",
    "ep_predict",
]

#: EP's site tolerance at full convergence: the reference estimates of ln Q(D) and ln N(D), and the posterior
FULL_TOLERANCE = 1e-8


class LabelEP(NamedTuple):
    """EP for ln Q(D) (label sites) on a Gram matrix, with what the gradient of ln Z_EP needs at its fixed point.

    At a fixed point ln Z_EP is stationary in the site parameters, so its derivatives hold the sites and the
    cavities fixed (theory: "Expectation propagation"; :mod:`bayesvm.inference.ep_gradient` applies them):

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
                             weights: Array | float = 1.0, opposite: Array | None = None) -> Array:
    """d/dC of sum_i ln Z_i(m_i, v_i; C), the label sites' tilted normalisers at the fixed cavities (m_i, v_i) of
    the posterior ``post`` with sites (tau, shift); ``weights``: each site's weight w_i (0 at padding, which then
    adds nothing); ``opposite``: the other label's weight o_i at the site (None: none carries both labels)."""
    cav = cavity(post, tau, shift)
    cav_var = 1.0 / cav.precision

    def log_z_sites(c):
        log_z = label_tilted_moments(cav.shift * cav_var, cav_var, c, y, weights, opposite).log_z
        return jnp.sum(jnp.where(weights > 0, log_z, 0.0))

    return jax.grad(log_z_sites)(C)


#: the site family of each label likelihood (:func:`bayesvm.inference.ep_loop.site_family`): the hinge's Q(y | theta)
#: and the GP classifier's Phi(y theta)
LIKELIHOOD_SITES = {"hinge": "labels", "probit": "probit"}
LIKELIHOODS = tuple(LIKELIHOOD_SITES)


@jit(static_argnames=("family", "unit_weights"))
def _padded_label_run(K, y, weights, opposite, C, sites, damping, max_iter, tol, log_z_tol, *, family="labels",
                      unit_weights=False) -> LabelEP:
    """EP with label sites on the padded prior K from the sites (precision, shift) (zeros: a cold start), with its
    predictor and the derivatives of :class:`LabelEP`: the one program behind ln Z by EP on the full prior, for
    the search (warm sites, loose tolerances, the derivatives), the checks at its answer and the posterior (cold
    sites, tight tolerances, the predictor). The derivatives cost one more solve with B's factor; sharing the
    program saves a compilation per padded size (documentation: speed).

    ``family`` (static): the site family, ``"labels"`` (the hinge, penalty C) or ``"probit"`` (C is not used, and
    the penalty derivative is 0); ``unit_weights`` (static): every data entry is one label of weight 1, which the
    probit sites then take in closed form (``weights`` still marks the padding with 0)."""
    site_weights = 1.0 if unit_weights else weights
    moments = flat_at_padding(site_family(family, y, C, site_weights, opposite), weights > 0)
    state = ep_loop_gram(K, moments, False, damping, max_iter, tol, log_z_tol, sites)
    tau, shift, post = state.site_precision, state.site_shift, state.posterior
    sqrt_pos, chol, _ = positive_part(K, tau)
    alpha = shift - tau * post.mean
    R = sqrt_pos[:, None] * cho_solve((chol, True), jnp.diag(sqrt_pos))
    predictor = EPPredictor(alpha, chol, sqrt_pos, jnp.zeros((0, K.shape[0]), dtype=K.dtype))
    result = EPResult(state.log_z, post.mean, post.variance, tau, shift, state.converged, state.n_iter, predictor)
    penalty = (label_penalty_derivative(post, tau, shift, y, C, weights, opposite) if family == "labels"
               else jnp.zeros((), dtype=K.dtype))
    return LabelEP(result, 0.5 * (jnp.outer(alpha, alpha) - R), penalty)


def padded_label_run(K, y, weights, C, sites, damping, max_iter, tol, log_z_tol, opposite=None,
                     likelihood: str = "hinge") -> LabelEP:
    """:func:`_padded_label_run` on a problem already padded to its static size (``weights``: each data entry's
    weight, 0 at the padding (:func:`bayesvm._linalg.pad_weights`); ``opposite``: the other label's weight at each
    entry, padded with 0, or None where no entry carries both labels (:func:`bayesvm.inference.ep_loop.merged_label_weights`);
    ``sites`` (precision, shift) of that size; ``likelihood``: ``"hinge"`` or ``"probit"`` (C is not used)), its
    arguments with fixed types (:func:`_fixed_types`): every caller, whichever Python, NumPy or JAX values it
    holds, shares one compiled program (one more where some entry carries both labels). For the probit likelihood
    the choice between the closed-form sites and the quadrature is made here, on the host: closed form where no
    entry carries both labels and every weight is 0 (padding) or 1."""
    if likelihood not in LIKELIHOOD_SITES:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}; got {likelihood!r}")
    y, weights, precision, shift = (_linalg._array_module(v).asarray(v, dtype=np.float64)
                                    for v in (y, weights, *sites))
    if opposite is not None:
        opposite = _linalg._array_module(opposite).asarray(opposite, dtype=np.float64)
    C, damping, max_iter, tol, log_z_tol = _fixed_types(1.0 if C is None else C, damping, max_iter, tol, log_z_tol)
    statics = {}  # a hinge run names none: its program is the one the search has always compiled
    if likelihood == "probit":
        unit = (opposite is None and _linalg._array_module(weights) is np
                and bool(np.all((weights == 0.0) | (weights == 1.0))))
        statics = {"family": LIKELIHOOD_SITES[likelihood], "unit_weights": unit}
    return _padded_label_run(K, y, weights, opposite, C, (precision, shift), damping, max_iter, tol, log_z_tol,
                             **statics)


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


def _run_padded(K: Array, y: Array | None, weights, opposite, C, sites: str, damping, max_iter, tol,
                log_z_tol) -> EPResult:
    """EP from cold sites on the problem padded to :func:`bayesvm._linalg.problem_size` (n) with flat sites, trimmed
    to n.

    The result is that of the unpadded problem (:func:`flat_at_padding`);
    problems of nearby sizes share one compiled program.
    """
    n = K.shape[-1]
    size = _linalg.problem_size(n)
    mask = _linalg.padding_mask(n, size)
    K = _linalg.pad_gram(K, size)
    if sites in ("labels", "probit"):
        zeros = np.zeros(size)
        result = padded_label_run(K, _linalg.pad_labels(y, size), _linalg.pad_weights(weights, n, size), C,
                                  (zeros, zeros), damping, max_iter, tol, log_z_tol,
                                  None if opposite is None else _linalg.pad_weights(opposite, n, size),
                                  likelihood="hinge" if sites == "labels" else "probit").result
    else:
        result = _padded_nu_run(K, mask, *_fixed_types(C, damping, max_iter, tol, log_z_tol))
    return _trimmed(result, n)


@float64
def ep_log_evidence(
    K: Array, y: Array, C: Array | float | None = None, *, weights=None, opposite=None, likelihood: str = "hinge",
    damping=0.5, max_iter=200, tol=FULL_TOLERANCE, log_z_tol=0.0
) -> EPResult:
    """EP for the naive evidence ln Q(D) = sum_i w_i ln kappa(C) + ln INT N(theta; 0, K) exp(-C sum_i w_i l(y_i theta_i)),
    or with ``likelihood="probit"`` for the GP classifier's evidence ln P(D) = ln INT N(theta; 0, K)
    prod_i Phi(y_i theta_i)^{w_i} dtheta (no C; normalised, so no ln N(D) to subtract).

    K: (n, n) Gram matrix of the training inputs; y: (n,) labels in {-1, +1};
    C > 0 (the hinge only); weights: (n,) positive weights w_i of the rows (None: every w_i = 1; theory: "Weights and repeated
    rows"); opposite: (n,) the weight o_i of the other label on row i's latent, whose term
    o_i (ln kappa(C) - C l(-y_i theta_i)), or o_i ln Phi(-y_i theta_i), joins row i's site (None: no row carries both labels;
    :func:`bayesvm.inference.ep_loop.merged_label_weights` merges rows of equal input so). ``result.log_z`` is the EP estimate of ln Z. damping is the
    fraction of the old site parameters kept at each parallel update; tol and
    log_z_tol the two convergence tests of :func:`bayesvm.inference.ep_loop.run_ep`. ``log_z_tol = 0``
    (the default) switches the second off: the posterior moments are then
    converged too, not only ln Z (with one site ln Z is exact at once while
    the site is still moving). Callers that use ln Z alone may pass e.g. 1e-6.
    Inputs are not validated here (pure function, jit- and vmap-compatible;
    see the public wrappers). Compiled once per padded size
    (:func:`bayesvm._linalg.problem_size`), not once per n.
    """
    if likelihood not in LIKELIHOOD_SITES:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}; got {likelihood!r}")
    if likelihood == "hinge" and C is None:
        raise ValueError("the hinge likelihood needs its penalty C")
    xp = _linalg._array_module(K, y)  # NumPy on the host: _run_padded pads it there
    K = xp.asarray(K, dtype=np.float64)
    return _run_padded(K, xp.asarray(y, dtype=K.dtype), weights, opposite, C, LIKELIHOOD_SITES[likelihood], damping,
                       max_iter, tol, log_z_tol)


@float64
def converged_ep(K, y, C: float | None = None, *, weights=None, opposite=None, likelihood: str = "hinge",
                 tol: float = FULL_TOLERANCE, log_z_tol: float = 0.0) -> EPResult:
    """EP for ln Q(D) (or the probit GP's ln P(D)) with its predictor (:func:`bayesvm.inference.ep.ep_log_evidence`),
    each slower loop of ``EP_LOOPS`` in turn, from cold sites, until one converges: that loop's run (the last one
    where none does), with ``n_iter`` the sweeps of every loop tried."""
    sweeps = 0
    for damping, max_iter in EP_LOOPS:
        result = ep_log_evidence(K, y, C, weights=weights, opposite=opposite, likelihood=likelihood,
                                 damping=damping, max_iter=max_iter, tol=tol, log_z_tol=log_z_tol)
        sweeps += int(result.n_iter)
        if bool(result.converged):
            break
    return result._replace(n_iter=np.asarray(sweeps))


@float64
def ep_log_normalization(
    K: Array, C: Array | float, *, damping=0.5, max_iter=200, tol=FULL_TOLERANCE, log_z_tol=0.0
) -> EPResult:
    """EP for ln E_{theta ~ N(0, K)}[prod_i nu(theta_i)], the single-draw ln N(D) (theory: "The single-draw identity").

    ``result.log_z`` is the estimate. nu is bimodal and its Gaussian sites
    can have negative precision; see :func:`bayesvm.inference.ep_loop.run_ep` for how that is kept stable.
    Options and compilation as in :func:`ep_log_evidence`.
    """
    K = jnp.asarray(K, dtype=jnp.float64)
    return _run_padded(K, None, None, None, C, "nu", damping, max_iter, tol, log_z_tol)



class EPBatch(NamedTuple):
    """ln Z by EP at a batch of hyperparameters (leading axis), with convergence flags and iteration counts."""

    log_z: Array
    converged: Array
    n_iter: Array


@float64
def ep_log_z_batch(
    base: Array, scales: Array, C: Array, y: Array | None = None, *, weights=None, opposite=None,
    sites: str = "labels", damping=0.5, max_iter=200, tol=1e-4, log_z_tol=1e-3,
) -> EPBatch:
    """ln Z by EP at the priors N(0, scales[t] * base) with site parameter C[t], for every t.

    ``sites="labels"``: ln Q(D) as :func:`ep_log_evidence` (needs ``y``; ``weights`` and ``opposite`` as there);
    ``sites="nu"``: ln E[prod_i nu(theta_i)] as :func:`ep_log_normalization`.
    Only ln Z is formed (no predictor), and the runs stop once it changes by
    less than ``log_z_tol`` nats an iteration (three in a row). EP converges
    linearly, slowly for the nu sites, so that leaves ln Z up to a few 1e-2
    nats from its fixed point: well below EP's own error against sampling, and
    ample for comparing grid cells (documentation: expectation propagation,
    "The posterior from the sites, including negative precisions"; speed, "EP on
    the selection grid"). The runs go one after another on a CPU (each stops at
    its own iteration count) and vectorised on an accelerator, where the batch
    runs in parallel. Every run starts from zero sites. Like
    :func:`ep_log_evidence`, compiled once per padded size.
    """
    site_family(sites, y, 1.0)  # an unknown family is refused before anything is compiled
    base = jnp.asarray(base, dtype=jnp.float64)
    scales = jnp.asarray(scales, dtype=base.dtype)
    C = jnp.broadcast_to(jnp.asarray(C, dtype=base.dtype), scales.shape)
    n = base.shape[-1]
    size = _linalg.problem_size(n)
    y = None if y is None else _linalg.pad_vector(jnp.asarray(y, dtype=base.dtype), size)
    opposite = None if opposite is None else _linalg.pad_weights(opposite, n, size)
    return _padded_batch(_linalg.pad_gram(base, size), scales, C, y, _linalg.pad_weights(weights, n, size),
                         opposite, damping, max_iter, tol, log_z_tol, sites=sites)


@jit(static_argnames=("sites",))
def _padded_batch(base, scales, C, y, weights, opposite, damping, max_iter, tol, log_z_tol, *,
                  sites: str) -> EPBatch:
    mask = weights > 0

    def run(point):
        scale, c = point
        K = _linalg.unit_padding(scale * base, mask)  # the padding stays at unit variance whatever the scale
        moments = flat_at_padding(site_family(sites, y, c, weights, opposite), mask)
        state = ep_loop_gram(K, moments, sites == "nu", damping, max_iter, tol, log_z_tol)
        return EPBatch(state.log_z, state.converged, state.n_iter)

    batch_size = 1 if jax.default_backend() == "cpu" else scales.shape[0]
    return jax.lax.map(run, (scales, C), batch_size=batch_size)
