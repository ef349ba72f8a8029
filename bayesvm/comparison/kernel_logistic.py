"""Kernel logistic regression (KLR): the baseline of Rüping's comparison of SVM scaling methods.

The latent values f at the training inputs minimise

    C sum_i ln(1 + e^{-y_i f_i}) + 1/2 f^T K^{-1} f,

the MAP SVM's objective (theory: "MAP = SVM") with the hinge replaced by the logistic loss: the same kernel and the
same C, and probabilities P(y = +1 | x) = sigma(f(x)) from the model itself instead of from a scaler fitted to
decision values. The objective is convex; Newton's method in the form of Rasmussen & Williams (2006), Algorithm 3.1
(the posterior mode of GP classification, here with the log-likelihood C ln sigma(y f)) factors
B = I + W^1/2 K W^1/2, W = C pi (1 - pi), pi = sigma(f), and never inverts K; a step that raises the objective
is halved. At the optimum f = K a with a = C (t - pi), t = (y + 1) / 2, so f(x) = k(x)^T a.

Reference: S. Rüping, "A simple method for estimating conditional probabilities for SVMs" (2004).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_expit

from .._validation import check_inputs, check_labels, check_positive
from ..kernels import Kernel, gram_matrix

__all__ = ["KernelLogistic", "fit_kernel_logistic"]


@dataclass(frozen=True)
class KernelLogistic:
    """A fitted kernel logistic regression: f(x) = k(x, X)^T a, P(y = +1 | x) = sigma(f(x)); ``converged``: the
    Newton iteration met its tolerance."""

    kernel: Kernel
    C: float
    X: np.ndarray
    a: np.ndarray
    n_iter: int
    converged: bool

    def decision_function(self, X) -> np.ndarray:
        X = check_inputs(X, n_features=self.X.shape[1])
        return np.asarray(gram_matrix(self.kernel, X, self.X), dtype=np.float64) @ self.a

    def predict_proba(self, X) -> np.ndarray:
        """P(y = +1 | x) for each row of X."""
        return expit(self.decision_function(X))


def _objective(a: np.ndarray, f: np.ndarray, y: np.ndarray, C: float) -> float:
    """-(C sum_i ln sigma(y_i f_i) - 1/2 a^T f), the objective at f = K a."""
    return float(0.5 * a @ f - C * np.sum(log_expit(y * f)))


def fit_kernel_logistic(X, y, *, kernel: Kernel, C: float = 1.0, tol: float = 1e-10,
                        max_iter: int = 100) -> KernelLogistic:
    """KLR on inputs X (n, d) with labels y in {-1, +1} (or two classes, the larger one +1) by Newton's method
    (module docstring), stopping once an iteration lowers the objective by less than ``tol`` times (1 + its
    size)."""
    X = check_inputs(X)
    y_pm, _ = check_labels(y, X.shape[0])
    C = check_positive(C, "C")
    K = np.asarray(gram_matrix(kernel, X), dtype=np.float64)
    t = 0.5 * (y_pm + 1.0)
    a, f = np.zeros(X.shape[0]), np.zeros(X.shape[0])
    value = _objective(a, f, y_pm, C)
    for n_iter in range(1, max_iter + 1):
        pi = expit(f)
        root_w = np.sqrt(C * pi * (1.0 - pi))
        B = cho_factor(np.eye(K.shape[0]) + root_w[:, None] * K * root_w[None, :], lower=True)
        b = C * pi * (1.0 - pi) * f + C * (t - pi)
        step = b - root_w * cho_solve(B, root_w * (K @ b)) - a
        for _ in range(30):  # halve a step that raises the objective (the Newton step may overshoot far out)
            new_a = a + step
            new_f = K @ new_a
            new_value = _objective(new_a, new_f, y_pm, C)
            if new_value <= value:
                break
            step = 0.5 * step
        a, f, improvement, value = new_a, new_f, value - new_value, new_value
        if improvement < tol * (1.0 + abs(value)):
            return KernelLogistic(kernel, C, X, a, n_iter, True)
    return KernelLogistic(kernel, C, X, a, max_iter, False)
