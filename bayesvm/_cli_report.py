"""Output of the ``bayesvm`` command: text tables, reports, warnings, progress bars, figures and JSON files."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .exceptions import ConvergenceWarning


def table(rows: list[tuple[str, str]]) -> str:
    """Two aligned columns (name, value), indented by two spaces."""
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)


class ProgressBar:
    """The progress of a selection as a tqdm bar on stderr, fed by the selection's ``progress(done, total)``.

    On a terminal it is tqdm's usual bar, redrawn in place. In a log (stderr not a terminal)
    it writes a line at the start, at most one every ``log_interval`` seconds, and one at the
    end, each on its own line. ``quiet``: nothing at all. Work of one step (``total <= 1``)
    shows no bar.
    """

    def __init__(self, label: str, *, quiet: bool = False, stream=None, log_interval: float = 30.0):
        self.label, self.quiet, self.log_interval = label, quiet, log_interval
        self.stream = sys.stderr if stream is None else stream
        self._bar = None

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or total <= 1:
            return
        if self._bar is None or self._bar.total != total:
            self.close()
            terminal = self.stream.isatty()
            self._bar = tqdm(total=total, desc=self.label, file=self.stream if terminal else _Lines(self.stream),
                             mininterval=0.1 if terminal else self.log_interval, ascii=not terminal,
                             dynamic_ncols=terminal, leave=True)
        self._bar.update(min(done, total) - self._bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class _Lines:
    """A stream for tqdm in a log: each redraw (tqdm starts it with a carriage return) becomes its own line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.rstrip(" ").replace("\r", "\n").lstrip("\n")
        if text.strip():
            self.stream.write(text if text.endswith("\n") else text + "\n")

    def flush(self) -> None:
        self.stream.flush()


@contextmanager
def recorded_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record every warning raised inside the block (none is shown): print them later with :func:`print_warnings`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def print_warnings(caught) -> None:
    """Each distinct warning message once, on stderr, in the order first raised."""
    seen = []
    for warning in caught:
        message = str(warning.message)
        if message not in seen:
            seen.append(message)
    for message in seen:
        print(f"warning: {message}", file=sys.stderr)


def write_json(path: str, payload: dict) -> None:
    """Write ``payload`` as JSON to ``path`` and say so."""
    Path(path).write_text(json.dumps(payload, indent=1))
    print(f"result written to {path}")


def select_report(surface, X, y, source: str, elapsed: float, weights=None) -> str:
    """The data, the selected hyperparameters, the evidence at the optimum and a training-set summary.

    ``weights``: the rows' sample weights (None: every row 1); the class totals and the accuracy are then weighted,
    as on the data with every row repeated as many times as its weight."""
    best, ev = surface.best, surface.evidence
    labels = np.asarray(y)
    classes = np.unique(labels)
    one_vs_rest = classes.size > 2
    w = np.ones(labels.size) if weights is None else np.asarray(weights, dtype=float)
    total = {c: float(np.sum(w[labels == c])) for c in classes}
    if one_vs_rest:
        counts = ", ".join(f"{c} ({_count(total[c])})" for c in classes)
        accuracy = _accuracy(classes[np.argmax(_coupled_probabilities(ev, X), axis=1)], labels, w)
        evidence_rows = [_class_evidence_table(ev)]
        fit_rows = [("support vectors", " / ".join(str(p.fit.support.size) for p in ev.problems)
                     + f" of {_fitted_rows(ev.problems[0].fit, X)} (per class)") if ev.problems[0].fit is not None
                    else ("inducing inputs", f"{ev.problems[0].low_rank.n_inducing} (low-rank prior)")]
    else:
        counts = (", ".join(f"{c} (+1)" if i else f"{c} (-1)" for i, c in enumerate(classes))
                  + f"; {_count(total[classes[1]])} / {_count(total[classes[0]])}")
        accuracy = _accuracy(_predicted_labels(ev, X, classes), labels, w)
        evidence_rows = [ev.summary()]
        fit_rows = ([("support vectors", f"{ev.fit.support.size} of {_fitted_rows(ev.fit, X)}"),
                     ("marginal points", f"{ev.n_marginal}")]
                    if ev.fit is not None else [("inducing inputs", f"{ev.low_rank.n_inducing} (low-rank prior)")])
    hyper = [("C", f"{best['C']:.4g}"), ("amplitude k0", f"{best['amplitude']:.4g}"),
             ("offset k_b", f"{best['offset']:.4g}"), ("C k0", f"{best['C_k0']:.4g}")]
    if surface.shape_name is not None:
        shape = np.atleast_1d(best[surface.shape_name])
        name = surface.shape_name if shape.size == 1 else f"{surface.shape_name} per feature"
        hyper.insert(2, (name, ", ".join(f"{v:.4g}" for v in shape)))
    lines = [
        f"data: {source}",
        f"  {X.shape[0]} points, {X.shape[1]} features; classes {counts}"
        + ("" if weights is None else f" (summed row weights; total {_count(float(np.sum(w)))})"),
        "",
        f"selected hyperparameters ({surface.kernel_name} kernel, by evidence: {_how_selected(surface)})",
        table(hyper),
        "",
        f"evidence at the optimum: ln P(D) = {ev.total:.3f} +- {ev.total_se:.3f}"
        + (f" (summed over {classes.size} one-vs-rest problems)" if one_vs_rest else ""),
        *evidence_rows,
        "",
        "training set",
        table([
            ("accuracy" if weights is None else "accuracy (weighted)", f"{accuracy:.4f}"),
            *fit_rows,
            *(_search_rows(surface) if surface.method == "search" else _grid_rows(surface)),
            ("time", f"{elapsed:.1f} s"),
        ]),
    ]
    return "\n".join(lines)


