"""The evidence of the GP classifier: the probit likelihood in bayesvm's framework.

The GP classifier has the Bayesian SVM's prior, theta ~ GP(0, K) with the same kernels, and the probit likelihood
P(y | theta) = Phi(y theta). That likelihood is normalised (Phi(theta) + Phi(-theta) = 1 at every theta: every
input receives a label), so its evidence is the integral of prior times likelihood alone,

    ln P(D) = ln INT N(theta; 0, K) prod_i Phi(y_i theta_i)^{w_i} dtheta,

with no normalisation factor N(D) to estimate (theory: "The GP classifier: a normalised likelihood"). EP computes
it (:func:`bayesvm.inference.ep.ep_log_evidence` with ``likelihood="probit"``), deterministically, with the
posterior as a by-product: one run gives both. :func:`probit_log_evidence` is the public entry point;
:func:`probit_evidence` the one on validated data that the selection and the estimator share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .._precision import float64, numpy_leaves
from .._validation import TrainingData, check_kernel, collapsed_training_data
from .._warnings import warn_user
from ..exceptions import ConvergenceWarning
from ..inference.ep import FULL_TOLERANCE
from ..kernels import RBF, Kernel, gram_matrix
from ..normalization.ep_started import annealed_probit_from_ep
from ..posterior import ProbitPosterior, probit_posteriors

__all__ = ["ProbitEvidence", "probit_evidence", "probit_log_evidence"]


@dataclass(frozen=True)
class ProbitEvidence:
    """ln P(D) of the GP classifier (probit likelihood) at one kernel, by EP, for k binary problems on the same inputs.

    Attributes
    ----------
    values : (k,) ln P(D_c) of each binary problem (one for two classes; class c against the rest for k >= 3).
    converged : (k,) whether EP converged for each (the one check its value needs: it has no sampled part).
    n_iter : (k,) EP's sweeps for each, every loop tried included.
    kernel : the prior's kernel (with ``multiclass="per_class"``, a tuple of one per problem).
    posteriors : each problem's EP posterior (:class:`~bayesvm.posterior.ProbitPosterior`), from the same runs.
    annealed, annealed_se, annealed_trusted : (k,) the check of EP's value against tempered SMC started from EP's
        Gaussian (:func:`bayesvm.normalization.ep_started.annealed_probit_from_ep`), its standard error and whether
        its runs agreed; None where it was not asked for (``probit_log_evidence(..., check=True)``).
    """

    values: np.ndarray
    converged: np.ndarray
    n_iter: np.ndarray
    kernel: Kernel | tuple
    posteriors: tuple[ProbitPosterior, ...]
    annealed: np.ndarray | None = None
    annealed_se: np.ndarray | None = None
    annealed_trusted: np.ndarray | None = None

    def __getstate__(self):
        return numpy_leaves(self.__dict__)

    @classmethod
    def from_posteriors(cls, posteriors, kernel) -> "ProbitEvidence":
        """The evidence of each problem from its EP posterior (whose ``log_z`` it is)."""
        posteriors = tuple(posteriors)
        return cls(np.array([p.log_evidence for p in posteriors]), np.array([p.converged for p in posteriors]),
                   np.array([int(p.ep.n_iter) for p in posteriors]), kernel, posteriors)

    @classmethod
    def joined(cls, evidences) -> "ProbitEvidence":
        """Several problems' evidences (each at its own kernel) as one, their kernels a tuple."""
        evidences = tuple(evidences)
        return cls(np.concatenate([e.values for e in evidences]), np.concatenate([e.converged for e in evidences]),
                   np.concatenate([e.n_iter for e in evidences]), tuple(e.kernel for e in evidences),
                   tuple(p for e in evidences for p in e.posteriors))

    @property
    def total(self) -> float:
        """ln P(D): the sum over the problems (one for two classes)."""
        return float(np.sum(self.values))

    @property
    def total_se(self) -> float:
        """0: EP's value is deterministic (its error against the exact integral is not a standard error)."""
        return 0.0

    @property
    def naive_converged(self) -> bool:
        """EP converged for every problem."""
        return bool(np.all(self.converged))

    @property
    def trusted(self) -> bool:
        return self.naive_converged

    @property
    def annealed_total(self) -> float | None:
        """The annealed check of ``total`` (None where not computed)."""
        return None if self.annealed is None else float(np.sum(self.annealed))

    @property
    def annealed_total_se(self) -> float | None:
        return None if self.annealed_se is None else float(np.sqrt(np.sum(np.square(self.annealed_se))))

    def summary(self) -> str:
        rows = [("ln P(D)  (probit GP, EP)", f"{self.total:12.3f}")]
        if self.values.size > 1:
            rows += [(f"   problem {c}", f"{v:12.3f}") for c, v in enumerate(self.values)]
        rows.append(("EP converged", f"{'yes' if self.naive_converged else 'no':>12} ({int(np.sum(self.n_iter))} "
                                     "sweeps)"))
        if self.annealed is not None:
            rows.append(("annealed check", f"{self.annealed_total:12.3f} +- {self.annealed_total_se:.3f}"
                                           f"{'' if np.all(self.annealed_trusted) else ' (runs disagree)'}"))
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


