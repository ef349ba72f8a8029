"""A scikit-learn classifier: the SVM with evidence-selected hyperparameters and moderated probabilities.

:class:`BayesianSVC` fits the MAP SVM of Sollich's Bayesian reading
(the bias is the kernel's offset, there is no free b; theory: "MAP = SVM"
and "The bias is the kernel offset").
Hyperparameters left at ``None`` are chosen by maximising the evidence with
:func:`bayesvm.selection.select.select_hyperparameters`; given ones are held fixed.
Class probabilities come from a Gaussian posterior of theta(x): by default
the expectation-propagation posterior of the evidence's own approximation
(``posterior="ep"``), or Sollich's Laplace-style Gaussian around the SVM output
(``posterior="laplace"``; theory: "Error bars and predictive probabilities").
``decision_function`` is the
posterior mean, so ``predict`` and ``predict_proba`` agree by construction.

Why EP by default: at the large amplitudes the evidence often selects, the
Laplace-style Gaussian sits at the SVM output theta* = O(1) with a variance of
order k0, and every averaged probability comes out near 1/2, while EP's
posterior mean carries the scale the evidence chose (documentation:
selection benchmark).

Large training sets: above 250 rows (``selection_size="auto"``), or whenever
``selection_size`` is a number, the evidence and the hyperparameters it
selects are computed on a stratified random subsample of 250 (or that many)
rows, and the posterior is then fitted on every row (theory: "Large data:
selection on a subsample"). Each of the two uses the full prior up to 2000
rows (``n_inducing="auto"``) and a low-rank prior through 200 k-means
inducing inputs above (or through ``n_inducing`` of them; theory: "Large
data: a low-rank prior"): O(n m^2) time, O(n m) memory. No MAP SVM is
fitted on the low-rank prior, so the attributes that describe it
(``fit_``, ``support_``, ...) are None there.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

import numpy as np
from numbers import Integral, Real

from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._precision import float64
from ._validation import TrainingData, check_kernel, check_positive, collapse_rows
from .coupling import COUPLINGS, couple_one_vs_rest
from .evidence.log_evidence import OneVsRestEvidence, one_vs_rest_evidence
from .evidence.probit import ProbitEvidence, probit_evidence
from .inference.ep import FULL_TOLERANCE, LIKELIHOODS
from .hyperparameters import coordinate_names, kernel_hyperparameters_at
from .kernels import make_kernel
from .posterior import APPROXIMATIONS as POSTERIORS
from .posterior import PREDICTION_TOLERANCE, PROBABILITY_METHODS, ErrorBars, Posterior, posteriors_at, probit_posteriors
from .selection.search_priors import prior_for
from .normalization.budget import EvidenceBudget
from .selection.probit import evidence_prefers_probit, select_probit
from .selection.select import select_for
from .selection.subsample import selection_subset

__all__ = ["BayesianSVC"]



class BayesianSVC(ClassifierMixin, BaseEstimator):
    """SVM classifier with evidence-based hyperparameters and class probabilities with error bars.

    Two classes are one binary Bayesian SVM. k >= 3 classes are k one-vs-rest
    binary problems (class c against the rest) whose class probabilities are
    coupled into one distribution (``coupling``); their hyperparameters are
    shared and chosen by the summed evidence (``multiclass="shared"``, with one
    ln N(D) for all k problems) or chosen per problem (``"per_class"``);
    theory: "More than two classes".

    The free hyperparameters are chosen by :func:`bayesvm.select_hyperparameters`
    with its defaults (quasi-Newton ascent of the evidence, checked at the
    answer); for evidence surfaces on a grid call that function with
    ``method="grid"``. With every hyperparameter fixed, the fit is the
    posterior alone, and the evidence (:func:`bayesvm.log_evidence` with its
    defaults: the same estimators the selection reports at its answer) is
    computed when ``evidence_`` or ``log_evidence_`` is first read: inside
    ``GridSearchCV`` or ``cross_val_score`` no fit pays for an evidence
    nobody reads.

    Parameters
    ----------
    kernel : ``"rbf"``, ``"exponential"``, ``"polynomial"`` or ``"linear"``.
    C : penalty (the likelihood's inverse temperature); None: selected.
    amplitude : kernel amplitude k0; None: selected.
    length_scale : the kernel's shape parameter (RBF / exponential length
        scale, polynomial gamma); None: selected. Must be None for the linear kernel.
    offset : the kernel's constant k_b (the prior variance of the bias);
        None: selected. Can be fixed only together with ``amplitude``.
    posterior : ``"ep"`` (default) or ``"laplace"``: the Gaussian posterior of
        theta(x) behind ``decision_function``, ``predict_proba`` and ``error_bars``
        (module docstring).
    probability : ``"averaged"`` (default, <Q(+1|theta)>/<nu(theta)>),
        ``"map"`` (plug-in at the posterior mean) or ``"simple"`` (<P(+1|theta)>).
    n_inducing : ``"auto"`` (default: the full prior up to 2000 training
        points, a low-rank prior through 200 k-means inducing inputs above),
        None (always the full prior) or a number of inducing inputs (module docstring). The selection on a
        subsample (``selection_size``) decides it for the subsample's rows, the posterior for all rows.
    selection_size : ``"auto"`` (default: select on every row up to 250, on a stratified random subsample of
        250 rows above), None (always every row) or a number of rows
        (:mod:`bayesvm.selection.subsample`). The posterior is fitted on every row.
    random_state : int seed of the tempered-SMC estimates of ln N(D) and of the k-means inducing inputs.
    multiclass : k >= 3 classes only: ``"shared"`` (default: one set of
        hyperparameters for the k one-vs-rest problems, maximising their summed
        evidence) or ``"per_class"`` (each problem selects its own).
    coupling : k >= 3 classes only: how the one-vs-rest probabilities become one
        distribution (:mod:`bayesvm.coupling`): ``"odds"`` (default, a softmax of the
        one-vs-rest log-odds), ``"kl"`` (Zadrozny 2001) or ``"normalize"``.
    ard : one length scale per feature, selected by the evidence; rbf and exponential kernels only
        (``length_scale`` must then be None; ``length_scale_`` is an array of one length scale per feature).
    evidence_budget : a positive number (default 1) scaling the fixed work of every ln N(D) estimate of the fit
        (:class:`bayesvm.normalization.budget.EvidenceBudget`): the fit's cost has a ceiling known before it
        starts. Where the budget runs out before ln N(D)'s runs agree, the fit still returns its answer, with a
        wider error on ln P(D) and a :class:`bayesvm.EvidenceBudgetWarning`; :meth:`certify_evidence` then
        re-estimates ln P(D) at the chosen hyperparameters with more work.
    class_weight : None (default), ``"balanced"`` (class c's rows weigh n / (k n_c)) or a dict class -> weight, as
        in scikit-learn: each row's weight is its class's times its ``sample_weight``. A weight raises the row's
        likelihood term to that power (a weight of 2 is the row twice), so "balanced" fits a model of balanced
        classes: its probabilities move away from the training data's class frequencies, towards equal classes.
    likelihood : ``"hinge"`` (default: the Bayesian SVM, Sollich's normalised hinge likelihood
        kappa(C) exp(-C max(0, 1 - y theta)), evidence ln Q(D) - ln N(D)) or ``"probit"`` (the GP classifier: the
        same prior and kernels with the likelihood Phi(y theta), which is normalised, so its evidence is EP's ln Z
        alone, deterministic; theory: "The GP classifier: a normalised likelihood"). With ``"probit"`` there is no
        C (leave ``C`` None; the amplitude sets how sharp the labels are), the posterior is EP's
        (``posterior="ep"``) on the full prior (``n_inducing`` "auto" or None), ``selection_size`` is as for the
        hinge (the selection's EP with its gradient costs O(n^3) an evaluation, and the same rows make the two
        models' evidences comparable), ``probability`` "averaged" and "simple" are both
        Phi(mean / sqrt(1 + variance)) and "map" Phi(mean), ``evidence_budget`` is not used and ``random_state``
        draws only the subsample. ARD, weights, ``class_weight`` and k classes (one-vs-rest, ``multiclass``,
        ``coupling``) are as for the hinge. Compare the two models on the same data by ``log_evidence_``.
        ``"auto"`` fits both on the same rows and keeps the GP classifier where its evidence lies more than
        :data:`bayesvm.selection.probit.MODEL_CHOICE_MARGIN` nats plus three standard errors above the SVM's, the SVM otherwise (it costs
        both fits; ``C``, ``posterior`` and ``n_inducing`` as for ``"probit"``).

    Attributes
    ----------
    classes_, n_features_in_ : as in scikit-learn.
    C_, amplitude_, offset_, length_scale_ : the hyperparameters used
        (``length_scale_`` is None for kernels without a shape parameter, an (n_features,) array with ``ard=True``),
        ``kernel_`` the kernel; with ``multiclass="per_class"`` and k >= 3 classes, arrays with one entry
        (row) per class and a tuple of k kernels.
    log_evidence_, log_evidence_se_ : ln P(D) and its standard error at them (k >= 3 classes: summed over
        the one-vs-rest problems), of the rows the selection used (``selection_rows_``); ``evidence_`` the full :class:`~bayesvm.evidence.log_evidence.Evidence`
        (terms, ln N(D), ...), for k >= 3 classes a
        :class:`~bayesvm.evidence.log_evidence.OneVsRestEvidence` with one per problem. With every
        hyperparameter fixed, all three are computed when first read, and kept.
    selection_ : the :class:`~bayesvm.selection.search_selection.SearchSelection` (a tuple of k with
        ``multiclass="per_class"``), or None when nothing was selected.
    posterior_ : the posterior used for predictions (k >= 3 classes: a tuple, one per problem).
    inducing_ : the (m, d) inducing inputs of the posterior's low-rank prior, or None (the full prior).
    selection_rows_ : indices of the training rows the selection used (a subsample of the distinct rows, with
        every copy of each), or None (every row).
    fit_ : the MAP SVM at the chosen hyperparameters (None on the low-rank path; k >= 3 classes: a tuple; None with
        ``likelihood="probit"``, which has no SVM).
    support_ : indices of the MAP SVM's support vectors (alpha > 0; rows with equal input and label are one,
        indexed by its first row); ``support_vectors_`` their inputs;
    dual_coef_ : (1, n_SV) alpha_i y_i of the support vectors (y = +1 for ``classes_[1]``);
    marginal_ : indices of the marginal points (0 < alpha < C w_i). All four None on the low-rank path and for
        k >= 3 classes (each problem's are in ``fit_``).

    likelihood_ : the model fitted, ``"hinge"`` or ``"probit"`` (with ``likelihood="auto"`` the one kept);
        ``model_evidences_`` (``"auto"`` only): ln P(D) and its standard error of each model, by name.

    With ``likelihood="probit"``: ``C_``, ``fit_``, ``support_``, ``support_vectors_``, ``dual_coef_`` and
    ``marginal_`` are None (the GP classifier has no C and no SVM); ``evidence_`` is a
    :class:`~bayesvm.evidence.probit.ProbitEvidence` (one for every problem, k >= 3 classes included),
    ``log_evidence_se_`` is 0 (EP is deterministic), ``selection_`` a
    :class:`~bayesvm.selection.probit.ProbitSelection` (a tuple with ``multiclass="per_class"``) and
    ``posterior_`` a :class:`~bayesvm.posterior.ProbitPosterior` (a tuple for k >= 3 classes).
    """

    _parameter_constraints: dict = {
        "kernel": [StrOptions({"rbf", "exponential", "polynomial", "linear"})],
        "C": [Interval(Real, 0, None, closed="neither"), None],
        "amplitude": [Interval(Real, 0, None, closed="neither"), None],
        "length_scale": [Interval(Real, 0, None, closed="neither"), None],
        "offset": [Interval(Real, 0, None, closed="neither"), None],
        "posterior": [StrOptions(set(POSTERIORS))],
        "probability": [StrOptions(set(PROBABILITY_METHODS))],
        "n_inducing": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "multiclass": [StrOptions({"shared", "per_class"})],
        "coupling": [StrOptions(set(COUPLINGS))],
        "ard": ["boolean"],
        "selection_size": [StrOptions({"auto"}), Interval(Integral, 2, None, closed="left"), None],
        "evidence_budget": [Interval(Real, 0, None, closed="neither")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "likelihood": [StrOptions({*LIKELIHOODS, "auto"})],
    }

    def __init__(self, kernel="rbf", C=None, amplitude=None, length_scale=None, offset=None, posterior="ep",
                 probability="averaged", n_inducing="auto", random_state=0, multiclass="shared", coupling="odds",
                 ard=False, selection_size="auto", evidence_budget=1.0, class_weight=None, likelihood="hinge"):
        self.kernel = kernel
        self.C = C
        self.amplitude = amplitude
        self.length_scale = length_scale
        self.offset = offset
        self.posterior = posterior
        self.probability = probability
        self.n_inducing = n_inducing
        self.random_state = random_state
        self.multiclass = multiclass
        self.coupling = coupling
        self.ard = ard
        self.selection_size = selection_size
        self.evidence_budget = evidence_budget
        self.class_weight = class_weight
        self.likelihood = likelihood

    @float64
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Select the free hyperparameters by evidence (or use the fixed ones) and fit the MAP SVM(s).

        ``sample_weight`` (n_samples,): non-negative row weights, each row's likelihood term to that power (a row of
        weight 2 is the row twice, weight 0 a row that is not there), times ``class_weight``'s. Rows with equal
        input and label are one row of their summed weight, so the cost grows with the distinct rows (theory:
        "Weights and repeated rows").
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        # the one validation of the data: every layer below takes it as validated
        data, row = collapse_rows(X, y, sample_weight, self.class_weight)
        self.classes_ = data.classes
        first_row = _first_rows(row)
        template = self._template(X.shape[1])
        shape_name = template.shape_parameter
        if self.likelihood == "auto":
            return self._fit_both(X, y, sample_weight)
        self.likelihood_ = self.likelihood
        if self.likelihood == "probit":
            return self._fit_probit(data, row, template)
        fixed = self._fixed(shape_name)
        seed = self._seed()
        all_fixed = len(fixed) == 3 + (shape_name is not None)
        selected_on, selected = selection_subset(data, self.selection_size, random_state=seed, selects=not all_fixed)
        self.selection_rows_ = None if selected is None else np.flatnonzero(np.isin(row, selected))
        inducing = prior_for(selected_on.X, self.n_inducing, random_state=seed,
                             weights=selected_on.weights).evidence_options.get("inducing")
        self.inducing_ = (inducing if selected is None
                          else prior_for(data.X, self.n_inducing, random_state=seed,
                                         weights=data.weights).evidence_options.get("inducing"))
        if self.inducing_ is not None and self.posterior == "laplace":
            raise ValueError("posterior='laplace' needs the MAP SVM, which the low-rank path does not fit; use "
                             "posterior='ep' or n_inducing=None")
        self._training = (selected_on, inducing, seed)  # what the evidence is computed on
        if all_fixed:
            # every hyperparameter given: the posterior on every row now, the evidence when first read
            kernel = check_kernel(template.replace(amplitude=float(self.amplitude), offset=float(self.offset),
                                                   **({shape_name: float(self.length_scale)} if shape_name else {})),
                                  data.X.shape[1])
            C = check_positive(self.C, "C")
            self._evidence, self.selection_ = None, None
            # on every row, EP to full tolerance as the evidence's own run (the prediction tolerance after a subsample)
            tol = FULL_TOLERANCE if selected is None else PREDICTION_TOLERANCE
            posteriors = list(posteriors_at(data, C, kernel, inducing=self.inducing_, approximation=self.posterior,
                                            tol=tol))
            self._set_fitted(shape_name, posteriors, [kernel] * len(posteriors), [C] * len(posteriors), first_row)
            return self
        # one selection over every class (two classes; k classes with shared hyperparameters), or one per class
        per_class = self.classes_.size > 2 and self.multiclass == "per_class"
        selections = tuple(select_for(problem, template, grid=fixed, random_state=seed, inducing=inducing,
                                      budget=EvidenceBudget(float(self.evidence_budget)))
                           for problem in (selected_on.problems if per_class else (selected_on,)))
        if per_class:
            self._evidence = OneVsRestEvidence(self.classes_, tuple(s.evidence for s in selections),
                                               shared_normalization=False)
            self.selection_ = selections
        else:
            self._evidence, self.selection_ = selections[0].evidence, selections[0]
        problems = self._evidence.problems if isinstance(self._evidence, OneVsRestEvidence) else (self._evidence,)
        kernels = [_with_float_hyperparameters(evidence.posterior.predictor.kernel) if evidence.fit is None
                   else evidence.fit.kernel for evidence in problems]
        penalties = [float(evidence.posterior.C if evidence.fit is None else evidence.fit.C) for evidence in problems]
        if selected is not None:  # selected on a subsample: the posterior of every row
            posteriors = self._posteriors_on(data, penalties, kernels)
        else:
            posteriors = [evidence.posterior if evidence.fit is None or self.posterior == "laplace"
                          else Posterior.from_fit(evidence.fit, "ep", ep=evidence.ep) for evidence in problems]
        self._set_fitted(shape_name, posteriors, kernels, penalties, first_row)
        return self

    def _fit_both(self, X, y, sample_weight) -> "BayesianSVC":
        """``fit`` with ``likelihood="auto"``: both models fitted on the same rows, the probit kept where its evidence
        lies clearly above the hinge's (:data:`bayesvm.selection.probit.MODEL_CHOICE_MARGIN`, beyond three standard errors of the
        difference), the hinge otherwise; both values in ``model_evidences_``."""
        if self.C is not None or self.posterior != "ep" or self.n_inducing not in ("auto", None):
            raise ValueError("likelihood='auto' fits the GP classifier too, which has no C, EP's posterior only and "
                             "the full prior: leave C None, posterior='ep' and n_inducing 'auto' or None")
        fitted = {name: clone(self).set_params(likelihood=name).fit(X, y, sample_weight=sample_weight)
                  for name in LIKELIHOODS}
        evidences = {name: (float(m.log_evidence_), float(m.log_evidence_se_)) for name, m in fitted.items()}
        chosen = fitted["probit" if evidence_prefers_probit(evidences["hinge"], evidences["probit"]) else "hinge"]
        vars(self).update({k: v for k, v in vars(chosen).items() if k not in self.get_params()})
        self.model_evidences_ = evidences
        return self

    def _fit_probit(self, data: TrainingData, row: np.ndarray, template):
        """``fit`` of the GP classifier (``likelihood="probit"``): its kernel hyperparameters selected by its evidence
        (or fixed), the EP posterior of each problem at them, and the evidence from the same EP runs."""
        if self.C is not None:
            raise ValueError("likelihood='probit' has no penalty C (the probit's noise has unit variance; the "
                             "amplitude sets how sharp the labels are): leave C None")
        if self.posterior == "laplace":
            raise ValueError("likelihood='probit' has EP's posterior only; use posterior='ep'")
        if self.n_inducing not in ("auto", None):
            raise ValueError("likelihood='probit' computes on the full prior: leave n_inducing 'auto' or None")
        shape_name = template.shape_parameter
        fixed = self._fixed(shape_name)
        all_fixed = len(fixed) == 2 + (shape_name is not None)
        selected_on, selected = selection_subset(data, self.selection_size, random_state=self._seed(),
                                                 selects=not all_fixed)
        self.selection_rows_ = None if selected is None else np.flatnonzero(np.isin(row, selected))
        self.inducing_ = None
        self._training = (selected_on, None, self._seed())
        per_class = self.classes_.size > 2 and self.multiclass == "per_class"
        if all_fixed:
            kernel = check_kernel(template.replace(amplitude=float(self.amplitude), offset=float(self.offset),
                                                   **({shape_name: float(self.length_scale)} if shape_name else {})),
                                  data.X.shape[1])
            self.selection_ = None
            self._evidence = probit_evidence(selected_on, kernel)
            kernels = [kernel] * data.Y.shape[0]
        else:
            selections = tuple(select_probit(problem, template, fixed=fixed)
                               for problem in (selected_on.problems if per_class else (selected_on,)))
            self.selection_ = selections if per_class else selections[0]
            self._evidence = (ProbitEvidence.joined(s.evidence for s in selections) if per_class
                              else selections[0].evidence)
            kernels = ([s.kernel for s in selections] if per_class else [selections[0].kernel] * data.Y.shape[0])
        if selected is None:  # the evidence's own EP runs are the posterior
            posteriors = list(self._evidence.posteriors)
        elif per_class:
            posteriors = [probit_posteriors(problem, kernel, tol=PREDICTION_TOLERANCE)[0]
                          for problem, kernel in zip(data.problems, kernels)]
        else:
            posteriors = list(probit_posteriors(data, kernels[0], tol=PREDICTION_TOLERANCE))
        self._set_fitted(shape_name, posteriors, kernels, [None] * len(kernels), _first_rows(row))
        self.C_ = self.fit_ = None  # the GP classifier has no C and fits no MAP SVM
        return self

    @property
    @float64
    def evidence_(self):
        """The :class:`~bayesvm.evidence.log_evidence.Evidence` at the fitted hyperparameters (k >= 3 classes: a
        :class:`~bayesvm.evidence.log_evidence.OneVsRestEvidence`), on the rows the selection used. With every
        hyperparameter fixed, computed when first read (:func:`bayesvm.log_evidence` with its defaults and the
        estimator's seed and ``evidence_budget``) and kept; the fit itself then costs only the posterior."""
        if "_evidence" not in self.__dict__:
            raise AttributeError("evidence_ is set by fit: this BayesianSVC is not fitted yet")
        if self._evidence is None:
            self._evidence = self._fixed_evidence()
        return self._evidence

    @property
    def log_evidence_(self) -> float:
        """ln P(D) at the fitted hyperparameters (``evidence_.total``)."""
        return float(self.evidence_.total)

    @property
    def log_evidence_se_(self) -> float:
        """The standard error of ``log_evidence_`` (``evidence_.total_se``)."""
        return float(self.evidence_.total_se)

    def _fixed_evidence(self):
        """The evidence at the fixed hyperparameters: one shared ln N(D), or one per problem with per-class ones."""
        data, inducing, seed = self._training
        budget = EvidenceBudget(float(self.evidence_budget))
        kernels = self.kernel_ if isinstance(self.kernel_, tuple) else (self.kernel_,)
        if len(kernels) > 1:
            return OneVsRestEvidence(self.classes_, tuple(
                one_vs_rest_evidence(problem, float(C), kernel, random_state=seed, inducing=inducing,
                                     budget=budget).problems[0]
                for problem, C, kernel in zip(data.problems, self.C_, kernels)), shared_normalization=False)
        evidence = one_vs_rest_evidence(data, float(self.C_), kernels[0], random_state=seed, inducing=inducing,
                                        budget=budget)
        return evidence.problems[0] if len(evidence.problems) == 1 else evidence

    @float64
    def certify_evidence(self, budget: float = 4.0):
        """Re-estimate ln P(D) at the fitted hyperparameters with ``budget`` times the fit's ln N(D) work, and keep it.

        A fresh tempered-SMC ln N(D) (new random numbers: the seed folded with the budget) at
        ``budget * evidence_budget`` (:class:`bayesvm.normalization.budget.EvidenceBudget`), and EP's ln Q(D) at full
        tolerance, on the rows the selection used. Replaces ``evidence_``, ``log_evidence_`` and
        ``log_evidence_se_``; the hyperparameters and the posterior stay as they are. Warns with
        :class:`bayesvm.EvidenceBudgetWarning` where even this budget leaves the runs disagreeing. Returns the new
        evidence. Not for ``multiclass="per_class"`` (one evidence per class: fit each class's problem on its own).
        """
        check_is_fitted(self)
        if not (isinstance(budget, Real) and np.isfinite(budget) and budget > 0):
            raise ValueError(f"budget must be a positive number (a multiple of the fit's ln N(D) work); got {budget!r}")
        if self.likelihood_ == "probit":  # EP's value, deterministic: no sampled term to estimate again
            return self.evidence_
        if isinstance(self.kernel_, tuple):
            raise ValueError("certify_evidence needs one shared ln N(D); with multiclass='per_class' each class has its "
                             "own: fit BayesianSVC on each one-vs-rest problem to certify it")
        data, inducing, seed = self._training
        seed = hash((seed, float(budget))) % (2**31 - 1)  # numbers hash the same in every process
        evidence = one_vs_rest_evidence(data, float(self.C_), self.kernel_, random_state=seed, inducing=inducing,
                                        budget=EvidenceBudget(float(budget) * float(self.evidence_budget)))
        self._evidence = evidence.problems[0] if len(evidence.problems) == 1 else evidence
        return self._evidence

    def _seed(self) -> int:
        if isinstance(self.random_state, (int, np.integer)):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(2**31 - 1))

    def _template(self, n_features: int):
        """The kernel family, with one length scale per feature when ``ard=True``."""
        template = make_kernel(self.kernel)
        if not self.ard:
            return template
        if template.shape_parameter != "length_scale":
            raise ValueError(f"ard=True selects one length scale per feature: it needs the 'rbf' or 'exponential' "
                             f"kernel; got kernel={self.kernel!r}")
        if self.length_scale is not None:
            raise ValueError("ard=True selects every feature's length scale; leave length_scale None")
        return template.replace(length_scale=np.ones(n_features))

    def _fixed(self, shape_name) -> dict:
        """The fixed hyperparameters, in the selection's names: C, C_k0 (the probit, which has no C: amplitude),
        offset_ratio, the shape parameter."""
        if self.offset is not None and self.amplitude is None:
            raise ValueError("offset can only be fixed together with amplitude (the search is over k_b / k0)")
        if self.length_scale is not None and shape_name is None:
            raise ValueError(f"the {self.kernel!r} kernel has no shape parameter; leave length_scale None")
        fixed = {}
        if self.C is not None:
            fixed["C"] = float(self.C)
        if self.amplitude is not None and self.likelihood == "probit":
            fixed["amplitude"] = float(self.amplitude)
        elif self.amplitude is not None:
            if self.C is None:
                raise ValueError("amplitude can only be fixed together with C (the search fixes it as C k0)")
            fixed["C_k0"] = float(self.C) * float(self.amplitude)
        if self.offset is not None:
            fixed["offset_ratio"] = float(self.offset) / float(self.amplitude)
        if self.length_scale is not None:
            fixed[shape_name] = float(self.length_scale)
        return fixed

    @float64
    def log_marginal_likelihood(self, theta=None) -> float:
        """ln P(D) of the training rows the selection used (``selection_rows_``; every row when it is None) at log
        hyperparameters ``theta`` (default: the fitted ones).

        ``theta`` = (ln C, ln amplitude, ln(offset / amplitude), ln shape) as in
        :data:`bayesvm.hyperparameters.COORDINATES` (the shape entry is ignored
        for the linear kernel; with ``ard=True`` one ln length scale per feature
        in its place, :func:`bayesvm.hyperparameters.coordinate_names`); the estimators are
        :func:`bayesvm.log_evidence`'s defaults, with the fitted estimator's seed; k >= 3 classes: the summed
        evidence of the one-vs-rest problems at the same ``theta``
        (:func:`bayesvm.evidence.log_evidence.log_evidence_one_vs_rest`). Like scikit-learn's
        ``GaussianProcessClassifier.log_marginal_likelihood``. With ``likelihood="probit"`` ``theta`` has no ln C:
        (ln amplitude, ln(offset / amplitude), ln shape), and the value is EP's (:func:`bayesvm.probit_log_evidence`).
        """
        check_is_fitted(self)
        if theta is None:
            return self.log_evidence_
        theta = np.asarray(theta, dtype=np.float64)
        template = self._template(self.n_features_in_)
        if self.likelihood_ == "probit":  # no C: theta starts at ln amplitude
            names = coordinate_names(template)[1:]
            if theta.shape != (len(names),) or not np.all(np.isfinite(theta)):
                raise ValueError(f"theta must be {len(names)} finite log hyperparameters {names}; got "
                                 f"{theta.tolist()}")
            x = np.concatenate([[0.0], theta])
            kernel = check_kernel(template.replace(**kernel_hyperparameters_at(template, x)), self.n_features_in_)
            return probit_evidence(self._training[0], kernel).total
        names = coordinate_names(template)
        if theta.shape != (len(names),) or not np.all(np.isfinite(theta)):
            raise ValueError(f"theta must be {len(names)} finite log hyperparameters {names}; got {theta.tolist()}")
        kernel = check_kernel(template.replace(**kernel_hyperparameters_at(template, theta)), self.n_features_in_)
        data, inducing, seed = self._training
        return one_vs_rest_evidence(data, float(np.exp(theta[0])), kernel, random_state=seed,
                                    inducing=inducing, budget=EvidenceBudget(float(self.evidence_budget))).total

    def _set_fitted(self, shape_name, posteriors: list, kernels: list, penalties: list,
                    first_row: np.ndarray) -> None:
        """The fitted attributes from each problem's posterior on every row and its hyperparameters; ``first_row``:
        each collapsed row's first training row, what ``support_`` and ``marginal_`` index."""
        fits = [posterior.fit if isinstance(posterior, Posterior) else None for posterior in posteriors]
        self.fit_ = fits[0] if len(posteriors) == 1 else tuple(fits)
        self.posterior_ = posteriors[0] if len(posteriors) == 1 else tuple(posteriors)
        fit = self.fit_
        if len(posteriors) > 1 or fit is None:
            self.support_ = self.support_vectors_ = self.dual_coef_ = self.marginal_ = None
        else:
            support = fit.support[np.argsort(first_row[fit.support])]  # in the order of the training rows
            self.support_ = first_row[support]
            self.support_vectors_ = fit.X[support]
            self.dual_coef_ = (fit.alpha[support] * fit.y[support])[None, :]
            self.marginal_ = np.sort(first_row[np.flatnonzero(fit.marginal)])
        per_class = self.classes_.size > 2 and self.multiclass == "per_class"
        self.kernel_ = tuple(kernels) if per_class else kernels[0]

        def value(values):  # one value, or one per class where each class chose its own
            return np.array(values) if per_class else values[0]

        self.C_ = value(penalties)
        self.amplitude_ = value([float(kernel.amplitude) for kernel in kernels])
        self.offset_ = value([float(kernel.offset) for kernel in kernels])
        shapes = [] if shape_name is None else [np.asarray(getattr(k, shape_name), dtype=np.float64) for k in kernels]
        self.length_scale_ = None if shape_name is None else value(shapes if self.ard else [float(v) for v in shapes])

    def _posteriors_on(self, data: TrainingData, penalties: list, kernels: list) -> list:
        """The EP posterior of every problem on all training rows at the selected hyperparameters (one run for
        every problem where they are shared)."""
        options = {"inducing": self.inducing_, "approximation": self.posterior}
        if not isinstance(self.selection_, tuple):  # one set of hyperparameters for every problem
            return list(posteriors_at(data, penalties[0], kernels[0], **options))
        return [posteriors_at(problem, C, kernel, **options)[0]
                for problem, C, kernel in zip(data.problems, penalties, kernels)]

    def _one_vs_rest(self) -> bool:
        check_is_fitted(self)
        return self.classes_.size > 2

    def _inputs(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64)

    @float64
    def decision_function(self, X) -> np.ndarray:
        """Two classes: the posterior mean of theta(x) (positive for ``classes_[1]``; with ``posterior="laplace"``
        the SVM output theta*(x)). k >= 3 classes: (n_samples, k) coupled class log-probabilities ln P(c | x)."""
        X = self._inputs(X)
        if self._one_vs_rest():
            return np.log(self._coupled_proba(X))
        return self.posterior_.latent(X)[0]

    @float64
    def predict(self, X) -> np.ndarray:
        if self._one_vs_rest():
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        theta = self.decision_function(X)
        return self.classes_[(theta >= 0).astype(int)]

    @float64
    def predict_proba(self, X) -> np.ndarray:
        """(n_samples, k) class probabilities by the ``probability`` method; two classes: >= 1/2 for the predicted
        class; k >= 3: the one-vs-rest probabilities coupled by ``coupling`` (:mod:`bayesvm.coupling`)."""
        X = self._inputs(X)
        if self._one_vs_rest():
            return self._coupled_proba(X)
        p = self.posterior_.predict_proba(X, method=self.probability)
        return np.column_stack([1.0 - p, p])

    def _coupled_proba(self, X) -> np.ndarray:
        r = np.column_stack([posterior.predict_proba(X, method=self.probability) for posterior in self.posterior_])
        return couple_one_vs_rest(r, self.coupling)

    @float64
    def predict_log_proba(self, X) -> np.ndarray:
        return np.log(self.predict_proba(X))

    @float64
    def error_bars(self, X) -> ErrorBars:
        """The posterior mean of theta(x), its standard deviation sigma(x), and P(classes_[1]) at mean -+ sigma.

        k >= 3 classes: each field is (n_samples, k), column c for class ``classes_[c]`` against the rest."""
        X = self._inputs(X)
        if self._one_vs_rest():
            bars = [posterior.error_bars(X) for posterior in self.posterior_]
            return ErrorBars(*(np.column_stack(column) for column in zip(*bars)))
        return self.posterior_.error_bars(X)


def _first_rows(row: np.ndarray) -> np.ndarray:
    """Each collapsed row's first training row, from ``row`` (training row -> collapsed row, -1 where dropped)."""
    collapsed, first = np.unique(row, return_index=True)
    return first[collapsed >= 0]


def _with_float_hyperparameters(kernel):
    """The kernel with its continuous hyperparameters as Python floats (the predictor holds JAX scalars)."""
    return kernel.replace(**{name: float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)
                             for name, value in kernel.hyperparameters.items() if not isinstance(value, (int, str))})
