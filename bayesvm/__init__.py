"""bayesvm: the support vector machine read as a Bayesian model.

Sollich's Gaussian-process-prior interpretation of the SVM gives an evidence
(marginal likelihood) for the hyperparameters and class probabilities with
error bars. Every public entry point computes in float64 (the evidence sums
many terms and Cholesky factors of kernel matrices need the precision) by
entering ``jax.enable_x64(True)`` for the duration of the call; importing the
package leaves JAX's global ``jax_enable_x64`` flag as it is
(:mod:`bayesvm._precision`).
"""

from . import calibration, datasets, kernels, metrics
from .comparison import compare_calibration
from .estimator import BayesianSVC
from .coupling import couple_one_vs_rest
from .exceptions import (BayesvmWarning, ConvergenceWarning, EvidenceBudgetWarning, LowRankWarning,
                         SubsampleWarning, UntrustedEvidenceWarning)
from .evidence.log_evidence import Evidence, OneVsRestEvidence, log_evidence, log_evidence_one_vs_rest, log_normalization
from .evidence.probit import ProbitEvidence, probit_log_evidence
from .kernels import RBF, Exponential, Linear, Polynomial, make_kernel
from .posterior import ErrorBars, Posterior
from .selection.search_selection import SearchSelection
from .selection.grid import Grid, GridEdgeWarning
from .selection.grid_checks import DegenerateSelectionWarning
from .selection.select import select_hyperparameters
from .selection.surface import EvidenceSurface
from .solver.dual import fit_map
from ._precision import float64_scope

__version__ = "0.1.0"

#: what a user needs: the estimator, the evidence at given hyperparameters, the selection and its results,
#: the kernels, the posterior's probabilities and error bars, the calibration comparison and its data sets.
#: The building blocks (solver, EP, annealing, the search's parts) stay in their modules.
__all__ = [
    "BayesianSVC",
    "select_hyperparameters",
    "SearchSelection",
    "EvidenceSurface",
    "Grid",
    "GridEdgeWarning",
    "DegenerateSelectionWarning",
    "BayesvmWarning",
    "UntrustedEvidenceWarning",
    "EvidenceBudgetWarning",
    "SubsampleWarning",
    "LowRankWarning",
    "ConvergenceWarning",
    "log_evidence",
    "log_normalization",
    "Evidence",
    "log_evidence_one_vs_rest",
    "OneVsRestEvidence",
    "probit_log_evidence",
    "ProbitEvidence",
    "couple_one_vs_rest",
    "fit_map",
    "float64_scope",
    "Posterior",
    "ErrorBars",
    "RBF",
    "Exponential",
    "Polynomial",
    "Linear",
    "make_kernel",
    "compare_calibration",
    "calibration",
    "datasets",
    "kernels",
    "metrics",
    "plotting",
]


def __getattr__(name):
    # plotting pulls in matplotlib.pyplot: import it only when asked for
    if name == "plotting":
        import importlib

        return importlib.import_module(".plotting", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
