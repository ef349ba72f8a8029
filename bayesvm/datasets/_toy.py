"""The SVM's own generative model as a toy-data generator (public through :mod:`bayesvm.datasets`).

Toy data (:func:`make_toy`) are drawn from the SVM's probabilistic model
itself (theory: "The generative model"; Sollich 2002, section 2): a latent function
theta ~ GP(0, K), inputs x ~ Q(x) and, for each input, the label +1 with
probability Q(+1 | theta(x)), -1 with probability Q(-1 | theta(x)) and
"don't know" with probability 1 - nu(theta(x)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .. import model
from .._precision import float64
from .._validation import check_count, check_inputs, check_kernel, check_positive
from ..compilation import jit
from ..kernels import Kernel, gram_matrix

__all__ = ["INPUT_DISTRIBUTIONS", "RESTART_MODES", "ToyData", "make_toy"]

INPUT_DISTRIBUTIONS = ("uniform", "gaussian")
RESTART_MODES = ("input", "theta")


@dataclass(frozen=True, eq=False)
class ToyData:
    """A data set drawn from the SVM's generative model.

    Attributes
    ----------
    X : (n, d) inputs that received a label.
    y : (n,) labels in {-1, +1} (int).
    theta : (n,) the latent function theta(x_i) of the one GP sample.
    p_positive : (n,) the true class probability P(y=+1 | x_i) =
        Q(+1|theta)/nu(theta) = sigmoid(C g(theta(x_i))).
    kernel, C : the true hyperparameters.
    input_distribution, restart : how the data were generated (see make_toy).
    n_candidates : inputs presented to the labeller in total, including those
        answered "don't know" (and, for ``restart="theta"``, those of the
        rejected attempts up to their first "don't know").
    n_attempts : theta samples drawn (1 for ``restart="input"``).
    grid, theta_grid, p_positive_grid : the user's evaluation inputs, theta on
        them from the same GP sample, and the true P(y=+1 | x) there; None when
        no grid was asked for.
    """

    X: np.ndarray
    y: np.ndarray
    theta: np.ndarray
    p_positive: np.ndarray
    kernel: Kernel
    C: float
    input_distribution: str
    restart: str
    n_candidates: int
    n_attempts: int
    grid: np.ndarray | None = None
    theta_grid: np.ndarray | None = None
    p_positive_grid: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class _GPSample:
    """One GP draw in whitened form: theta = L z with L L^T = K(X) + jitter I (block-wise)."""

    X: np.ndarray
    L: np.ndarray
    z: np.ndarray

    @property
    def theta(self) -> np.ndarray:
        return self.L @ self.z

    def head(self, m: int) -> _GPSample:
        """The same draw restricted to its first ``m`` inputs (leading block of a Cholesky factor)."""
        return _GPSample(self.X[:m], self.L[:m, :m], self.z[:m])


def _bucket_size(n: int) -> int:
    """Next power of two (at least 16): padding arrays to it bounds the shapes JAX compiles for."""
    return max(16, 1 << (n - 1).bit_length())


def _pad_rows(a: np.ndarray) -> np.ndarray:
    """``a`` with its last row repeated up to :func:`_bucket_size` rows."""
    return np.concatenate([a, np.repeat(a[-1:], _bucket_size(a.shape[0]) - a.shape[0], axis=0)])


_label_log_likelihoods_jit = jit(
    lambda theta, C: (model.log_label_likelihood(1.0, theta, C), model.log_label_likelihood(-1.0, theta, C))
)
_label_probability_jit = jit(model.label_probability)


def _gram(kernel: Kernel, X1: np.ndarray, X2: np.ndarray | None = None) -> np.ndarray:
    """``kernel(X1, X2)`` as numpy, evaluated jitted on row-padded inputs (the padding is cut off again).

    JAX compiles once per shape; the candidate batches have random sizes, so
    without padding every draw would compile anew.
    """
    n1 = X1.shape[0]
    if X2 is None:
        return np.asarray(gram_matrix(kernel, _pad_rows(X1)))[:n1, :n1]
    return np.asarray(gram_matrix(kernel, _pad_rows(X1), _pad_rows(X2)))[:n1, : X2.shape[0]]


def _label_probability(theta: np.ndarray, C: float) -> np.ndarray:
    """P(y=+1 | theta) (model.label_probability) as numpy, on a row-padded theta (see :func:`_gram`)."""
    return np.asarray(_label_probability_jit(_pad_rows(theta), C))[: theta.shape[0]]


def _jittered_cholesky(S: np.ndarray, jitter: float) -> np.ndarray:
    """Lower Cholesky factor of S + jitter * I; ValueError if that is not positive definite."""
    try:
        return scipy.linalg.cholesky(S + jitter * np.eye(S.shape[0]), lower=True)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"the kernel matrix of the toy inputs is not positive definite with jitter={jitter}; "
            "pass a larger jitter (e.g. 1e-6) or fewer / less clustered inputs"
        ) from None


def _conditional_factor(
    kernel: Kernel, sample: _GPSample | None, X_new: np.ndarray, jitter: float
) -> tuple[np.ndarray, np.ndarray]:
    """Blocks B, S of the joint Cholesky factor [[L, 0], [B, S]] of the old and new inputs.

    With K(X_old) = L L^T: B = K(X_new, X_old) L^-T and
    S S^T = K(X_new) - B B^T + jitter * mean(diag K(X_new)) * I (the jitter is
    relative to the prior variance, not to the conditional one). Then
    theta_new = B z_old + S z_new, z_new ~ N(0, I), is the GP conditional draw
    given theta_old = L z_old, i.e. exactly a joint draw over both sets.
    """
    K_new = _gram(kernel, X_new)
    jitter = jitter * float(np.mean(np.diag(K_new)))
    if sample is None:
        return np.zeros((X_new.shape[0], 0)), _jittered_cholesky(K_new, jitter)
    K_cross = _gram(kernel, X_new, sample.X)
    B = scipy.linalg.solve_triangular(sample.L, K_cross.T, lower=True).T
    return B, _jittered_cholesky(K_new - B @ B.T, jitter)


def _extend_gp_sample(
    kernel: Kernel, sample: _GPSample | None, X_new: np.ndarray, rng: np.random.Generator, jitter: float
) -> _GPSample:
    """The GP draw extended to new inputs, as if both sets had been drawn jointly."""
    B, S = _conditional_factor(kernel, sample, X_new, jitter)
    z_new = rng.standard_normal(X_new.shape[0])
    if sample is None:
        return _GPSample(X_new, S, z_new)
    L = np.block([[sample.L, np.zeros((sample.L.shape[0], S.shape[0]))], [B, S]])
    return _GPSample(np.vstack([sample.X, X_new]), L, np.concatenate([sample.z, z_new]))


def _theta_at(kernel: Kernel, sample: _GPSample, X_new: np.ndarray, rng: np.random.Generator, jitter: float):
    """theta at new inputs from the GP conditional given the sample (no joint factor is kept)."""
    B, S = _conditional_factor(kernel, sample, X_new, jitter)
    return B @ sample.z + S @ rng.standard_normal(X_new.shape[0])


def _draw_inputs(rng: np.random.Generator, n: int, n_features: int, distribution: str) -> np.ndarray:
    """x ~ Q(x): uniform on the unit cube [0, 1]^d or standard normal N(0, I_d)."""
    if distribution == "uniform":
        return rng.uniform(size=(n, n_features))
    return rng.standard_normal((n, n_features))


def _draw_labels(theta: np.ndarray, C: float, rng: np.random.Generator) -> np.ndarray:
    """+1 with probability Q(+1|theta), -1 with Q(-1|theta), 0 ("don't know") with 1 - nu(theta)."""
    n = theta.shape[0]
    q_plus, q_minus = (np.exp(np.asarray(q))[:n] for q in _label_log_likelihoods_jit(_pad_rows(theta), C))
    u = rng.uniform(size=theta.shape)
    return np.where(u < q_plus, 1, np.where(u < q_plus + q_minus, -1, 0))


def check_choice(value, name: str, accepted: tuple[str, ...]) -> str:
    if value not in accepted:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, accepted))}; got {value!r}")
    return value


@float64
def make_toy(
    n_samples: int,
    *,
    kernel: Kernel,
    C: float,
    input_distribution: str = "uniform",
    n_features: int = 2,
    grid=None,
    restart: str = "input",
    max_candidates: int = 5000,
    max_attempts: int = 10000,
    jitter: float = 1e-8,
    random_state=None,
) -> ToyData:
    """Draw ``n_samples`` labelled points from the SVM's generative model.

    Inputs x ~ Q(x): ``"uniform"`` on [0, 1]^d or ``"gaussian"`` N(0, I_d),
    d = ``n_features``. theta is drawn from GP(0, K) at the inputs (Cholesky
    of K + jitter * mean(diag K) * I), and each input is shown to the labeller,
    which answers +1 with probability Q(+1|theta(x)) = kappa(C) exp(-C l(theta)),
    -1 with Q(-1|theta(x)) = kappa(C) exp(-C l(-theta)), and "don't know" with
    1 - nu(theta(x)) (theory: "The generative model"). What happens on "don't know":

    * ``restart="input"`` (default): theta is kept and a fresh input is drawn.
      Implemented exactly by drawing candidate inputs in batches, extending the
      *one* GP sample to each batch by its conditional given all earlier
      candidates (so theta is a single joint draw), labelling every candidate
      and keeping the first ``n_samples`` labelled ones in draw order. Then
      theta ~ GP prior and the kept inputs have density Q(x) nu(theta(x)) /
      N(theta), N(theta) = E_x[nu(theta(x))]; the data likelihood is
      prod_i Q(x_i) Q(y_i|theta(x_i)) / N(theta). This is *not* the model whose
      evidence bayesvm computes (that one divides by E_theta[N(theta)^n], not
      by N(theta)^n inside the integral), but it can make any n. Fails with
      ValueError after ``max_candidates`` candidates.
    * ``restart="theta"``: Sollich's story as written in the theory page
      ("The generative model"): on any
      "don't know" the whole data set is discarded and theta and all inputs are
      drawn afresh. Exact for the model (posterior prior * prod Q(y_i|theta_i),
      evidence normalised by N(D) = E_theta[N(theta)^n]); each attempt succeeds
      with probability N(D), so this is practical only for small n. Fails with
      ValueError after ``max_attempts`` attempts.

    ``grid`` (optional, shape (m, d)): inputs at which the *same* theta sample
    is evaluated, drawn from the GP conditional given theta at every candidate
    input, so ``p_positive_grid`` is the true P(y=+1 | x) = sigmoid(C g(theta(x)))
    of this data set on the grid (e.g. to draw the Bayes-optimal decision
    boundary). The GP conditional mean given theta at X is *not* this function.
    The grid costs one Cholesky factorisation of size m (m = 3600 takes
    seconds); the candidates one of their number.

    Reference: P. Sollich, Machine Learning 46 (2002), section 2.
    """
    n_samples = check_count(n_samples, "n_samples")
    n_features = check_count(n_features, "n_features")
    max_candidates = check_count(max_candidates, "max_candidates")
    max_attempts = check_count(max_attempts, "max_attempts")
    kernel, C, jitter = check_kernel(kernel), check_positive(C, "C"), check_positive(jitter, "jitter")
    input_distribution = check_choice(input_distribution, "input_distribution", INPUT_DISTRIBUTIONS)
    restart = check_choice(restart, "restart", RESTART_MODES)
    if grid is not None:
        grid = check_inputs(grid, name="grid", n_features=n_features)
    rng = np.random.default_rng(random_state)
    draw = (n_samples, kernel, C, input_distribution, n_features)
    if restart == "input":
        sample, labels, n_candidates = _labelled_by_input_restart(*draw, max_candidates, jitter, rng)
        n_attempts = 1
    else:
        sample, labels, n_candidates, n_attempts = _labelled_by_theta_restart(*draw, max_attempts, jitter, rng)
    return _toy_result(
        sample, labels, grid, rng, kernel, C, jitter, input_distribution, restart, n_candidates, n_attempts
    )


def _toy_result(
    sample, labels, grid, rng, kernel, C, jitter, input_distribution, restart, n_candidates, n_attempts
) -> ToyData:
    """The labelled inputs of ``sample`` (and theta on the grid, drawn from the same GP sample) as :class:`ToyData`."""
    keep = labels != 0
    theta = sample.theta[keep]
    theta_grid = p_grid = None
    if grid is not None:
        theta_grid = _theta_at(kernel, sample, grid, rng, jitter)
        p_grid = _label_probability(theta_grid, C)
    return ToyData(
        X=sample.X[keep],
        y=labels[keep].astype(np.int64),
        theta=theta,
        p_positive=_label_probability(theta, C),
        kernel=kernel,
        C=C,
        input_distribution=input_distribution,
        restart=restart,
        n_candidates=n_candidates,
        n_attempts=n_attempts,
        grid=grid,
        theta_grid=theta_grid,
        p_positive_grid=p_grid,
    )


def _labelled_by_input_restart(n, kernel, C, distribution, n_features, max_candidates, jitter, rng):
    """Candidates in batches on one GP sample until n are labelled; returns the sample cut after the n-th."""
    sample, labels = None, np.zeros(0, dtype=np.int64)
    while np.count_nonzero(labels) < n:
        n_labelled, n_drawn = np.count_nonzero(labels), labels.size
        rate = max(n_labelled, 1) / n_drawn if n_drawn else 1.0
        batch = min(math.ceil(1.25 * (n - n_labelled) / rate), max_candidates - n_drawn)
        if batch <= 0:
            raise ValueError(
                f"only {n_labelled} of {n} inputs were labelled after {n_drawn} candidates "
                f"(label rate {n_labelled / n_drawn:.3g}); most theta(x) fall in the 'don't know' gap "
                "|theta| < 1. Raise the kernel amplitude, lower C, or raise max_candidates"
            )
        X_new = _draw_inputs(rng, batch, n_features, distribution)
        sample = _extend_gp_sample(kernel, sample, X_new, rng, jitter)
        labels = np.concatenate([labels, _draw_labels(sample.theta[n_drawn:], C, rng)])
    n_used = int(np.flatnonzero(labels)[n - 1]) + 1
    return sample.head(n_used), labels[:n_used], n_used


def _labelled_by_theta_restart(n, kernel, C, distribution, n_features, max_attempts, jitter, rng):
    """Fresh theta and n fresh inputs per attempt until every input is labelled."""
    n_candidates = 0
    for attempt in range(1, max_attempts + 1):
        sample = _extend_gp_sample(kernel, None, _draw_inputs(rng, n, n_features, distribution), rng, jitter)
        labels = _draw_labels(sample.theta, C, rng)
        unlabelled = np.flatnonzero(labels == 0)
        if unlabelled.size == 0:
            return sample, labels, n_candidates + n, attempt
        n_candidates += int(unlabelled[0]) + 1
    raise ValueError(
        f"no attempt out of max_attempts={max_attempts} labelled all {n} inputs; each succeeds with "
        f"probability N(D) = E_theta[N(theta)^n], tiny for large n. Use restart='input', fewer samples, "
        "or raise max_attempts"
    )
