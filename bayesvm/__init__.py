"""bayesvm: the support vector machine read as a Bayesian model.

Sollich's Gaussian-process-prior interpretation of the SVM gives an evidence
(marginal likelihood) for the hyperparameters and class probabilities with
error bars. float64 is switched on at import: the evidence sums many terms
and Cholesky factors of kernel matrices need the precision.
"""

import jax

jax.config.update("jax_enable_x64", True)

from . import annealing, calibration, comparison, datasets, ep, kernels, metrics, model  # noqa: E402
from .comparison import compare_calibration  # noqa: E402
from .estimator import BayesianSVC  # noqa: E402
from .evidence import Evidence, log_evidence, log_naive_evidence  # noqa: E402
from .kernels import RBF, Exponential, Linear, Polynomial, make_kernel  # noqa: E402
from .normalization import log_normalization  # noqa: E402
from .posterior import Posterior  # noqa: E402
from .selection import EvidenceSurface, select_hyperparameters  # noqa: E402
from .solver import MapSVM, fit_map, solve_dual  # noqa: E402

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
