"""The result of a grid or cross-validation selection: the surface, its JSON form and its figures."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._json import finite_or_none, nan_to_none
from ..evidence.log_evidence import Evidence
from .grid import AXES, Grid
from ..kernels import Kernel

__all__ = ["EvidenceSurface"]


@dataclass(frozen=True, eq=False)
class EvidenceSurface:
    """The result of :func:`~bayesvm.selection.select.select_hyperparameters`.

    Arrays are indexed ``[shape, offset_ratio, C_k0, C]`` (see :data:`AXES`).
    For ``method="grid"``: ``naive`` ln Q(D), ``log_normalization``
    ln N(D), ``total`` ln P(D) with their standard errors, the effective
    sample size of the normalisation and the marginal counts. For
    ``method="cv"``: ``cv_error`` (the k-fold error rate; the C axis is the
    single value 1, since the MAP solution depends on C and k0 only through
    C k0, cross-validation cannot separate them).

    ``index`` is the argmax of the stored criterion; ``best`` the selected
    hyperparameters after refinement (``C``, ``amplitude``, ``offset`` and the
    shape parameter), ``best_value``/``best_se`` the criterion there,
    ``evidence`` the full :class:`~bayesvm.evidence.log_evidence.Evidence` at the optimum
    (evidence method), ``refinement`` the points the local search visited,
    ``extensions`` the grid extensions made and ``at_edge`` the axes on whose
    edge the optimum still lies, ``checks`` the full annealed checks of the
    surface's ln N(D) (:class:`bayesvm.selection.grid_checks.NormalizationCheck`; the surface carries the
    annealed value where a check disagreed, NaN where it was unreliable).
    """

    method: str
    kernel_name: str
    shape_name: str | None
    grid: Grid
    index: tuple[int, ...]
    best: dict
    best_value: float
    best_se: float
    best_kernel: Kernel
    naive: np.ndarray | None = None
    naive_se: np.ndarray | None = None
    log_normalization: np.ndarray | None = None
    log_normalization_se: np.ndarray | None = None
    normalization_ess: np.ndarray | None = None
    n_marginal: np.ndarray | None = None
    cv_error: np.ndarray | None = None
    evidence: Evidence | None = None
    approximation: str | None = None
    normalization: str | None = None
    refinement: tuple[dict, ...] = ()
    extensions: tuple[tuple[str, str], ...] = ()
    at_edge: tuple[str, ...] = ()
    checks: tuple = ()

    @property
    def total(self) -> np.ndarray | None:
        return None if self.naive is None else self.naive - self.log_normalization

    @property
    def total_se(self) -> np.ndarray | None:
        return None if self.naive is None else np.hypot(self.naive_se, self.log_normalization_se)

    @property
    def values(self) -> np.ndarray:
        """The criterion maximised: ln P(D), or minus the CV error rate."""
        return self.total if self.method == "grid" else -self.cv_error

    @property
    def best_C(self) -> float:
        return float(self.best["C"])

    def plot_curve(self, *, true_C: float | None = None, ax=None):
        """ln Q(D), ln N(D) and ln P(D) against C on the line of the optimum (Sollich 2002, Fig. 2)."""
        if self.method != "grid":
            raise ValueError("plot_curve needs an evidence surface; the CV error does not depend on C at fixed C k0")
        from ..plotting import plot_evidence_curve

        i, j, k, _ = self.index
        line = (i, j, k, slice(None))
        return plot_evidence_curve(
            self.grid.C,
            self.naive[line],
            self.log_normalization[line],
            self.total[line],
            se_naive=self.naive_se[line],
            se_normalization=self.log_normalization_se[line],
            se_total=self.total_se[line],
            true_C=true_C,
            ax=ax,
        )

    def plot_heatmap(self, *, ax=None):
        """The criterion over (C k0, shape parameter), maximised over the other axes."""
        from ..plotting import plot_evidence_heatmap

        profile = np.max(np.where(np.isfinite(self.values), self.values, -np.inf), axis=(1, 3))
        profile = np.where(np.isfinite(profile), profile, np.nan)
        label = "ln P(D), max over C and k_b/k0" if self.method == "grid" else "-(CV error rate)"
        if self.shape_name is None:
            return plot_evidence_heatmap(
                self.grid.C_k0, self.grid.offset_ratio, np.max(self.values, axis=(0, 3)),
                x_label="C k0", y_label="k_b / k0", log_x=True, log_y=True, colorbar_label=label, ax=ax,
            )
        return plot_evidence_heatmap(
            self.grid.C_k0, self.grid.shape, profile,
            x_label="C k0", y_label=self.shape_name, log_x=True, log_y=True, colorbar_label=label, ax=ax,
        )

    def to_dict(self) -> dict:
        """Everything as plain JSON-serialisable Python (lists, floats, strings; NaN/inf become None)."""

        def plain(value):
            if value is None:
                return None
            array = np.asarray(value, dtype=np.float64)
            return np.where(np.isfinite(array), array, np.nan).tolist() if array.ndim else finite_or_none(array)

        out = {
            "method": self.method,
            "kernel": self.kernel_name,
            "shape_name": self.shape_name,
            "approximation": self.approximation,
            "normalization": self.normalization,
            "axes": {name: plain(axis) for name, axis in zip(AXES, self.grid.axes)},
            "index": list(self.index),
            "best": {key: finite_or_none(value) for key, value in self.best.items()},
            "best_value": finite_or_none(self.best_value),
            "best_se": finite_or_none(self.best_se),
            "refinement": [{key: finite_or_none(v) for key, v in point.items()} for point in self.refinement],
            "extensions": [list(e) for e in self.extensions],
            "at_edge": list(self.at_edge),
            "checks": [{**c._asdict(), "point": dict(c.point)} for c in self.checks],
        }
        for name in ("naive", "naive_se", "log_normalization", "log_normalization_se", "normalization_ess",
                     "total", "total_se", "n_marginal", "cv_error"):
            out[name] = nan_to_none(plain(getattr(self, name)))
        if self.evidence is not None:
            ev = self.evidence
            out["evidence"] = {
                "total": ev.total, "total_se": ev.total_se, "naive": ev.naive,
                "log_normalization": ev.log_normalization, "log_normalization_se": ev.log_normalization_se,
                "normalization_ess": ev.normalization_ess, "n_marginal": ev.n_marginal, "n": ev.n,
                "terms": None if ev.terms is None else {name: float(getattr(ev.terms, name)) for name in ev.terms._fields},
            }
        return out
