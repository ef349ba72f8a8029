"""Every approximation of ln Q(D) and ln N(D) behind one interface.

An estimator takes a batch of hyperparameter cells that share one kernel
shape and offset ratio (:class:`Cells`: the prior of cell b is
k0_b (base + r), its penalty C_b) and returns an :class:`Estimate` (value,
standard error, whether it can be trusted, diagnostics), one entry per cell.
:func:`naive_estimator` and :func:`normalization_estimator` are the only
places where a name becomes an estimator; :func:`bayesvm.log_evidence` is a
one-cell call into them and the grid selection a block-at-a-time one.

ln Q(D), the naive evidence (theory: "Why C and k0 need the evidence"):

* ``"ep"``: expectation propagation (:func:`bayesvm.inference.ep.ep_log_z_batch`);
* ``"laplace"``: Sollich's Laplace-style form around the MAP solution (far
  too optimistic where many points are marginal; theory: "Where the Laplace
  form breaks");
* ``"sampled"``: tempered SMC from the prior to the posterior, with a standard
  error: the reference the other two are checked against.

ln N(D), the normalisation factor (theory: "The normalisation factor"). Two
integrals carry that name. Over the n training inputs themselves (theory:
"The single-draw identity"), ln N(D) ~= ln E_theta[prod_i nu(theta(x_i))]:

* ``"annealed"`` (the default everywhere): tempered SMC, with a standard
  error from independent runs;
* ``"ep"``: EP, deterministic but tens of nats low where the latents are
  strongly correlated (theory: "Expectation propagation").

A normalised likelihood has ln N(D) = 0 (:class:`NoNormalization`, not a choice of the hinge's estimators): with
``EPNaive(likelihood="probit")`` the GP classifier's evidence is ln Z alone.

Over M stand-in inputs for the input distribution, with the exponent n,
ln N(D) ~= ln E_theta[(mean_j nu(theta(x_j)))^n] (``cells.base`` is then the
stand-in inputs' Gram matrix):

* ``"annealed-stand-in"``: tempered SMC;
* ``"prior"``: plain sampling from the prior with common random numbers
  across the cells; biased low by many nats at realistic n.

Along a search path (:mod:`bayesvm.selection.search`), where the
hyperparameters move and the exact gradient in the search coordinates is
needed, two of them serve, through their ``along_path`` method on the full
prior or the low-rank one: ``"ep"`` for ln Q(D) (warm-started, k problems
sharing one K(x); :mod:`bayesvm.inference.ep_gradient`) and ``"annealed"``
for ln N(D) (reweighted tempered-SMC particles; :mod:`bayesvm.normalization.path`).
:func:`path_estimators` hands them out by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _linalg
from .._precision import as_float64
from ..normalization.annealing import (
    annealed_log_expectation,
    annealed_log_naive_evidence,
    mean_route_log_likelihood,
    prior_factor,
)
from ..normalization.budget import EvidenceBudget, budgeted_log_normalization, prior_basis, widened
from ..inference.ep import EP_LOOPS, FULL_TOLERANCE, LIKELIHOOD_SITES, converged_ep, ep_log_z_batch
from ..inference.ep_gradient import EPSites, NaiveEvidenceGradient, ep_naive_evidences_and_gradient
from ..inference.ep_loop import merged_label_weights
from ..inference.ep_low_rank import low_rank_naive_evidences_and_gradient
from ..kernels import Kernel
from ..normalization.low_rank import LowRankNormalizationPath
from ..normalization.path import NormalizationPath, PathEstimate, ReweightedPath
from ..inference.laplace import DETERMINANTS, NaiveEvidenceTerms, laplace_factor, laplace_log_naive_evidence
from ..normalization.draws import PRIOR_DRAWS, draws_from_base, log_normalization_from_draws
from ..solver.dual import solve_dual_boxes

__all__ = [
    "Cells",
    "Estimate",
    "NAIVE_ESTIMATORS",
    "NORMALIZATION_ESTIMATORS",
    "STAND_IN_ESTIMATORS",
    "naive_estimator",
    "normalization_estimator",
    "path_estimators",
]

#: cells per compiled EP or dual-solver batch; the last batch is padded by repetition, so every block of
#: the grid shares one compilation per problem size (a single cell runs alone)
_BATCH = 3
#: below this effective number of draws a plain prior-sampling estimate is flagged
_MIN_PRIOR_ESS = 100.0


class Cells(NamedTuple):
    """A batch of B hyperparameter cells on one set of M inputs.

    base: (M, M) unit-amplitude, zero-offset Gram matrix of the inputs the
      integral runs over (the training inputs, or stand-in inputs);
    offset_ratio: k_b / k0, shared by the batch;
    amplitude, C: (B,) k0 and the penalty of each cell: cell b's prior is
      amplitude_b (base + offset_ratio);
    y: (M,) labels in {-1, +1} (ln Q(D) only; None for ln N(D));
    n: the number of training points (the exponent of the stand-in integral; M otherwise);
    rows: ``(index, totals)`` of the distinct inputs among the M and their summed weights
      (:func:`bayesvm._linalg.distinct_rows`), which ln N(D) over the training inputs collapses onto; None: every
      input distinct, of weight 1;
    weights: (M,) the inputs' weights, each label term to that power (theory: "Weights and repeated rows"); None:
      every weight 1;
    group: (M,) which distinct input each of the M is (equal numbers, equal inputs: one latent, so EP gives them
      one label site, :func:`bayesvm.inference.ep_loop.merged_label_weights`); None: every input distinct.
    """

    base: np.ndarray
    offset_ratio: float
    amplitude: np.ndarray
    C: np.ndarray
    y: np.ndarray | None = None
    n: int | None = None
    rows: tuple[np.ndarray, np.ndarray] | None = None
    weights: np.ndarray | None = None
    group: np.ndarray | None = None

    @classmethod
    def at(cls, base, offset_ratio, amplitude, C, y=None, n=None, rows=None, weights=None, group=None) -> "Cells":
        """Cells with the per-cell values as float64 arrays broadcast to one length."""
        amplitude, C = np.broadcast_arrays(np.atleast_1d(np.asarray(amplitude, dtype=np.float64)),
                                           np.atleast_1d(np.asarray(C, dtype=np.float64)))
        base = np.asarray(base, dtype=np.float64)  # host-side (NumPy): the estimators factor and pad it there
        n = base.shape[0] if n is None else int(n)
        return cls(base, float(offset_ratio), amplitude.copy(), C.copy(),
                   None if y is None else np.asarray(y, dtype=np.float64), n, rows,
                   None if weights is None else np.asarray(weights, dtype=np.float64), group)

    @property
    def size(self) -> int:
        return int(self.C.size)

    @property
    def label_weights(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(weights, opposite) of the label sites of ``y``, the rows of one input merged into one site
        (:func:`bayesvm.inference.ep_loop.merged_label_weights`)."""
        group = np.arange(self.y.size) if self.group is None else self.group
        weights, opposite = merged_label_weights(group[:, None], self.y, self.weights)
        return weights[0], None if opposite is None else opposite[0]

    @property
    def unit_prior(self) -> np.ndarray:
        """The prior covariance at unit amplitude, base + r (k_b / k0): cell b's is amplitude_b times it."""
        return self.base + self.offset_ratio

    def prior(self, b: int) -> np.ndarray:
        """Cell b's prior covariance k0 (base + r)."""
        return self.amplitude[b] * self.unit_prior


