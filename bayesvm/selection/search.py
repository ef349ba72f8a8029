"""Evidence maximisation by quasi-Newton ascent with exact gradients.

The objective is ln P(D | x) = ln Q(D | x) - ln N(D | x) over the search
coordinates x = (ln C, ln k0, ln k_b/k0, ln shape) of
:mod:`bayesvm.hyperparameters` (ln l_1 .. ln l_d in place of ln shape for
per-feature length scales):

* ln Q(D) by expectation propagation, warm-started from the sites of the
  previous evaluation, with its exact gradient at the fixed point
  (:func:`bayesvm.inference.ep_gradient.ep_naive_evidences_and_gradient`; k
  one-vs-rest problems share one K(x));
* ln N(D) over the training inputs by reweighting tempered-SMC particles
  from the nearest anchor, with its exact gradient
  (:class:`bayesvm.normalization.path.NormalizationPath`).

Both come from the registry of :mod:`bayesvm.evidence.approximations` by
name ("ep" and "annealed", :func:`~bayesvm.evidence.approximations.path_estimators`),
on the full prior or a low-rank one (:mod:`bayesvm.selection.search_priors`).

L-BFGS-B (scipy) climbs ln P(D) / n from a few starts within box bounds
(:class:`bayesvm.hyperparameters.SearchSpace`); every start shares the one
compiled evaluation for this n. A point is infeasible where EP does not
converge with its loose loop nor with any of the slower loops tried after it
from cold sites, where the anchor's tempered-SMC runs still disagree at the
budget's cap, or where float64 does not resolve the prior; an infeasible
start is moved by a small screen (:func:`screen_candidates`) and the move
is reported in :attr:`SearchResult.messages`. :func:`bayesvm.selection.search_selection.select_by_search`
then checks the end points and may refine the path (:meth:`EvidenceAscent.refine`)
and climb again (theory: "Hyperparameter selection").
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

from .._precision import float64
from ..inference.ep import EP_LOOPS
from ..evidence.approximations import NoNormalization, NormalizedPath, naive_estimator, path_estimators
from ..inference.ep_gradient import EPSites
from ..exceptions import BayesvmWarning
from ..hyperparameters import SearchSpace, kernel_hyperparameters_at, pairwise_distances
from ..hyperparameters import feature_pairwise_distances
from ..kernels import Kernel, is_ard
from ..normalization.annealing import AnnealingResult
from ..normalization.budget import EvidenceBudget
from ..normalization.path import ReweightedPath
from .search_priors import FullPrior, InducingPrior

__all__ = [
    "SearchOptions",
    "SearchStep",
    "SearchResult",
    "maximize_evidence",
    "EvidenceAscent",
    "default_starts",
    "EP_RESOLUTION",
]

#: the objective's value (-ln P(D)) where it cannot be evaluated; finite, so L-BFGS-B's line search backs off
_INFEASIBLE = 1e10
#: how the message of a climb after a refinement of the path begins
_REFINED = "refined at"


@dataclass(frozen=True)
class SearchOptions:
    """Settings of the quasi-Newton search.

    max_iter: L-BFGS-B iterations per start; gtol: stop when every free
    coordinate's gradient is below this (nats per training point per unit
    log); ftol: L-BFGS-B's one-iteration test, stop when an iteration improves ln P(D) / n by less than this
    relative amount (default 0: only an iteration that gains nothing; one small step on a ridge ended climbs short
    of the maximum, which the ``stall`` test, over several iterations, does not: documentation: large data);
    stall: stop when the last ``stall`` iterations together raised ln P(D) by less than what
    the evidence resolves (:func:`resolution`, per problem; 0: never); ep_damping,
    ep_tol, ep_log_z_tol, ep_max_iter: EP's loop while searching (loose: the
    gradient is exact at the fixed point, and a warm start is close to it);
    ep_fallbacks: (damping, max_iter) pairs tried in turn, from cold sites, where
    that loop has not converged (a point where none converges is infeasible);
    max_screen: candidate points tried around a start that cannot be evaluated
    (:func:`screen_candidates`) before the start is skipped;
    refinements: how many times :func:`~bayesvm.selection.search_selection.select_by_search` may re-anchor the
    path where a fresh ln N(D) at an end point contradicts it, and climb again from there (0: never);
    budget: the fixed work of ln N(D) at each anchor of the path (:class:`~bayesvm.normalization.budget.EvidenceBudget`).
    """

    max_iter: int = 40
    gtol: float = 1e-4
    ftol: float = 0.0
    stall: int = 3
    ep_damping: float = 0.2
    ep_tol: float = 1e-3
    ep_log_z_tol: float = 1e-4
    ep_max_iter: int = 60
    ep_fallbacks: tuple[tuple[float, int], ...] = EP_LOOPS
    max_screen: int = 8
    refinements: int = 2
    budget: EvidenceBudget = EvidenceBudget()


@dataclass(frozen=True)
class SearchStep:
    """One evaluation of the objective: where, the values, and the work it took."""

    start: int
    x: np.ndarray
    log_evidence: float
    log_naive: float
    log_normalization: float
    log_normalization_se: float
    ess: float
    ep_sweeps: int
    factorizations: int
    anchored: bool
    seconds: float


@dataclass(frozen=True)
class SearchResult:
    """The record of a search.

    ends: each climb's best evaluation (one per start, then one per refinement of
    :func:`~bayesvm.selection.search_selection.select_by_search`);
    messages: L-BFGS-B's reason for stopping, per climb; steps: every evaluation in order (``start`` numbers the
    climb); n_anchors: tempered-SMC runs of the ln N(D) path; likelihood_evaluations: their work (each at most the
    budget's :meth:`~bayesvm.normalization.budget.EvidenceBudget.ceiling`); seconds: wall time of the climbs.
    """

    ends: tuple[SearchStep, ...]
    messages: tuple[str, ...]
    steps: tuple[SearchStep, ...]
    n_anchors: int
    likelihood_evaluations: int
    seconds: float
    template: Kernel

    def ranked(self) -> list[SearchStep]:
        """The starts' end points, best first."""
        return sorted(self.ends, key=lambda s: -s.log_evidence)

    def hyperparameters(self, step: SearchStep) -> tuple[float, Kernel]:
        """C and the kernel at an evaluated point."""
        return float(np.exp(step.x[0])), _concrete_kernel(self.template, step.x)

    @property
    def n_evaluations(self) -> int:
        return len(self.steps)

    @property
    def ep_sweeps(self) -> int:
        return int(sum(s.ep_sweeps for s in self.steps))

    @property
    def factorizations(self) -> int:
        return int(sum(s.factorizations for s in self.steps))

    @property
    def n_refinements(self) -> int:
        """Climbs after a refinement of the path (:meth:`EvidenceAscent.refine`)."""
        return sum(message.startswith(_REFINED) for message in self.messages)


class _Objective:
    """-ln P(D) and its gradient over the free coordinates, with warm EP sites carried between calls.

    naive: ln Q(D) of the k problems Y with the gradient of their sum (the registry's "ep" along a path);
    path: ln N(D) along the search (its "annealed" along a path).
    """

    def __init__(self, X, Y, space: SearchSpace, options: SearchOptions, naive, path: ReweightedPath,
                 progress, n_starts: int, n_rows: float):
        self.X, self.Y, self.space, self.options = X, Y, space, options
        self.n_rows = n_rows  # the rows the data stand for: their summed weight
        self.naive_gradient, self.path = naive, path
        self.sites: EPSites = self.cold_sites()
        self.steps: list[SearchStep] = []
        self.last = None
        self.start = 0
        self.progress, self.n_starts = progress, n_starts

    def report_progress(self, finished: bool = False) -> None:
        """progress(done, total) on a scale of max_iter evaluations per start (a start may end early); the climbs of
        a refinement after the starts are not counted."""
        if self.progress is None or self.start >= self.n_starts:
            return
        budget = self.options.max_iter
        in_start = budget if finished else min(sum(s.start == self.start for s in self.steps), budget - 1)
        self.progress(self.start * budget + in_start, self.n_starts * budget)

    def cold_sites(self) -> EPSites:
        """Zero sites for every problem, (k, n)."""
        return EPSites(*(np.zeros(self.Y.shape) for _ in range(2)))

    def full(self, x_free) -> np.ndarray:
        x = self.space.lower.copy()
        x[self.space.free] = x_free
        return x

    def naive(self, x: np.ndarray):
        """EP's ln Q(D) of the k problems at x: the loose loop from the warm sites, then each fallback, the problems
        it has not converged restarting from cold sites (the converged ones keep theirs); with the sweeps and
        factorisations of every attempt."""
        o = self.options
        sites, sweeps, factorizations = self.sites, 0, 0
        for damping, max_iter in [(o.ep_damping, o.ep_max_iter), *o.ep_fallbacks]:
            naive = self.naive_gradient(x, self.Y, sites, damping, max_iter)
            sweeps += int(np.sum(np.asarray(naive.n_iter)))
            factorizations += int(np.sum(np.asarray(naive.n_factorizations)))
            converged = np.asarray(naive.converged)
            if converged.all():
                break
            sites = EPSites(*(np.where(converged[:, None], s, 0.0) for s in naive.sites))
        return naive, sweeps, factorizations

    def __call__(self, x_free):
        x = self.full(x_free)
        if self.last is None or not np.array_equal(self.last[0], x):
            # L-BFGS-B evaluates its start again after the screen has: the last evaluation is kept
            self.last = (x, self.evaluate(x))
        return self.last[1]

    def evaluate(self, x: np.ndarray):
        started = time.perf_counter()
        naive, sweeps, factorizations = self.naive(x)
        feasible = bool(np.all(np.asarray(naive.converged)))
        log_naive = float(np.sum(np.asarray(naive.value)))
        # ln N(D) only where ln Q(D) is usable: an anchor far outside the useful region can cost seconds
        norm = self.path.estimate(x) if feasible else None
        # a path estimate resting on disagreeing SMC runs is biased low (the evidence high): not usable
        feasible = feasible and norm.resolved and norm.runs_agree and np.isfinite(norm.value)
        k = self.Y.shape[0]  # the problems share ln N(D), which depends on the inputs only
        self.steps.append(SearchStep(
            start=self.start, x=x, log_evidence=log_naive - k * norm.value if feasible else -np.inf,
            log_naive=log_naive, log_normalization=norm.value if norm else np.nan,
            log_normalization_se=norm.se if norm else np.nan, ess=norm.ess if norm else 0.0,
            ep_sweeps=sweeps, factorizations=factorizations + _path_factorizations(norm, self.path),
            anchored=bool(norm and norm.anchored), seconds=time.perf_counter() - started,
        ))
        self.report_progress()
        if not feasible:
            # outside what EP or float64 resolves: a large value sends the line search back
            return _INFEASIBLE, np.zeros(int(self.space.free.sum()))
        self.sites = naive.sites
        gradient = np.asarray(naive.gradient) - k * norm.gradient
        # per training point: gradients of order one, so L-BFGS-B's first (identity-Hessian) step stays local
        n = self.n_rows
        return -self.steps[-1].log_evidence / n, -gradient[self.space.free] / n


#: what the evidence of one problem resolves where it is EP's ln Z alone (the probit likelihood, no sampled ln N(D)):
#: well above the search's EP tolerances (1e-4 nats), well below any difference that matters for the choice
EP_RESOLUTION = 0.01


def resolution(n: int) -> float:
    """What the evidence of one problem over n points resolves, in nats: max(0.1, n / 3000) (an accuracy of 1 nat
    per 1,000 points, over three); the search stops once its last iterations gain less."""
    return max(0.1, n / 3000.0)


def _path_factorizations(norm, path) -> int:
    """The ln N(D) path's factorisations at one point: the reweighting's and its gradient pass, one more for a new
    anchor (none where the likelihood is normalised: :class:`~bayesvm.evidence.approximations.NormalizedPath`)."""
    if norm is None or isinstance(path, NormalizedPath):
        return 0
    return 3 if norm.anchored else 2


def default_starts(space: SearchSpace, X: np.ndarray, template: Kernel) -> np.ndarray:
    """Starting points: C = 1 with k0 = 10 and 100, k_b = k0, the shape at the data's scale and half of it.

    The shape starts at the median pairwise distance (length scales) or the
    middle of its bounds; per-feature length scales (ARD, d features) start
    at sqrt(d) times the median of each feature's own pairwise distances
    (:func:`feature_length_scale_starts`); fixed coordinates keep their value.
    """
    mid_shape = 0.5 * (space.lower[3:] + space.upper[3:])
    if is_ard(template):
        mid_shape = np.log(feature_length_scale_starts(X))
    elif template.shape_parameter == "length_scale":
        mid_shape = np.log(np.median(pairwise_distances(X, max_points=300)))
    shape = np.broadcast_to(mid_shape, space.lower[3:].shape)
    starts = np.array([np.concatenate([[0.0, np.log(10.0), 0.0], shape]),
                       np.concatenate([[0.0, np.log(100.0), 0.0], shape - np.log(2.0)])])
    return np.array([space.clip(np.where(space.free, s, space.lower)) for s in starts])


def feature_length_scale_starts(X: np.ndarray) -> np.ndarray:
    """Starting per-feature length scales: l_j = sqrt(d) median_j, median_j the median of feature j's own non-zero
    pairwise distances |x_j - x'_j| (1 for a constant feature).

    For features on one scale, sqrt(d) median_j is about the median distance
    |x - x'| over all d features, the isotropic start: the ARD search starts
    at (nearly) the isotropic search's start kernel with each feature
    rescaled to a common spread.
    """
    medians = [np.median(distances) if distances.size else 1.0
               for distances in feature_pairwise_distances(X, max_points=300)]
    return np.sqrt(X.shape[1]) * np.array(medians)


@float64
def maximize_evidence(
    X,
    y,
    template: Kernel,
    *,
    space: SearchSpace,
    starts: np.ndarray,
    options: SearchOptions = SearchOptions(),
    prior: FullPrior | InducingPrior = FullPrior(),
    random_state: int = 0,
    progress=None,
    weights=None,
    likelihood: str = "hinge",
) -> SearchResult:
    """Climb ln P(D) from each start with L-BFGS-B; return the best end point (module docstring).

    X, y: training inputs and labels in {-1, +1}, (n,), or (k, n) for k binary problems on the same inputs that
    share the hyperparameters (their summed evidence sum_c ln Q(D_c) - k ln N(D) is climbed, with one ln N(D)
    path); template: the kernel family;
    space: the bounds (fixed coordinates have equal bounds); starts: (k, 4)
    (or (k, 3 + d) with per-feature length scales) starting coordinates; prior: the full prior or a low-rank one
    (:mod:`bayesvm.selection.search_priors`); progress: called as ``progress(done, total)``
    after each evaluation, on a scale of ``options.max_iter`` evaluations per start; weights: (n,) the rows'
    weights (None: 1 each; theory: "Weights and repeated rows"); likelihood: ``"hinge"`` (the Bayesian SVM) or
    ``"probit"`` (the GP classifier: ln P(D) is EP's ln Z, with no ln N(D); hold ln C fixed, which it does not
    have).
    """
    return EvidenceAscent.from_starts(X, y, template, space=space, starts=starts, options=options, prior=prior,
                                      weights=weights, likelihood=likelihood,
                                      random_state=random_state, progress=progress).result()


class EvidenceAscent:
    """The search's state: the objective with its ln N(D) path (anchors), and one L-BFGS-B climb after another.

    :func:`maximize_evidence` climbs from each start; :func:`~bayesvm.selection.search_selection.select_by_search`
    may then :meth:`refine` the path at an end point where a fresh ln N(D) contradicted it, and climb again from
    there on the refined path.
    Mutable by design (it owns the path's anchors and the record of every evaluation).
    """

    @float64
    def __init__(self, X, y, template: Kernel, *, space: SearchSpace, options: SearchOptions = SearchOptions(),
                 prior: FullPrior | InducingPrior = FullPrior(), random_state: int = 0, progress=None,
                 n_starts: int = 1, weights=None, likelihood: str = "hinge"):
        started = time.perf_counter()
        self.space, self.options, self.template = space, options, template
        X = jnp.asarray(X, dtype=jnp.float64)
        Y = np.atleast_2d(np.asarray(y, dtype=np.float64))
        estimators = {"likelihood": likelihood, "tol": options.ep_tol, "log_z_tol": options.ep_log_z_tol,
                      "key": random_state, "budget": options.budget}
        # the probit likelihood is normalised: its evidence is EP's ln Z, with no ln N(D) path
        naive, normalization = (path_estimators("ep", "annealed", **estimators) if likelihood == "hinge"
                                else (naive_estimator("ep", **estimators), NoNormalization()))
        self.path = normalization.along_path(X, template, prior.inducing, weights)
        n_rows = X.shape[0] if weights is None else float(np.sum(weights))
        self.objective = _Objective(X, Y, space, options, naive.along_path(X, template, prior.inducing, weights),
                                    self.path, progress, n_starts, n_rows)
        # k problems sum k evidences, each resolved to about the target standard error (EP alone: its own)
        self.resolution = Y.shape[0] * (resolution(n_rows) if likelihood == "hinge" else EP_RESOLUTION)
        self.messages: list[str] = []
        self.seconds = time.perf_counter() - started  # wall time of the ascent's own work

    @classmethod
    def from_starts(cls, X, y, template: Kernel, *, space: SearchSpace, starts: np.ndarray,
                    options: SearchOptions = SearchOptions(), prior: FullPrior | InducingPrior = FullPrior(),
                    random_state: int = 0, progress=None, weights=None, likelihood: str = "hinge") -> "EvidenceAscent":
        """An ascent that has climbed from each of ``starts`` (:func:`maximize_evidence`'s arguments)."""
        starts = np.atleast_2d(starts)
        ascent = cls(X, y, template, space=space, options=options, prior=prior, random_state=random_state,
                     progress=progress, n_starts=len(starts), weights=weights, likelihood=likelihood)
        for start in starts:
            ascent.climb(start)
        return ascent

    @float64
    def climb(self, start, note: str = "") -> None:
        """One L-BFGS-B climb from ``start`` (moved by the screen where it cannot be evaluated); its reason for
        stopping, after ``note``, is the climb's message."""
        started = time.perf_counter()
        objective, space, options = self.objective, self.space, self.options
        objective.start = len(self.messages)
        objective.sites, objective.last = objective.cold_sites(), None  # nothing carried over from the last climb
        free = space.free
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BayesvmWarning)  # the climb's messages summarise what failed
            x0, moved = _feasible_start(objective, space, start, options.max_screen)
            if x0 is None:
                message = (f"skipped: the evidence could not be evaluated at the start or at {moved} candidates "
                           "around it")
            elif not np.any(free):
                message = "all coordinates fixed"
            else:
                stall = _Stall(objective.n_rows, self.resolution, options.stall)
                result = minimize(
                    objective, x0[free], jac=True, method="L-BFGS-B", callback=stall,
                    bounds=list(zip(space.lower[free], space.upper[free])),
                    options={"maxiter": options.max_iter, "gtol": options.gtol, "ftol": options.ftol},
                )
                moved_note = f"start moved to {_describe(x0)} (infeasible at {_describe(space.clip(start))}); " if moved else ""
                message = moved_note + (stall.message if stall.stopped else str(result.message))
        self.messages.append(note + message)
        objective.report_progress(finished=True)
        self.seconds += time.perf_counter() - started

    def refine(self, x: np.ndarray, tolerance: float, reference: AnnealingResult | None = None) -> None:
        """Re-anchor the path at x (:meth:`~bayesvm.normalization.path.ReweightedPath.refine`, which drops the anchors
        it contradicts by more than ``tolerance`` nats) and climb again from x (theory: "Hyperparameter selection").

        The new anchor at x is the fresh check's own tempered SMC there, ``reference`` (its result with its
        particles as theta, :func:`bayesvm.selection.trust.check_point`'s; the full prior), its particles moved
        with the check's moves per temperature
        (:meth:`~bayesvm.normalization.path.FullPathPrior.anchored`): the path's value at x is
        then the check's, with no second estimate of the same size. Otherwise (the low-rank prior) tempered SMC
        runs again at x at the budget's full plan. From here on the path's anchors take the full plan's slice moves
        per temperature: runs with too few moves agree while missing the same mass, which is what misled the path.
        """
        started = time.perf_counter()
        self.path.refine(x, tolerance, reference)
        self.seconds += time.perf_counter() - started
        self.climb(x, note=f"{_REFINED} {_describe(x)}: ")

    def result(self) -> SearchResult:
        steps = self.objective.steps
        ends = [climb_end([s for s in steps if s.start == i], self.resolution) for i in range(len(self.messages))]
        return SearchResult(ends=tuple(ends), messages=tuple(self.messages), steps=tuple(steps),
                            n_anchors=self.path.n_anchors,
                            likelihood_evaluations=self.path.likelihood_evaluations,
                            seconds=self.seconds,
                            template=self.template)


