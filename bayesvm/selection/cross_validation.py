"""Hyperparameter selection by stratified k-fold cross-validation on the grid (the baseline the evidence replaces).

The MAP solution depends on C and k0 only through C k0, so the error rate is
a function of (shape, offset ratio, C k0): cross-validation cannot separate C
from the amplitude, and its surface has a single C value. The error rate is
piecewise constant, so there is no refinement or extension.
"""

from __future__ import annotations

import itertools

import numpy as np
from sklearn.model_selection import StratifiedKFold

from .._warnings import warn_user
from .grid import Grid, GridEdgeWarning, edge_axes, grid_argument
from .grid_selection import GridProblem, argmax, hyperparameters
from ..solver.dual import solve_dual_boxes
from .surface import EvidenceSurface

__all__ = ["select_by_cv"]


def cv_errors(problem: GridProblem, grid: Grid, folds, progress=None) -> np.ndarray:
    """Stratified k-fold misclassification rate over (shape, offset ratio, C k0): one batched solve per fold."""
    errors = np.zeros(grid.shape_of_surface[:3])
    y = np.asarray(problem.y)
    tasks = list(itertools.product(enumerate(grid.shape), enumerate(grid.offset_ratio), folds))
    for done, ((i, shape), (j, ratio), (train, test)) in enumerate(tasks, start=1):
        Kt = problem.base(float(shape)) + ratio
        K_train = Kt[np.ix_(train, train)]
        batch = solve_dual_boxes(K_train, y[train], grid.C_k0)
        theta = np.asarray(Kt[np.ix_(test, train)] @ (batch.alpha * y[train]).T)  # (n_test, nP)
        errors[i, j] += np.sum(np.where(theta >= 0, 1.0, -1.0) != y[test][:, None], axis=0)
        if progress is not None:
            progress(done, len(tasks))
    return errors / problem.n


def select_by_cv(problem: GridProblem, grid: Grid, classes, cv: int, random_state, progress=None) -> EvidenceSurface:
    """The (shape, offset ratio, C k0) with the lowest ``cv``-fold error rate (C held at 1)."""
    grid = grid.replace(C=np.array([1.0]))
    splitter = StratifiedKFold(n_splits=cv, shuffle=True, random_state=random_state)
    folds = list(splitter.split(problem.X, np.asarray(problem.y)))
    error = cv_errors(problem, grid, folds, progress)
    index = (*argmax(-error), 0)
    at_edge = tuple(name for name, _ in edge_axes(index, grid))
    if at_edge:
        warn_user(f"the cross-validation optimum is on the grid edge along {', '.join(at_edge)}; widen those axes "
                  f"({grid_argument(at_edge)})", GridEdgeWarning)
    point = grid.point(index)
    return EvidenceSurface(
        method="cv", kernel_name=problem.template.name, shape_name=problem.template.shape_parameter, grid=grid,
        index=index, best=hyperparameters(problem.template, point), best_value=-float(error[index[:3]]),
        best_se=float("nan"), best_kernel=problem.kernel(point), cv_error=error[..., None], at_edge=at_edge,
    )