class Estimate(NamedTuple):
    """One estimate per cell: value, standard error (0 where deterministic), ``trusted`` (EP converged;
    the sampler's independent runs agree; enough effective prior draws) and per-cell diagnostics."""

    value: np.ndarray
    se: np.ndarray
    trusted: np.ndarray
    diagnostics: dict

    def at(self, b: int) -> "Estimate":
        """Cell b alone (scalars)."""
        return Estimate(float(self.value[b]), float(self.se[b]), bool(self.trusted[b]),
                        jax.tree_util.tree_map(lambda v: v[b], self.diagnostics))


def _in_batches(run: Callable, *per_cell: np.ndarray, batch_size: int | None = None):
    """``run`` on fixed-size batches of the cells (the last padded by repetition), outputs concatenated;
    ``batch_size`` (default: up to ``_BATCH``) keeps a subset of cells on the compiled batch shape of the whole."""
    size = per_cell[0].size
    batch_size = min(_BATCH, size) if batch_size is None else batch_size
    outputs = []
    for start in range(0, size, batch_size):
        index = np.minimum(np.arange(start, start + batch_size), size - 1)
        batch = run(*(np.asarray(v[index]) for v in per_cell))
        outputs.append(jax.tree_util.tree_map(lambda v, k=min(batch_size, size - start): np.asarray(v)[:k], batch))
    return jax.tree_util.tree_map(lambda *v: np.concatenate(v), *outputs)