def _count(value: float) -> str:
    """A number of rows or a summed weight: an integer as one, other values to four significant digits."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def _accuracy(predicted, labels, weights) -> float:
    """The (weighted) share of rows predicted right; rows of weight 0 take no part."""
    return float(np.sum(weights * (predicted == labels)) / np.sum(weights))


def _fitted_rows(fit, X) -> str:
    """The rows the MAP SVM was fitted on: the input rows, or the distinct rows equal rows were merged into."""
    n = np.asarray(fit.X).shape[0]
    return f"{n}" if n == X.shape[0] else f"{n} distinct rows"


def _class_evidence_table(evidence) -> str:
    """Each one-vs-rest problem's ln Q(D), ln P(D) and EP's convergence, and the one shared ln N(D)."""
    rows = [(f"class {c!s} against the rest", f"ln Q(D) {p.naive:10.3f}   ln P(D) {p.total:10.3f}"
             + ("" if p.naive_converged else "   (EP did not converge)"))
            for c, p in zip(evidence.classes, evidence.problems)]
    shared = evidence.problems[0]
    rows.append(("ln N(D) (shared, tempered SMC)", f"{shared.log_normalization:.3f} +- {shared.log_normalization_se:.3f}"))
    return table(rows)


def _coupled_probabilities(evidence, X) -> np.ndarray:
    """(n, k) class probabilities of k one-vs-rest problems: EP's posterior-averaged ones, coupled as BayesianSVC."""
    from .coupling import couple_one_vs_rest

    return couple_one_vs_rest(np.column_stack([_posterior_probability(p, X) for p in evidence.problems]))


def _posterior_probability(evidence, X) -> np.ndarray:
    """P(+1) at X by EP's posterior-averaged probability, what BayesianSVC predicts by default."""
    from .posterior import Posterior

    posterior = evidence.low_rank if evidence.fit is None else Posterior.from_fit(evidence.fit, "ep")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return np.asarray(posterior.predict_proba(X))


def _predicted_labels(evidence, X, classes) -> np.ndarray:
    """The training-set labels the selected model predicts: the MAP SVM's, or the low-rank posterior's."""
    if evidence.fit is not None:
        return evidence.fit.predict(X)
    return np.where(_posterior_probability(evidence, X) >= 0.5, classes[1], classes[0])


def _how_selected(selection) -> str:
    """How the evidence was maximised and computed."""
    if selection.method == "search":
        return "quasi-Newton ascent; EP for ln Q(D), tempered SMC for ln N(D)"
    return f"grid, {selection.approximation} / {selection.normalization}"


def _search_rows(selection) -> list[tuple[str, str]]:
    work, report = selection.summary_counts(), selection.report
    checks = "passed" if report.trusted else "FAILED (see the warnings)"
    return [
        ("search", f"{work['starts']} starts, {work['evaluations']} evaluations, {work['ep_sweeps']} EP sweeps, "
                   f"{work['factorizations']} factorisations, {work['anchors']} tempered-SMC anchors "
                   f"({work['normalization_evaluations_search']:,} likelihood evaluations; the checks "
                   f"{work['normalization_evaluations_check']:,})"
                   + (f", {work['refinements']} refinements of its ln N(D) path" if work["refinements"] else "")),
        ("search's ln N(D) at the answer", f"{report.search_log_normalization:.3f} (fresh tempered SMC: "
                                           f"{report.reference_log_normalization:.3f} +- {report.reference_se:.3f})"),
        ("checks at the answer", checks),
        ("time per phase", f"search {work['seconds_search']:.1f} s, checks {work['seconds_check']:.1f} s"),
    ] + [(f"climb {i}" if message.startswith("refined") else f"start {i}", message)
         for i, message in enumerate(selection.search.messages)
         if message.startswith(("start moved", "skipped", "refined"))]


def _grid_rows(surface) -> list[tuple[str, str]]:
    grid_points = int(np.prod(surface.grid.shape_of_surface))
    return [
        ("grid", f"{' x '.join(map(str, surface.grid.shape_of_surface))} = {grid_points} points "
                 "(shape x k_b/k0 x C k0 x C)"),
        ("grid extensions", ", ".join(f"{a} {s}" for a, s in surface.extensions) or "none"),
        ("optimum on grid edge", ", ".join(surface.at_edge) or "no"),
    ]


