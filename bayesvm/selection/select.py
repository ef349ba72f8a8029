"""Hyperparameter selection: the one entry point (theory: "Hyperparameter selection").

``method="search"`` (the default) maximises the evidence ln P(D) by
quasi-Newton ascent with exact gradients (:mod:`bayesvm.selection.search`);
``method="grid"`` evaluates it on a grid, for surfaces and heat maps
(:mod:`bayesvm.selection.grid_selection`, checked by :mod:`bayesvm.selection.grid_checks`);
``method="cv"`` minimises the k-fold error rate on the same grid
(:mod:`bayesvm.selection.cross_validation`), the baseline the evidence replaces.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .._precision import float64
from .._validation import TrainingData, collapsed_training_data
from ..evidence.approximations import NAIVE_ESTIMATORS
from .cross_validation import select_by_cv
from .grid import kernel_template, resolve_grid
from .grid_checks import GridChecks
from .grid_selection import GridOptions, GridProblem, select_on_grid
from ..hyperparameters import SearchSpace
from ..kernels import Kernel, is_ard
from ..inference.ep import LIKELIHOODS
from ..inference.laplace import DETERMINANTS
from ..normalization.draws import GRID_PRIOR_DRAWS, GRID_STAND_IN_INPUTS, normalization_inputs
from ..normalization.budget import EvidenceBudget
from .search import SearchOptions, default_starts
from .probit import ProbitSelection, select_probit
from .search_selection import SearchSelection, select_by_search
from .search_priors import prior_for
from .surface import EvidenceSurface

__all__ = ["METHODS", "GRID_NORMALIZATIONS", "GridEstimators", "GridOptions", "select_hyperparameters", "select_for"]

METHODS = ("search", "grid", "cv")
#: the ln N(D) estimators the grid can use on every cell
GRID_NORMALIZATIONS = ("annealed", "ep", "prior")


@dataclass(frozen=True)
class GridEstimators:
    """The estimators of the grid's evidence surface (:mod:`bayesvm.evidence.approximations`).

    approximation, determinant: ln Q(D) (``"ep"``, ``"laplace"`` with its
    determinant, or ``"sampled"``, point by point: slow, a check);
    normalization: ln N(D) (``"annealed"``: tempered SMC over the training
    inputs with a screening budget; ``"ep"``: faster on small problems, but
    tens of nats low where the latents are strongly correlated, which the
    checks correct at the argmax only; ``"prior"``: plain sampling over
    stand-in inputs, biased low at realistic n, with ``inputs_from``,
    ``n_samples`` and ``max_inputs``: by default fewer per cell than one point's,
    :data:`~bayesvm.normalization.draws.GRID_PRIOR_DRAWS` and
    :data:`~bayesvm.normalization.draws.GRID_STAND_IN_INPUTS`).
    """

    approximation: str = "ep"
    determinant: str = "regularized"
    normalization: str = "annealed"
    inputs_from: object = "training"
    n_samples: int = GRID_PRIOR_DRAWS
    max_inputs: int = GRID_STAND_IN_INPUTS

    def __post_init__(self):
        if self.approximation not in NAIVE_ESTIMATORS:
            raise ValueError(f"approximation must be one of {tuple(NAIVE_ESTIMATORS)}; got {self.approximation!r}")
        if self.determinant not in DETERMINANTS:
            raise ValueError(f"determinant must be one of {DETERMINANTS}; got {self.determinant!r}")
        if self.normalization not in GRID_NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {GRID_NORMALIZATIONS}; got {self.normalization!r}")


@float64
def select_hyperparameters(
    X,
    y,
    *,
    kernel="rbf",
    method: str = "search",
    grid=None,
    estimators: GridEstimators = GridEstimators(),
    options: GridOptions = GridOptions(),
    cv: int = 5,
    inducing="auto",
    random_state: int = 0,
    progress: Callable[[int, int], None] | None = None,
    evidence_budget: float = 1.0,
    sample_weight=None,
    likelihood: str = "hinge",
) -> SearchSelection | EvidenceSurface | ProbitSelection:
    """Choose C, the amplitude k0, the kernel's shape and the offset k_b.

    Parameters
    ----------
    X, y : training inputs and labels: two classes, or with ``method="search"`` k >= 3 classes, read as k
        one-vs-rest problems whose shared hyperparameters maximise the summed evidence (theory: "More than
        two classes"). Rows with equal input and label are one row of their summed weight (exact: theory,
        "Weights and repeated rows"), so the work grows with the distinct rows.
    kernel : family name (``"rbf"``, ``"exponential"``, ``"polynomial"``,
        ``"linear"``) or a kernel whose static settings (e.g. polynomial
        degree) are kept; its continuous hyperparameters are selected. An
        RBF or exponential kernel with an array ``length_scale`` of one entry
        per feature (e.g. ``RBF(length_scale=np.ones(d))``) selects one length
        scale per feature (ARD; ``method="search"`` only).
    method : ``"search"`` (default: maximise ln P(D) by quasi-Newton ascent
        with exact gradients; returns a :class:`~bayesvm.selection.search_selection.SearchSelection`),
        ``"grid"`` (maximise ln P(D) over the grid; returns an
        :class:`~bayesvm.selection.surface.EvidenceSurface`, for surfaces and heat maps)
        or ``"cv"`` (minimise the stratified ``cv``-fold error rate over
        (shape, offset ratio, C k0)).
    grid : None (:func:`bayesvm.selection.grid.default_grid`), a :class:`~bayesvm.selection.grid.Grid`,
        or a mapping overriding some default axes: ``"C"``, ``"C_k0"``,
        ``"offset_ratio"`` and the shape parameter (``"length_scale"``/``"gamma"``
        or ``"shape"``). A single-valued axis is held fixed; with
        ``method="search"`` every entry must be a single value.
    estimators : the grid's estimators of ln Q(D) and ln N(D) (:class:`GridEstimators`).
    options : the grid's refinement, edge handling and check budget (:class:`~bayesvm.selection.grid_selection.GridOptions`).
    cv : folds of ``method="cv"``.
    inducing : ``method="search"`` only: the prior the evidence is computed on
        (:func:`bayesvm.selection.search_priors.prior_for`): ``"auto"`` (default: the full
        n x n prior up to 2000 training points, a low-rank prior through 200
        k-means inducing inputs above), None (always the full prior), a number
        of inducing inputs, or an (m, d) array of them.
    random_state : seed of the samplers and the CV folds.
    progress : called as ``progress(done, total)`` as the work proceeds.
    evidence_budget : ``method="search"``: a positive number scaling ln N(D)'s fixed work in the search and the
        check at the answer (:class:`bayesvm.normalization.budget.EvidenceBudget`; 1 is the default).
    sample_weight : (n_samples,) non-negative weights, each row's likelihood term to that power (a row of weight 2
        is the row twice; 0: left out). ``method="grid"`` and ``"cv"`` take whole-number weights (they repeat rows).
    likelihood : ``"hinge"`` (default: the Bayesian SVM, Sollich's normalised hinge likelihood) or ``"probit"``
        (the GP classifier, Phi(y theta): no C, and no ln N(D), its likelihood being normalised). ``"probit"`` takes
        ``method="search"`` on the full prior, ``grid`` a mapping fixing ``"amplitude"``, ``"offset_ratio"`` or the
        shape parameter, and returns a :class:`~bayesvm.selection.probit.ProbitSelection`
        (:func:`bayesvm.selection.probit.select_probit`; theory: "The GP classifier: a normalised likelihood").
    """
    data, _ = collapsed_training_data(X, y, sample_weight)
    return select_for(data, kernel_template(kernel), method=method, grid=grid, estimators=estimators,
                      options=options, cv=cv, inducing=inducing, random_state=random_state, progress=progress,
                      budget=EvidenceBudget(evidence_budget), likelihood=likelihood)


def select_for(data: TrainingData, template: Kernel, *, method: str = "search", grid=None,
               estimators: GridEstimators = GridEstimators(), options: GridOptions = GridOptions(), cv: int = 5,
               inducing="auto", random_state: int = 0,
               progress: Callable[[int, int], None] | None = None,
               budget: EvidenceBudget = EvidenceBudget(),
               likelihood: str = "hinge") -> SearchSelection | EvidenceSurface | ProbitSelection:
    """:func:`select_hyperparameters` on validated, collapsed training data
    (:func:`bayesvm._validation.collapsed_training_data`) within the kernel family ``template``: what the estimator
    calls, so that its inputs are validated once, by it."""
    X, classes = data.X, data.classes
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}; got {likelihood!r}")
    if likelihood == "probit":
        if method != "search":
            raise ValueError(f"the probit GP's hyperparameters are selected by method='search'; got {method!r}")
        if inducing not in (None, "auto"):
            raise ValueError("the probit GP's evidence is computed on the full prior: leave inducing None or 'auto'")
        if grid is not None and not isinstance(grid, Mapping):
            raise ValueError("with likelihood='probit', grid must be a mapping of hyperparameter -> one value (to fix "
                             "it)")
        return select_probit(data, template, fixed=grid, progress=progress)
    if is_ard(template) and method != "search":
        raise ValueError(f"per-feature length scales (an array length_scale) are selected by method='search' only; "
                         f"got method={method!r}. Use method='search', or a scalar length_scale for the grid")
    if not isinstance(estimators, GridEstimators):
        raise ValueError(f"estimators must be a GridEstimators; got {type(estimators).__name__}")
    if not isinstance(options, GridOptions):
        raise ValueError(f"options must be a GridOptions; got {type(options).__name__}")
    if method == "search":
        space = _search_space(X, template, grid)
        prior = prior_for(X, inducing, random_state=random_state, weights=data.weights)
        return select_by_search(data, template, space=space, starts=default_starts(space, X, template), prior=prior,
                                options=SearchOptions(budget=budget), random_state=random_state, progress=progress)
    if inducing not in (None, "auto"):
        raise ValueError(f"inducing inputs are used by method='search' only; got method={method!r}")
    if classes.size > 2:
        raise ValueError(f"method={method!r} takes two classes; y has {classes.size}. method='search' takes k "
                         "classes (one-vs-rest problems with shared hyperparameters)")
    X, y_pm = _repeated_rows(data)
    grid = resolve_grid(grid, X, template)
    problem = GridProblem(
        X=X, y=jnp.asarray(y_pm), template=template, approximation=estimators.approximation,
        normalization=estimators.normalization,
        checks=GridChecks(estimators.approximation, estimators.normalization, options.max_checks, random_state),
        inputs=normalization_inputs(X, estimators.inputs_from, max_inputs=estimators.max_inputs,
                                    random_state=random_state),
        random_state=random_state, determinant=estimators.determinant, n_samples=estimators.n_samples,
    )
    if method == "cv":
        return select_by_cv(problem, grid, classes, cv, random_state, progress)
    return select_on_grid(problem, grid, classes, options, progress)


def _repeated_rows(data: TrainingData) -> tuple[np.ndarray, np.ndarray]:
    """The grid's and CV's inputs and -1/+1 labels: each row repeated as many times as its weight says (their
    estimators and folds take rows, not weights); a weight that is not a whole number is an error."""
    if data.weights is None:
        return data.X, data.Y[0]
    counts = np.rint(data.weights)
    if not np.allclose(data.weights, counts, rtol=0.0, atol=1e-9):
        raise ValueError("method='grid' and method='cv' take whole-number sample weights (a weight of k is the row "
                         "k times); use method='search' for other weights")
    counts = counts.astype(np.int64)
    return np.repeat(data.X, counts, axis=0), np.repeat(data.Y[0], counts)


def _search_space(X, template: Kernel, grid) -> SearchSpace:
    """The search's bounds, with the hyperparameters that ``grid`` pins to one value held fixed."""
    space = SearchSpace.default(X, template)
    if grid is None:
        return space
    if not isinstance(grid, Mapping):
        raise ValueError("with method='search', grid must be a mapping of hyperparameter -> one value (to fix it)")
    shape_name = template.shape_parameter
    if is_ard(template) and shape_name in grid:
        raise ValueError("per-feature length scales cannot be fixed through grid: the search selects all of them. "
                         "Use a scalar length_scale to fix one length scale for every feature")
    accepted = {"C", "C_k0", "offset_ratio"} | ({shape_name} if shape_name else set())
    unknown = set(grid) - accepted
    if unknown:
        raise ValueError(f"unknown hyperparameters {sorted(unknown)} for the {template.name} kernel; accepted: "
                         f"{sorted(accepted)}")
    values = {}
    for name, value in grid.items():
        value = np.atleast_1d(np.asarray(value, dtype=np.float64))
        if value.size != 1 or not np.isfinite(value[0]) or value[0] <= 0:
            raise ValueError(f"with method='search', grid[{name!r}] must be one positive value (it fixes "
                             f"{name}); got {value.tolist()}. Use method='grid' to evaluate a grid")
        values[name] = float(value[0])
    if "C_k0" in values and "C" not in values:
        raise ValueError("C_k0 can only be fixed together with C")
    if "C" in values:
        space = space.fix(0, np.log(values["C"]))
    if "C_k0" in values:
        space = space.fix(1, np.log(values["C_k0"] / values["C"]))
    if "offset_ratio" in values:
        space = space.fix(2, np.log(values["offset_ratio"]))
    if shape_name in values:
        space = space.fix(3, np.log(values[shape_name]))
    return space