def _ep_estimate(cells: Cells, sites: str, tol: float, log_z_tol: float) -> Estimate:
    """ln Z by EP at every cell (:func:`bayesvm.inference.ep.ep_log_z_batch`, ``sites`` "labels", "probit" or "nu"),
    trusted where converged; cells whose loop has not converged run again with each slower loop of ``EP_LOOPS`` in
    turn. One cell of label sites runs :func:`converged_ep`, whose result (``diagnostics["ep"]``) also serves the
    posterior there."""
    if sites != "nu" and cells.size == 1:
        weights, opposite = cells.label_weights
        likelihood = "hinge" if sites == "labels" else "probit"
        result = converged_ep(cells.prior(0), cells.y, float(cells.C[0]), weights=weights, opposite=opposite,
                              likelihood=likelihood, tol=tol, log_z_tol=log_z_tol)
        diagnostics = {"n_iter": np.array([int(result.n_iter)]), "ep": jax.tree_util.tree_map(lambda v: np.asarray(v)[None], result)}
        return Estimate(np.array([float(result.log_z)]), np.zeros(1), np.array([bool(result.converged)]), diagnostics)
    base = cells.unit_prior
    y = None if sites == "nu" else cells.y
    weights, opposite = cells.label_weights if y is not None else (None, None)
    log_z, converged = np.full(cells.size, np.nan), np.zeros(cells.size, bool)
    n_iter = np.zeros(cells.size, int)
    todo = np.arange(cells.size)
    for damping, max_iter in EP_LOOPS:
        out = _in_batches(lambda a, c: ep_log_z_batch(base, a, c, y, weights=weights, opposite=opposite,
                                                      sites=sites, damping=damping, max_iter=max_iter, tol=tol,
                                                      log_z_tol=log_z_tol),
                          cells.amplitude[todo], cells.C[todo], batch_size=min(_BATCH, cells.size))
        log_z[todo], converged[todo] = out.log_z, out.converged
        n_iter[todo] += out.n_iter
        todo = todo[~out.converged]
        if todo.size == 0:
            break
    return Estimate(log_z, np.zeros(cells.size), converged, {"n_iter": n_iter})


# ---------------------------------------------------------------------------
# ln Q(D)


@dataclass(frozen=True)
class EPNaive:
    """ln Q(D) by EP (label sites); stops once ln Z changes by less than ``log_z_tol`` nats three times running.

    ``likelihood``: ``"hinge"`` (the SVM's Q(y | theta), penalty C) or ``"probit"`` (the GP classifier's
    Phi(y theta), whose ln Z is its whole evidence ln P(D); the cells' C is not used).
    """

    log_z_tol: float = 1e-6
    tol: float = FULL_TOLERANCE
    likelihood: str = "hinge"

    def __post_init__(self):
        if self.likelihood not in LIKELIHOOD_SITES:
            raise ValueError(f"likelihood must be one of {tuple(LIKELIHOOD_SITES)}; got {self.likelihood!r}")

    def __call__(self, cells: Cells) -> Estimate:
        return _ep_estimate(cells, LIKELIHOOD_SITES[self.likelihood], self.tol, self.log_z_tol)

    def along_path(self, X, template: Kernel, inducing=None, weights=None) -> Callable[..., NaiveEvidenceGradient]:
        """ln Q(D) of k problems on the inputs X (n, d) with the rows' ``weights`` (n,) (None: 1 each) and the
        gradient of their sum in the search coordinates, as
        ``naive(x, Y, sites, damping, max_iter)`` (Y (k, n) in -1/+1, sites their (k, n) warm starts): on the full
        prior (:func:`bayesvm.inference.ep_gradient.ep_naive_evidences_and_gradient`) or, given ``inducing`` inputs
        (m, d), on the low-rank one (:func:`bayesvm.inference.ep_low_rank.low_rank_naive_evidences_and_gradient`)."""
        if inducing is not None and self.likelihood != "hinge":
            raise ValueError(f"the {self.likelihood} likelihood's EP runs on the full prior only; got inducing inputs")
        X = as_float64(X)
        loop = {"tol": self.tol, "log_z_tol": self.log_z_tol}
        _, group = np.unique(np.asarray(X), axis=0, return_inverse=True)  # the distinct inputs, found once

        def naive(x, Y, sites: EPSites, damping: float, max_iter: int) -> NaiveEvidenceGradient:
            # one label site per distinct input
            site_weights, opposite = merged_label_weights(group.reshape(-1, 1), Y, weights)
            labels = {"weights": site_weights, "opposite": opposite, "damping": damping, "max_iter": max_iter}
            if inducing is None:
                return ep_naive_evidences_and_gradient(x, X, Y, template, sites, likelihood=self.likelihood,
                                                       **labels, **loop)
            return low_rank_naive_evidences_and_gradient(x, X, inducing, Y, template, sites, **labels, **loop)

        return naive


