"""The two forms of the GP prior the evidence search works on: the full n x n Gram matrix, or a low-rank prior.

* :class:`FullPrior`: every evaluation factorises the n x n prior (O(n^3)
  time, O(n^2) memory; :mod:`bayesvm.inference.ep_gradient`, :mod:`bayesvm.normalization.path`).
* :class:`InducingPrior`: the FITC prior through m inducing inputs
  (:mod:`bayesvm.low_rank`): O(n m^2) time and O(n m) memory for EP's
  ln Q(D) (:mod:`bayesvm.inference.ep_low_rank`) and the tempered-SMC ln N(D)
  (:mod:`bayesvm.normalization.low_rank`), with the same exact gradients
  (theory: "Large data: a low-rank prior").

Each gives the search's estimators (:func:`bayesvm.evidence.approximations.path_estimators`)
its ``inducing`` inputs (None for the full prior) and the keyword arguments
that make :func:`bayesvm.log_evidence` compute the reference evidence on the
same prior. :func:`prior_for` turns the user's ``inducing`` setting into one of
them; ``"auto"`` switches to the low-rank prior above
:data:`AUTO_INDUCING_ABOVE` training points.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from .._validation import check_inputs
from .._warnings import warn_user
from ..exceptions import LowRankWarning
from ..low_rank import inducing_inputs

__all__ = ["FullPrior", "InducingPrior", "prior_for", "AUTO_INDUCING_ABOVE", "DEFAULT_INDUCING"]

#: with ``inducing="auto"``, the low-rank prior is used above this many training points. 2000: from there on the
#: low-rank posterior is faster at the same held-out NLL, and each n x n float64 matrix takes 32 MB (documentation:
#: large data)
AUTO_INDUCING_ABOVE = 2000
#: the number of inducing inputs ``"auto"`` chooses
DEFAULT_INDUCING = 200


@dataclass(frozen=True)
class FullPrior:
    """The exact prior: K(x) over all n training inputs."""

    @property
    def inducing(self) -> None:
        return None

    @property
    def evidence_options(self) -> dict:
        return {}

    @property
    def n_inducing(self) -> None:
        return None


@dataclass(frozen=True, eq=False)
class InducingPrior:
    """The FITC low-rank prior through the inducing inputs ``inducing`` (m, d), held fixed during the search."""

    inducing: np.ndarray

    @property
    def evidence_options(self) -> dict:
        return {"inducing": self.inducing}

    @property
    def n_inducing(self) -> int:
        return int(self.inducing.shape[0])


def prior_for(X: np.ndarray, inducing="auto", *, random_state=0, weights=None) -> FullPrior | InducingPrior:
    """The prior the search should use for the training inputs X (n, d), rows of ``weights`` (n,) (None: 1 each).

    ``inducing``: None (the full prior), ``"auto"`` (the full prior up to
    :data:`AUTO_INDUCING_ABOVE` points, above that :data:`DEFAULT_INDUCING`
    k-means inducing inputs, with a :class:`~bayesvm.LowRankWarning`), a number m of
    inducing inputs (k-means centres of the weighted rows, :func:`bayesvm.low_rank.inducing_inputs`)
    or an (m, d) array of them.
    """
    n = X.shape[0]
    if inducing is None:
        return FullPrior()
    if isinstance(inducing, str):
        if inducing != "auto":
            raise ValueError(f"inducing must be None, 'auto', a positive integer or an (m, d) array; got {inducing!r}")
        if n <= AUTO_INDUCING_ABOVE:
            return FullPrior()
        m = DEFAULT_INDUCING
        warn_user(
            f"{n} training points: the evidence and the posterior use a low-rank prior through {m} k-means inducing "
            f"inputs (automatic above {AUTO_INDUCING_ABOVE} points); pass inducing=None (BayesianSVC: n_inducing=None) "
            "for the full prior, or a number of inducing inputs",
            LowRankWarning,
        )
        return InducingPrior(inducing_inputs(X, m, random_state=random_state, sample_weight=weights))
    if isinstance(inducing, (int, np.integer)) and not isinstance(inducing, bool):
        return InducingPrior(inducing_inputs(X, int(inducing), random_state=random_state,
                                             sample_weight=weights))
    if isinstance(inducing, (np.ndarray, jax.Array, list, tuple)):
        return InducingPrior(check_inputs(inducing, name="inducing", n_features=X.shape[1]))
    raise ValueError(f"inducing must be None, 'auto', a positive integer or an (m, d) array; got {inducing!r}")

