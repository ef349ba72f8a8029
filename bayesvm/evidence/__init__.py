"""ln Q(D), the naive evidence, and the evidence ln P(D) = ln Q(D) - ln N(D) at one point.

* :mod:`~bayesvm.evidence.laplace`: Sollich's Laplace-style form around the MAP SVM;
* :mod:`~bayesvm.evidence.ep` and its parts: :mod:`~bayesvm.evidence.ep_loop` (the damped
  parallel loop and the site families), :mod:`~bayesvm.evidence.tilted` (the tilted
  moments of one site), :mod:`~bayesvm.evidence.ep_posterior` (the Gaussian posterior and
  predictions), :mod:`~bayesvm.evidence.ep_gradient` (ln Q(D) with its exact gradient for the
  search), :mod:`~bayesvm.evidence.ep_low_rank` (EP over a low-rank prior);
* :mod:`~bayesvm.evidence.approximations`: the registry that turns an estimator's name
  ("ep", "laplace", "sampled"; "annealed", "ep", "prior" for ln N(D)) into an estimate;
* :mod:`~bayesvm.evidence.log_evidence`: :func:`~bayesvm.evidence.log_evidence.log_evidence`,
  the public entry point, and its :class:`~bayesvm.evidence.log_evidence.Evidence`.

ln N(D) lives in :mod:`bayesvm.normalization`.
"""