@dataclass(frozen=True)
class LaplaceNaive:
    """Sollich's Laplace-style ln Q(D) at each cell's MAP solution; ``determinant``: "regularized" or "raw"."""

    determinant: str = "regularized"

    def __post_init__(self):
        if self.determinant not in DETERMINANTS:
            raise ValueError(f"determinant must be one of {DETERMINANTS}; got {self.determinant!r}")

    def __call__(self, cells: Cells) -> Estimate:
        # one matrix for the whole batch: the dual on base + r with box P = C k0, then alpha = b / k0
        base = cells.unit_prior
        solutions = _in_batches(lambda P: solve_dual_boxes(base, cells.y, P, weights=cells.weights),
                                cells.amplitude * cells.C)
        terms = []
        for b in range(cells.size):
            solution = jax.tree_util.tree_map(lambda v, b=b: jnp.asarray(v[b]), solutions)
            solution = solution._replace(alpha=solution.alpha / cells.amplitude[b])
            K = cells.prior(b)
            size = _linalg.buffer_size(int(np.sum(solution.marginal)), K.shape[0])
            boxes = cells.C[b] * (1.0 if cells.weights is None else cells.weights)
            factor = laplace_factor(K, solution, boxes, size)
            terms.append(laplace_log_naive_evidence(K, cells.y, cells.C[b], solution, factor, self.determinant,
                                                    cells.weights))
        terms = NaiveEvidenceTerms(*(np.array(column, dtype=np.float64) for column in zip(*terms)))
        return Estimate(terms.value, np.zeros(cells.size), np.isfinite(terms.value), {"terms": terms._asdict()})


@dataclass(frozen=True)
class SampledNaive:
    """ln Q(D) by tempered SMC from the prior to the posterior; ``options`` go to the sampler."""

    key: int = 0
    options: dict = field(default_factory=dict)

    def __call__(self, cells: Cells) -> Estimate:
        factor = prior_factor(cells.unit_prior)
        results = [annealed_log_naive_evidence(None, cells.y, cells.C[b], chol=np.sqrt(cells.amplitude[b]) * factor,
                                               key=self.key, **self.options) for b in range(cells.size)]
        return _from_annealing(results)


# ---------------------------------------------------------------------------
# ln N(D)


def _from_annealing(results) -> Estimate:
    return Estimate(
        np.array([r.value for r in results]), np.array([r.se for r in results]),
        np.array([r.trusted for r in results]),
        {"ess": np.array([r.ess for r in results]), "n_runs": np.array([r.n_runs for r in results]),
         "n_particles": np.array([r.n_particles for r in results]),
         "n_mcmc_steps": np.array([r.n_mcmc_steps for r in results]),
         "n_temperatures": np.array([r.n_temperatures for r in results])},
    )


