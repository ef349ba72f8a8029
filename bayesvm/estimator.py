"""A scikit-learn classifier: the SVM with evidence-selected hyperparameters and moderated probabilities.

:class:`BayesianSVC` fits the MAP SVM of Sollich's Bayesian reading
(DESIGN.md section 1; the bias is the kernel's offset, there is no free b).
Hyperparameters left at ``None`` are chosen by maximising the evidence with
:func:`bayesvm.selection.select_hyperparameters`; given ones are held fixed.
Class probabilities come from a Gaussian posterior of theta(x): by default
the expectation-propagation posterior of the evidence's own approximation
(``posterior="ep"``), or Sollich's Laplace-style Gaussian around the SVM output
(``posterior="laplace"``, DESIGN.md section 3). ``decision_function`` is the
posterior mean, so ``predict`` and ``predict_proba`` agree by construction.

Why EP by default: at the large amplitudes the evidence often selects, the
Laplace-style Gaussian sits at the SVM output theta* = O(1) with a variance of
order k0, and every averaged probability comes out near 1/2 (test NLL ln 2 on
ionosphere at 100 training points), while EP's posterior mean carries the
scale the evidence chose (NLL 0.23, error 0.066 on the same split;
docs/selection-benchmark.md).

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from .evidence import log_evidence
from .posterior import APPROXIMATIONS as POSTERIORS
from .posterior import PROBABILITY_METHODS, ErrorBars, Posterior
from .selection import SHAPE_PARAMETERS, _kernel_template, select_hyperparameters

__all__ = ["BayesianSVC"]


class BayesianSVC(ClassifierMixin, BaseEstimator):
    """Binary SVM classifier with evidence-based hyperparameters and class probabilities with error bars.

    Parameters
    ----------
    kernel : ``"rbf"``, ``"exponential"``, ``"polynomial"`` or ``"linear"``.
    C : penalty (the likelihood's inverse temperature); None: selected.
    amplitude : kernel amplitude k0; None: selected. Can be fixed only
        together with ``C`` (the grid is parametrised by C k0).
    length_scale : RBF / exponential length scale; None: selected. Must be
        None for the polynomial (fix ``gamma`` through ``grid``) and linear kernels.
    offset : the kernel's constant k_b (the prior variance of the bias);
        None: selected. Can be fixed only together with ``amplitude`` (the grid
        is parametrised by k_b / k0).
    grid : extra grid axes for the selection (see
        :func:`bayesvm.selection.select_hyperparameters`); must not repeat a
        hyperparameter fixed above.
    approximation, normalization, n_samples, max_inputs, refine : evidence settings
        passed to the selection (and to :func:`bayesvm.evidence.log_evidence`
        when every hyperparameter is fixed).
    posterior : ``"ep"`` (default) or ``"laplace"``: the Gaussian posterior of
        theta(x) behind ``decision_function``, ``predict_proba`` and ``error_bars``
        (module docstring).
    probability : ``"averaged"`` (default, <Q(+1|theta)>/<nu(theta)>),
        ``"map"`` (plug-in at the posterior mean) or ``"simple"`` (<P(+1|theta)>).
    max_checks : full annealed checks of the surface's ln N(D) at the argmax
        during the selection;
    max_extensions, on_edge : what the selection does when the optimum lies
        on the grid's edge (extend up to ``max_extensions`` times; then
        ``"warn"`` or ``"raise"``); all three as in
        :func:`bayesvm.selection.select_hyperparameters`.
    random_state : int seed of the normalisation draws (deterministic fits).

    Attributes
    ----------
    classes_, n_features_in_ : as in scikit-learn.
    C_, amplitude_, offset_, length_scale_ : the hyperparameters used
        (``length_scale_`` is None for kernels without one), ``kernel_`` the kernel.
    log_evidence_, log_evidence_se_ : ln P(D) and its standard error at them;
        ``evidence_`` the full :class:`~bayesvm.evidence.Evidence` (terms, ln N(D), ...).
    surface_ : the :class:`~bayesvm.selection.EvidenceSurface`, or None when nothing was selected.
    fit_ : the MAP SVM at the chosen hyperparameters; ``posterior_`` the posterior used for predictions.
    support_ : indices of the MAP SVM's support vectors (alpha > 0); ``support_vectors_`` their inputs;
    dual_coef_ : (1, n_SV) alpha_i y_i of the support vectors (y = +1 for ``classes_[1]``);
    marginal_ : indices of the marginal points (0 < alpha < C).
    """

    def __init__(
        self,
        kernel="rbf",
        C=None,
        amplitude=None,
        length_scale=None,
        offset=None,
        grid=None,
        approximation="ep",
        normalization="annealed",
        n_samples=1000,
        max_inputs=300,
        refine=True,
        posterior="ep",
        probability="averaged",
        max_checks=8,
        max_extensions=3,
        on_edge="warn",
        random_state=0,
    ):
        self.kernel = kernel
        self.C = C
        self.amplitude = amplitude
        self.length_scale = length_scale
        self.offset = offset
        self.grid = grid
        self.approximation = approximation
        self.normalization = normalization
        self.n_samples = n_samples
        self.max_inputs = max_inputs
        self.refine = refine
        self.posterior = posterior
        self.probability = probability
        self.max_checks = max_checks
        self.max_extensions = max_extensions
        self.on_edge = on_edge
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # binary only: multiclass input is refused with a ValueError (see fit)
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y):
        """Select the free hyperparameters by evidence (or use the fixed ones) and fit the MAP SVM."""
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        target_type = type_of_target(y, input_name="y", raise_unknown=True)
        if target_type != "binary" and np.unique(y).size > 1:
            raise ValueError(
                f"Only binary classification is supported. The type of the target is {target_type}: "
                f"y has {np.unique(y).size} classes. Wrap BayesianSVC in "
                "sklearn.multiclass.OneVsRestClassifier for more classes."
            )
        self.classes_ = np.unique(y)
        if self.probability not in PROBABILITY_METHODS:
            raise ValueError(f"probability must be one of {PROBABILITY_METHODS}; got {self.probability!r}")
        if self.posterior not in POSTERIORS:
            raise ValueError(f"posterior must be one of {POSTERIORS}; got {self.posterior!r}")
        template = _kernel_template(self.kernel)
        shape_name = SHAPE_PARAMETERS[template.name]
        fixed_grid = self._fixed_axes(shape_name)
        if self._all_fixed(shape_name):
            kernel = template.replace(amplitude=float(self.amplitude), offset=float(self.offset),
                                      **({shape_name: float(self.length_scale)} if shape_name else {}))
            self.evidence_ = log_evidence(
                X, y, C=float(self.C), kernel=kernel, approximation=self.approximation,
                normalization=self.normalization, n_samples=self.n_samples, max_inputs=self.max_inputs, random_state=self.random_state,
            )
            self.surface_ = None
        else:
            self.surface_ = select_hyperparameters(
                X, y, kernel=template, grid=fixed_grid, refine=self.refine, approximation=self.approximation,
                normalization=self.normalization, n_samples=self.n_samples, max_inputs=self.max_inputs,
                max_checks=self.max_checks, max_extensions=self.max_extensions, on_edge=self.on_edge,
                random_state=self.random_state,
            )
            self.evidence_ = self.surface_.evidence
        self._set_fitted(shape_name)
        return self

    def _all_fixed(self, shape_name) -> bool:
        return all(v is not None for v in (self.C, self.amplitude, self.offset)) and (
            shape_name is None or self.length_scale is not None
        )

    def _fixed_axes(self, shape_name) -> dict:
        """Grid axes pinned by the fixed hyperparameters, merged with ``grid``."""
        if self.amplitude is not None and self.C is None:
            raise ValueError("amplitude can only be fixed together with C (the selection grid is over C k0 and C)")
        if self.offset is not None and self.amplitude is None:
            raise ValueError("offset can only be fixed together with amplitude (the selection grid is over k_b / k0)")
        if self.length_scale is not None and shape_name != "length_scale":
            raise ValueError(f"length_scale does not apply to the {self.kernel!r} kernel; leave it None")
        fixed = {}
        if self.C is not None:
            fixed["C"] = [float(self.C)]
        if self.amplitude is not None:
            fixed["C_k0"] = [float(self.C) * float(self.amplitude)]
        if self.offset is not None:
            fixed["offset_ratio"] = [float(self.offset) / float(self.amplitude)]
        if self.length_scale is not None:
            fixed["length_scale"] = [float(self.length_scale)]
        extra = dict(self.grid or {})
        clash = set(fixed) & set(extra)
        if clash:
            raise ValueError(f"grid sets {sorted(clash)}, which are fixed by the estimator's parameters")
        return {**extra, **fixed}

    def _set_fitted(self, shape_name) -> None:
        fit = self.evidence_.fit
        self.fit_ = fit
        self.posterior_ = self.evidence_.posterior if self.posterior == "laplace" else Posterior.from_fit(fit, "ep")
        self.kernel_ = fit.kernel
        self.C_ = float(fit.C)
        self.amplitude_ = float(fit.kernel.amplitude)
        self.offset_ = float(fit.kernel.offset)
        self.length_scale_ = float(fit.kernel.length_scale) if shape_name == "length_scale" else None
        self.log_evidence_ = float(self.evidence_.total)
        self.log_evidence_se_ = float(self.evidence_.total_se)
        self.support_ = fit.support
        self.support_vectors_ = fit.X[fit.support]
        self.dual_coef_ = (fit.alpha[fit.support] * fit.y[fit.support])[None, :]
        self.marginal_ = np.flatnonzero(fit.marginal)

    def _inputs(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64)

    def decision_function(self, X) -> np.ndarray:
        """The posterior mean of theta(x) (positive for ``classes_[1]``); with ``posterior="laplace"`` the SVM output theta*(x)."""
        X = self._inputs(X)
        return self.posterior_.latent(X)[0]

    def predict(self, X) -> np.ndarray:
        theta = self.decision_function(X)
        return self.classes_[(theta >= 0).astype(int)]

    def predict_proba(self, X) -> np.ndarray:
        """(n_samples, 2) class probabilities by the ``probability`` method; >= 1/2 for the predicted class."""
        X = self._inputs(X)
        p = self.posterior_.predict_proba(X, method=self.probability)
        return np.column_stack([1.0 - p, p])

    def predict_log_proba(self, X) -> np.ndarray:
        return np.log(self.predict_proba(X))

    def error_bars(self, X) -> ErrorBars:
        """The posterior mean of theta(x), its standard deviation sigma(x), and P(classes_[1]) at mean -+ sigma."""
        X = self._inputs(X)
        return self.posterior_.error_bars(X)
