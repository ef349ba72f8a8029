"""Figures for the Bayesian reading of the SVM (matplotlib only).

Every function draws on plain arrays or bayesvm kernels, returns the
:class:`~matplotlib.figure.Figure` it drew on (the figure of ``ax`` when an
Axes is passed in) and never calls ``plt.show()``; all of them work with the
non-interactive Agg backend. New figures use constrained layout.

* :func:`plot_prior_sample`, :func:`plot_prior_grid`,
  :func:`plot_prior_functions_1d` -- samples of the GP prior and the label
  distribution they induce (Sollich 2002, Fig. 1).
* :func:`plot_evidence_curve`, :func:`plot_evidence_heatmap` -- the evidence
  and its two terms along C, and evidence surfaces (Sollich 2002, Fig. 2).
* :func:`plot_probability_1d`, :func:`plot_probability_2d` -- predictive
  class probabilities with error bars (Sollich 2002, Fig. 2).
* :func:`plot_reliability` -- reliability diagrams of several calibrators.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ._evidence import plot_evidence_curve, plot_evidence_heatmap
from ._prior import (
    label_grey_level,
    plot_prior_functions_1d,
    plot_prior_grid,
    plot_prior_sample,
    sample_prior,
    unit_square_grid,
)
from ._probability import plot_probability_1d, plot_probability_2d
from ._reliability import plot_reliability

__all__ = [
    "label_grey_level",
    "plot_evidence_curve",
    "plot_evidence_heatmap",
    "plot_prior_functions_1d",
    "plot_prior_grid",
    "plot_prior_sample",
    "plot_probability_1d",
    "plot_probability_2d",
    "plot_reliability",
    "sample_prior",
    "save_figure",
    "unit_square_grid",
]


def save_figure(fig: Figure, path, *, dpi: int = 90) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix), close it, and return the path."""
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