@dataclass(frozen=True)
class AnnealedNormalization:
    """ln E_theta[prod_i nu(theta_i)] over the training inputs by tempered SMC (route "product") at a fixed budget.

    The inputs collapse onto their distinct rows (``cells.rows``), each with its multiplicity as the exponent of its
    nu: exact, since equal rows share one latent. The prior of the distinct inputs is sampled in its numerical
    rank (:func:`bayesvm.normalization.budget.prior_basis`), one eigen-decomposition per cell, and the work is
    ``budget``'s plan for ``role`` (:class:`bayesvm.normalization.budget.EvidenceBudget`; a grid's screen takes
    the anchors' plan of a budget of its own): the estimate never runs past
    :meth:`~bayesvm.normalization.budget.EvidenceBudget.ceiling`, and where its runs disagree it comes back untrusted
    with the spread of a single run as its standard error
    (:func:`bayesvm.normalization.budget.budgeted_log_normalization`).
    ``diagnostics`` hold each cell's effective number of runs, its settings, its ``rank`` and
    ``likelihood_evaluations``. With ``keep_particles``, ``diagnostics["annealing"]`` holds each cell's
    :class:`~bayesvm.normalization.annealing.AnnealingResult` with its final particles theta (R, N, size) over the
    distinct inputs padded to :func:`bayesvm._linalg.problem_size`, as the last resampling left them.
    """

    key: int = 0
    budget: EvidenceBudget = EvidenceBudget()
    role: str = "check"
    keep_particles: bool = False

    def __call__(self, cells: Cells) -> Estimate:
        index, counts = (np.arange(cells.base.shape[0]), np.ones(cells.base.shape[0])) if cells.rows is None \
            else cells.rows
        unit = cells.unit_prior[np.ix_(index, index)]
        results = [budgeted_log_normalization(prior_basis(cells.amplitude[b] * unit), counts, cells.C[b],
                                              budget=self.budget, role=self.role, key=self.key,
                                              keep_particles=self.keep_particles)
                   for b in range(cells.size)]
        estimate = _from_annealing(results)
        estimate.diagnostics["rank"] = np.array([r.rank for r in results])
        estimate.diagnostics["likelihood_evaluations"] = np.array([r.likelihood_evaluations for r in results])
        if self.keep_particles:
            kept = np.empty(cells.size, dtype=object)
            kept[:] = results
            estimate.diagnostics["annealing"] = kept
        return estimate

    def along_path(self, X, template: Kernel, inducing=None, weights=None) -> ReweightedPath:
        """ln N(D) over the inputs X (n, d) (``weights`` (n,): the rows' weights, None: 1 each) with its gradient
        along a search path: tempered SMC at anchors, at the
        anchor plan of ``budget``, and their particles reweighted in between, on the full prior over the distinct
        inputs (:class:`bayesvm.normalization.path.NormalizationPath`) or, given ``inducing`` inputs, the low-rank one
        (:class:`bayesvm.normalization.low_rank.LowRankNormalizationPath`)."""
        X = as_float64(X)
        if inducing is None:
            return NormalizationPath(X, template, key=self.key, budget=self.budget, weights=weights)
        return LowRankNormalizationPath(X, as_float64(inducing), template, key=self.key, budget=self.budget,
                                        weights=weights)


@dataclass(frozen=True)
class AnnealedStandInNormalization:
    """ln E_theta[(mean_j nu(theta(x_j)))^n] over M stand-in inputs by tempered SMC (route "mean") at ``budget``'s
    fixed work: its moves per temperature and its temperature cap follow the exponent n, which sets how sharp the
    integrand is (:meth:`bayesvm.normalization.budget.EvidenceBudget.plan`); where the runs disagree, the spread of
    a single run is the standard error (:func:`bayesvm.normalization.budget.widened`)."""

    key: int = 0
    budget: EvidenceBudget = EvidenceBudget()

    def __call__(self, cells: Cells) -> Estimate:
        factor = prior_factor(cells.unit_prior)
        results = [widened(annealed_log_expectation(
            np.sqrt(cells.amplitude[b]) * factor, mean_route_log_likelihood, args=(cells.C[b], cells.n), key=self.key,
            warn=False, **self.budget.plan(cells.n, cells.n, float(cells.C[b]))))
            for b in range(cells.size)]
        return _from_annealing(results)


@dataclass(frozen=True)
class EPNormalization:
    """ln E_theta[prod_i nu(theta_i)] over the training inputs by EP (nu sites); deterministic."""

    log_z_tol: float = 1e-6
    tol: float = FULL_TOLERANCE

    def __call__(self, cells: Cells) -> Estimate:
        return _ep_estimate(cells, "nu", self.tol, self.log_z_tol)


@dataclass(frozen=True)
class PriorNormalization:
    """ln (1/S) sum_s (mean_j nu(theta_s(x_j)))^n from S prior draws at M stand-in inputs.

    theta_s = sqrt(k0) f_s + sqrt(k_b) b_s with f_s ~ N(0, base), b_s ~ N(0, 1):
    one factor of ``base`` and one set of standard normals serve every cell
    (common random numbers). Untrusted below ``_MIN_PRIOR_ESS`` effective draws.
    """

    n_samples: int = PRIOR_DRAWS
    key: int = 0

    def __call__(self, cells: Cells) -> Estimate:
        draws = draws_from_base(cells.base, n_samples=self.n_samples, random_state=self.key)
        estimate = jax.vmap(log_normalization_from_draws, in_axes=(None, 0, 0, 0, None))(
            draws, jnp.asarray(cells.amplitude), jnp.asarray(cells.offset_ratio * cells.amplitude),
            jnp.asarray(cells.C), cells.n,
        )
        ess = np.asarray(estimate.ess)
        return Estimate(np.asarray(estimate.value), np.asarray(estimate.se), ess >= _MIN_PRIOR_ESS,
                        {"ess": ess, "n_samples": np.full(cells.size, self.n_samples)})