#: the annealed check's tempered SMC (:func:`bayesvm.normalization.annealing.annealed_log_expectation`'s options): from
#: EP's Gaussian it has only EP's error to bridge, and these settings gave standard errors of 0.01-0.03 nats at
#: 200-300 rows and amplitudes 10-1000 in 12-16 s on one core (documentation: GP classifier, "The probit site")
CHECK_OPTIONS = {"n_particles": 512, "n_mcmc_steps": 10}


def probit_evidence(data: TrainingData, kernel: Kernel, *, tol: float = FULL_TOLERANCE, warn: bool = True,
                    check: bool = False, random_state=0) -> ProbitEvidence:
    """:class:`ProbitEvidence` of validated ``data``'s binary problems at a valid kernel: EP on one Gram matrix
    (:func:`bayesvm.posterior.probit_posteriors`), converged to ``tol``; warns (``warn``) where it did not converge.
    ``check``: also tempered SMC from each problem's EP Gaussian (:data:`CHECK_OPTIONS`, seeded by
    ``random_state``), the check of EP's value."""
    evidence = ProbitEvidence.from_posteriors(probit_posteriors(data, kernel, tol=tol), kernel)
    if warn and not evidence.naive_converged:
        warn_user("EP for the GP classifier's evidence did not converge at this kernel, so its ln P(D) and posterior "
                  "are unreliable", ConvergenceWarning)
    if not check:
        return evidence
    K = np.asarray(gram_matrix(kernel, data.X))
    checks = [annealed_probit_from_ep(K, y, data.weights, ep=posterior.ep, key=random_state, warn=False,
                                      **CHECK_OPTIONS)
              for y, posterior in zip(data.Y, evidence.posteriors)]
    return dataclasses.replace(evidence, annealed=np.array([c.value for c in checks]),
                               annealed_se=np.array([c.se for c in checks]),
                               annealed_trusted=np.array([c.trusted for c in checks]))


@float64
def probit_log_evidence(X, y, *, kernel: Kernel | None = None, sample_weight=None, check: bool = False,
                        random_state=0) -> ProbitEvidence:
    """ln P(D | kernel) of the GP classifier: the GP prior N(0, K) with the probit likelihood Phi(y theta), by EP.

    The likelihood is normalised, so there is no ln N(D); compare with :func:`bayesvm.log_evidence` (the Bayesian
    SVM's) on the same data to compare the models. Warns with :class:`bayesvm.ConvergenceWarning` where EP did not
    converge.

    Parameters
    ----------
    X, y : training inputs and labels of two classes (``classes[1]`` is +1), or of k >= 3 classes, read as k
        one-vs-rest problems whose evidences ``total`` sums; rows with equal input and label are one row of their
        summed weight, and the rows of one input one EP site (theory: "Weights and repeated rows").
    kernel : the prior's covariance (default ``RBF()``); its amplitude sets how sharp the labels are, since the
        probit's noise has unit variance.
    sample_weight : (n_samples,) non-negative weights, each row's likelihood term Phi(y theta) to that power.
    check : also estimate ln P(D) by tempered SMC started from EP's Gaussian (``annealed``, ``annealed_se``;
        from a fraction of a second to a minute at a few hundred rows): the sampled check of EP's value.
    random_state : seed of that check.

    Returns
    -------
    ProbitEvidence
        ``total`` is ln P(D) (its ``total_se`` 0: EP is deterministic), ``converged`` the check at the answer,
        ``posteriors`` the EP posteriors for predictions.
    """
    data, _ = collapsed_training_data(X, y, sample_weight)
    return probit_evidence(data, check_kernel(RBF() if kernel is None else kernel, data.X.shape[1]), check=check,
                           random_state=random_state)
