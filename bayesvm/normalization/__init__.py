"""ln N(D), the normalisation factor of the SVM's likelihood, and the samplers behind it.

* :mod:`~bayesvm.normalization.smc`: the tempered sequential Monte Carlo core;
* :mod:`~bayesvm.normalization.annealing`: annealed estimates of Gaussian-process integrals
  (ln N(D), and ln Q(D) as the sampled reference);
* :mod:`~bayesvm.normalization.budget`: the fixed work of every ln N(D) estimate
  (:class:`~bayesvm.normalization.budget.EvidenceBudget`), the prior's low-rank basis and the budgeted estimate
  over the distinct inputs;
* :mod:`~bayesvm.normalization.draws`: plain prior sampling and the stand-in inputs;
* :mod:`~bayesvm.normalization.ep_started`: tempered SMC started from EP's Gaussian (the check's second route);
* :mod:`~bayesvm.normalization.path`: ln N(D) and its gradient along a search path, by
  reweighting tempered-SMC particles;
* :mod:`~bayesvm.normalization.low_rank`: the same under a low-rank prior;
* :mod:`~bayesvm.normalization.agreement`: when two estimates agree within their errors, and when one lies clearly
  above another.
"""