def climb_end(steps: list[SearchStep], resolution: float) -> SearchStep:
    """A climb's end point: its best evaluation, or its first (the point it started from) where the climb raised
    ln P(D) by no more than ``resolution`` nats, a gain the evidence does not resolve (as the stall rule of
    :class:`_Stall`). After a refinement the climb starts at a point whose fresh evidence is already known, so a
    climb that gains nothing resolvable needs no second fresh estimate."""
    best = max(steps, key=lambda s: s.log_evidence)
    return steps[0] if best.log_evidence - steps[0].log_evidence <= resolution else best


class _Stall:
    """L-BFGS-B's callback: stops a start once its last ``iterations`` iterations together raised ln P(D) by less
    than ``resolution`` nats (the objective is -ln P(D) / n). One iteration's gain (L-BFGS-B's ftol) cannot tell a
    search creeping along a flat ridge from one climbing a long, gentle slope; a few iterations' can."""

    def __init__(self, n: int, resolution: float, iterations: int):
        self.n, self.resolution, self.iterations = n, resolution, iterations
        self.values: list[float] = []
        self.stopped = False

    def __call__(self, intermediate_result) -> None:
        self.values.append(float(intermediate_result.fun))
        m = self.iterations
        if m and len(self.values) > m and (self.values[-m - 1] - self.values[-1]) * self.n < self.resolution:
            self.stopped = True
            raise StopIteration

    @property
    def message(self) -> str:
        return (f"STALLED: the last {self.iterations} iterations raised ln P(D) by less than "
                f"{self.resolution:.2g} nats, what the evidence resolves")