@dataclass(frozen=True)
class NoNormalization:
    """ln N(D) = 0 exactly: the estimator of a normalised likelihood (the GP classifier's probit,
    Phi(theta) + Phi(-theta) = 1), whose ln Z is its whole evidence (theory: "The GP classifier: a normalised
    likelihood")."""

    def __call__(self, cells: Cells) -> Estimate:
        zeros = np.zeros(cells.size)
        return Estimate(zeros, zeros.copy(), np.ones(cells.size, bool), {})

    def along_path(self, X, template: Kernel, inducing=None, weights=None) -> "NormalizedPath":
        return NormalizedPath()


class NormalizedPath:
    """ln N(D) = 0 with gradient 0 at every point of a search path (:class:`NoNormalization`): no anchors, no work."""

    n_anchors = 0
    likelihood_evaluations = 0

    def estimate(self, x) -> PathEstimate:
        return PathEstimate(0.0, np.zeros(np.size(x)), 0.0, np.inf, False, True, True)

    def refine(self, x, tolerance: float, reference=None) -> PathEstimate:
        return self.estimate(x)


# ---------------------------------------------------------------------------
# the registry

NAIVE_ESTIMATORS: dict[str, type] = {"ep": EPNaive, "laplace": LaplaceNaive, "sampled": SampledNaive}
NORMALIZATION_ESTIMATORS: dict[str, type] = {
    "annealed": AnnealedNormalization,
    "ep": EPNormalization,
    "annealed-stand-in": AnnealedStandInNormalization,
    "prior": PriorNormalization,
}
#: the ln N(D) estimators whose integral runs over stand-in inputs (``cells.base`` their Gram, ``cells.n`` the exponent)
STAND_IN_ESTIMATORS = ("annealed-stand-in", "prior")


def _make(registry: dict, kind: str, name: str, options: dict):
    if name not in registry:
        raise ValueError(f"{kind} must be one of {tuple(registry)}; got {name!r}")
    cls = registry[name]
    accepted = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in options.items() if k in accepted})


def naive_estimator(name: str, **options) -> Callable[[Cells], Estimate]:
    """The ln Q(D) estimator called ``name`` (``"ep"``, ``"laplace"``, ``"sampled"``) with those of
    ``options`` it takes (``determinant``, ``key``, ``log_z_tol``, ``tol``, ``options``)."""
    return _make(NAIVE_ESTIMATORS, "approximation", name, options)


def path_estimators(approximation: str, normalization: str, **options):
    """The named estimators of ln Q(D) and ln N(D) for a search path: those with an ``along_path`` method (an exact
    gradient in the search coordinates); ``options`` as in :func:`naive_estimator` and
    :func:`normalization_estimator`."""
    estimators = (naive_estimator(approximation, **options), normalization_estimator(normalization, **options))
    for (kind, name, registry), estimator in zip((("approximation", approximation, NAIVE_ESTIMATORS),
                                                  ("normalization", normalization, NORMALIZATION_ESTIMATORS)),
                                                 estimators):
        if not hasattr(estimator, "along_path"):
            able = tuple(k for k, cls in registry.items() if hasattr(cls, "along_path"))
            raise ValueError(f"a search climbs the exact gradient of ln P(D); the {kind} {name!r} has none along a "
                             f"path. Use one of {able}, or a grid (method='grid')")
    return estimators


def normalization_estimator(name: str, **options) -> Callable[[Cells], Estimate]:
    """The ln N(D) estimator called ``name`` (``"annealed"``, ``"ep"``, ``"annealed-stand-in"``, ``"prior"``)
    with those of ``options`` it takes (``key``, ``n_samples``, ``log_z_tol``, ``tol``, ``options``)."""
    return _make(NORMALIZATION_ESTIMATORS, "normalization", name, options)
