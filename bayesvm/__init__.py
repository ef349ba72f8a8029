"""bayesvm: the support vector machine read as a Bayesian model.

Sollich's Gaussian-process-prior interpretation of the SVM gives an evidence
(marginal likelihood) for the hyperparameters and class probabilities with
error bars. Every public entry point computes in float64 (the evidence sums
many terms and Cholesky factors of kernel matrices need the precision) by
entering ``jax.enable_x64(True)`` for the duration of the call; importing the
package leaves JAX's global ``jax_enable_x64`` flag as it is
(:mod:`bayesvm._precision`).
"""

from . import annealing, calibration, comparison, datasets, ep, kernels, metrics, model
from .comparison import compare_calibration
from .estimator import BayesianSVC
from .evidence import Evidence, log_evidence, log_naive_evidence
from .kernels import RBF, Exponential, Linear, Polynomial, make_kernel
from .normalization import log_normalization
from .posterior import Posterior
from .selection import EvidenceSurface, select_hyperparameters
from .solver import MapSVM, fit_map, solve_dual

__version__ = "0.1.0"

__all__ = [
    "calibration",
    "datasets",
    "metrics",
    "plotting",
    "kernels",
    "model",
    "RBF",
    "Exponential",
    "Polynomial",
    "Linear",
    "make_kernel",
    "fit_map",
    "solve_dual",
    "MapSVM",
    "log_evidence",
    "log_naive_evidence",
    "log_normalization",
    "Evidence",
    "Posterior",
    "select_hyperparameters",
    "EvidenceSurface",
    "BayesianSVC",
    "compare_calibration",
    "annealing",
    "comparison",
    "ep",
]


def __getattr__(name):
    # plotting pulls in matplotlib.pyplot: import it only when asked for
    if name == "plotting":
        import importlib

        return importlib.import_module(".plotting", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
