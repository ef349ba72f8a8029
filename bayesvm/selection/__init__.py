"""Hyperparameter selection by the evidence, and its checks.

* :mod:`~bayesvm.selection.select`: :func:`~bayesvm.selection.select.select_hyperparameters`,
  the one entry point;
* the search: :mod:`~bayesvm.selection.search` (quasi-Newton ascent with exact gradients),
  :mod:`~bayesvm.selection.search_priors` (the full or low-rank prior it works on),
  :mod:`~bayesvm.selection.trust` (the checks at its answer);
* the grid: :mod:`~bayesvm.selection.grid` (axes and extension),
  :mod:`~bayesvm.selection.grid_selection` (the evaluation block by block),
  :mod:`~bayesvm.selection.grid_checks` (the checks at its argmax),
  :mod:`~bayesvm.selection.surface` (the result);
* :mod:`~bayesvm.selection.cross_validation`: the k-fold baseline on the same grid.

The search's coordinates (:class:`~bayesvm.hyperparameters.SearchSpace`) are in
:mod:`bayesvm.hyperparameters`, which the evidence's gradients share.
"""
