"""Gaussian approximations of the SVM's posterior over the latents: expectation propagation and Sollich's Laplace form.

Both the naive evidence ln Q(D) (:mod:`bayesvm.evidence`) and the normalisation factor ln N(D)
(:mod:`bayesvm.normalization`) integrate a Gaussian prior against a product of site functions (the hinge
likelihoods, or nu); this layer computes those Gaussian approximations, below both:

* :mod:`~bayesvm.inference.laplace`: Sollich's Laplace-style form around the MAP SVM;
* :mod:`~bayesvm.inference.ep` and its parts: :mod:`~bayesvm.inference.ep_loop` (the damped parallel loop and
  the site families), :mod:`~bayesvm.inference.tilted` (the tilted moments of one site),
  :mod:`~bayesvm.inference.ep_posterior` (the Gaussian posterior and predictions),
  :mod:`~bayesvm.inference.ep_gradient` (ln Q(D) with its exact gradient for the search),
  :mod:`~bayesvm.inference.ep_low_rank` (EP over a low-rank prior).
"""
