"""The evidence ln P(D) = ln Q(D) - ln N(D) at one point, and the estimators of its two terms by name.

* :mod:`~bayesvm.evidence.approximations`: the registry that turns an estimator's name ("ep", "laplace",
  "sampled" for ln Q(D); "annealed", "ep", "annealed-stand-in", "prior" for ln N(D)) into an estimate;
* :mod:`~bayesvm.evidence.log_evidence`: :func:`~bayesvm.evidence.log_evidence.log_evidence`, the public entry
  point, and its :class:`~bayesvm.evidence.log_evidence.Evidence`.

The Gaussian approximations behind ln Q(D) live in :mod:`bayesvm.inference`, ln N(D)'s samplers in
:mod:`bayesvm.normalization`; this package sits above both, and above :mod:`bayesvm.posterior`.
"""