#: the screen's moves away from an infeasible start, in order, in (ln C, ln k0, ln k_b/k0, ln shape): a smaller
#: amplitude, a longer shape, a larger C and a smaller offset lead out of the regions where EP does not converge
#: or tempered SMC's runs disagree (theory: "Numerical limits"); with per-feature length scales the shape move
#: applies to every one of them
_SCREEN_MOVES = np.log([
    [1.0, 0.1, 1.0, 1.0], [1.0, 1.0, 1.0, 2.0], [1.0, 0.1, 1.0, 2.0], [3.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 0.1, 1.0], [1.0, 0.01, 1.0, 1.0], [3.0, 0.1, 1.0, 2.0], [1.0, 1.0, 1.0, 0.5],
])


def screen_candidates(space: SearchSpace, start, max_candidates: int) -> list[np.ndarray]:
    """Points to try, in order, where ``start`` cannot be evaluated: ``_SCREEN_MOVES`` from it, within the box,
    fixed coordinates kept, without repeats (at most ``max_candidates``)."""
    start = space.clip(start)
    candidates: list[np.ndarray] = []
    shape_moves = np.repeat(_SCREEN_MOVES[:, 3:], start.size - 3, axis=1)
    for move in np.concatenate([_SCREEN_MOVES[:, :3], shape_moves], axis=1):
        candidate = space.clip(np.where(space.free, start + move, start))
        if not any(np.allclose(candidate, c) for c in [start, *candidates]):
            candidates.append(candidate)
    return candidates[:max_candidates]


def _feasible_start(objective: _Objective, space: SearchSpace, start, max_screen: int):
    """The start, or the first screen candidate where the evidence can be evaluated (None if none);
    with the number of candidates tried beyond the start."""
    free = space.free
    for tried, x in enumerate([space.clip(start), *screen_candidates(space, start, max_screen)]):
        objective.sites = objective.cold_sites()
        value, _ = objective(x[free])
        if value < _INFEASIBLE:
            return x, tried
    return None, tried


def _describe(x: np.ndarray) -> str:
    """Search coordinates as values: C, k0, k_b/k0, shape (or the per-feature length scales)."""
    shape = ", ".join(f"{v:.3g}" for v in np.exp(x[3:]))
    label = "shape" if x.size == 4 else "length scales"
    return "(C {:.3g}, k0 {:.3g}, k_b/k0 {:.3g}, ".format(*np.exp(x[:3])) + f"{label} {shape})"


def _concrete_kernel(template: Kernel, x: np.ndarray) -> Kernel:
    return template.replace(**kernel_hyperparameters_at(template, x))
