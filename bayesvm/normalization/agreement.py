"""When two estimates agree within their errors, and when one lies clearly above another.

One rule, read three ways. Two estimates a and b with a standard error se of their difference

* agree (:func:`within_error`) when |a - b| <= max(floor, 3 se);
* contradict each other (:func:`beyond_error`) when |a - b| > max(floor, 3 se);
* and a lies clearly above b (:func:`clearly_above`) when a > b + margin + 3 se.

``se`` is the standard error of the difference: that of the one estimate where the other is taken as given (the
checks of :mod:`bayesvm.selection.trust` and :mod:`bayesvm.selection.grid_checks`, which hold a search's or a
surface's value against a fresh reference), or :func:`combined_se` of both where both carry an error (a search path's
anchors, :meth:`bayesvm.normalization.path.ReweightedPath.refine`; two fresh ln P(D) values,
:mod:`bayesvm.selection.search_selection`). ``floor`` and ``margin`` are nats: a difference within the floor counts
as agreement however small the errors, and a margin must be cleared on top of the errors.

:func:`within_error` and :func:`beyond_error` are complements for numbers; a NaN difference is neither: it confirms no
agreement and shows no contradiction.
"""

from __future__ import annotations

import numpy as np

__all__ = ["N_STANDARD_ERRORS", "combined_se", "within_error", "beyond_error", "clearly_above"]

#: standard errors a difference may span and still count as chance: a normal error passes 3 about 0.3% of the time
N_STANDARD_ERRORS = 3.0


def combined_se(se_a, se_b) -> float:
    """The standard error of the difference of two independent estimates: sqrt(se_a^2 + se_b^2)."""
    return float(np.hypot(se_a, se_b))


def within_error(a, b, *, se, floor: float) -> bool:
    """Whether a and b agree: |a - b| <= max(floor, 3 se), ``se`` the standard error of a - b (a NaN: False)."""
    return bool(abs(a - b) <= max(floor, N_STANDARD_ERRORS * se))


def beyond_error(a, b, *, se, floor: float) -> bool:
    """Whether a and b contradict each other: |a - b| > max(floor, 3 se), ``se`` the standard error of a - b
    (a NaN: False)."""
    return bool(abs(a - b) > max(floor, N_STANDARD_ERRORS * se))


def clearly_above(a, b, *, se, margin: float) -> bool:
    """Whether a lies above b by more than ``margin`` plus three standard errors: a > b + margin + 3 se, ``se`` the
    standard error of a - b (a NaN: False)."""
    return bool(a > b + margin + N_STANDARD_ERRORS * se)