def held_out_report(surface, X_test, y_test, classes) -> str:
    """Scores of the selected model on held-out points: EP's posterior-averaged probabilities (as BayesianSVC);
    for k >= 3 classes coupled over the one-vs-rest problems, the NLL and Brier score of the k-class distribution."""
    from .metrics import brier_score, error_rate, expected_calibration_error, negative_log_likelihood

    if classes.size > 2:
        P = _coupled_probabilities(surface.evidence, X_test)
        observed = np.searchsorted(classes, y_test)
        targets = np.eye(classes.size)[observed]
        rows = [
            ("error", f"{np.mean(classes[np.argmax(P, axis=1)] != y_test):.4f}"),
            ("negative log-likelihood",
             f"{-np.mean(np.log(np.clip(P[np.arange(P.shape[0]), observed], np.finfo(float).eps, 1.0))):.4f}"),
            ("Brier score (summed over classes)", f"{np.mean(np.sum((P - targets) ** 2, axis=1)):.4f}"),
        ]
        how = "EP posterior-averaged one-vs-rest probabilities, coupled as BayesianSVC does"
    else:
        p = _posterior_probability(surface.evidence, X_test)
        prediction = np.where(p >= 0.5, classes[1], classes[0])
        rows = [
            ("error", f"{error_rate(y_test, prediction):.4f}"),
            ("negative log-likelihood", f"{negative_log_likelihood(y_test, p):.4f}"),
            ("Brier score", f"{brier_score(y_test, p):.4f}"),
            ("ECE (10 bins)", f"{expected_calibration_error(y_test, p):.4f}"),
        ]
        how = "EP posterior-averaged probabilities"
    return "\n".join(["", f"held-out points ({len(y_test)}; {how})", table(rows)])


def cv_report(surface, cv_surface, elapsed: float, folds: int) -> str:
    """The CV choice and the CV error at it and at the evidence choice (its nearest grid cell, in log coordinates)."""
    best = surface.best
    nearest = []
    for name, key in (("shape", surface.shape_name), ("offset_ratio", "offset_ratio"), ("C_k0", "C_k0")):
        axis = getattr(cv_surface.grid, name)
        value = best[key] if key is not None else axis[0]
        nearest.append(int(np.argmin(np.abs(np.log(axis) - np.log(value)))) if key is not None else 0)
    error_at_evidence = float(cv_surface.cv_error[(*nearest, 0)])
    rows = [("CV choice: C k0", f"{cv_surface.best['C_k0']:.4g}")]
    if surface.shape_name is not None:
        rows.append((f"CV choice: {surface.shape_name}", f"{cv_surface.best[surface.shape_name]:.4g}"))
    rows += [
        ("CV choice: k_b / k0", f"{cv_surface.best['offset_ratio']:.4g}"),
        (f"{folds}-fold CV error at CV choice", f"{-cv_surface.best_value:.4f}"),
        (f"{folds}-fold CV error at evidence choice", f"{error_at_evidence:.4f} (nearest grid cell)"),
        ("CV time", f"{elapsed:.1f} s"),
    ]
    return "\ncross-validation on the same grid (C and k0 enter only as C k0)\n" + table(rows)


def model_comparison_report(surface, gpc, elapsed: float) -> str:
    """The Bayesian SVM's and the GP classifier's ln P(D) on the same rows, and the model the evidence prefers
    (:func:`bayesvm.selection.probit.evidence_prefers_probit`)."""
    from .selection.probit import MODEL_CHOICE_MARGIN, evidence_prefers_probit

    hinge = (float(surface.best_value), float(surface.best_se))
    probit = (float(gpc.log_evidence), 0.0)
    prefers = evidence_prefers_probit(hinge, probit)
    rows = [("Bayesian SVM (hinge)", f"ln P(D) {hinge[0]:.3f} +- {hinge[1]:.3f}"),
            ("GP classifier (probit)", f"ln P(D) {probit[0]:.3f} (EP{'' if gpc.trusted else ', not converged'}; "
                                       f"{elapsed:.1f} s)"),
            ("the evidence prefers", "the GP classifier" if prefers else
             f"the Bayesian SVM (the GP classifier's lead is under {MODEL_CHOICE_MARGIN:g} nat plus three standard "
             "errors)" if probit[0] > hinge[0] else "the Bayesian SVM")]
    return "\nmodel comparison on the same rows (BayesianSVC(likelihood='auto') keeps the preferred model)\n" + table(rows)


def save_surface_figures(surface, path: str) -> None:
    """The evidence curve and heat map of a grid selection, side by side, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.6), layout="constrained")
    surface.plot_curve(ax=left)
    surface.plot_heatmap(ax=right)
    figure.savefig(path, dpi=110)
    plt.close(figure)

