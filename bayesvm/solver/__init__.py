"""The MAP SVM: the box-constrained dual solver, batched over hyperparameters, with an exact marginal set.

* :mod:`~bayesvm.solver.dual`: :func:`~bayesvm.solver.dual.fit_map` and the batched
  :func:`~bayesvm.solver.dual.solve_dual_boxes` the grid and the approximations call;
* ``_dual_ascent``: the solver's phases (coordinate ascent, projected gradient, polish).

Above it: the evidence (:mod:`bayesvm.evidence`) and the posterior (:mod:`bayesvm.posterior`).
"""
