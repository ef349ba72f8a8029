"""JSON-ready values: JSON has no NaN or infinity, so non-finite numbers become None."""

from __future__ import annotations

import numpy as np

__all__ = ["finite_or_none", "nan_to_none"]


def finite_or_none(value) -> float | None:
    """A float, or None where it is NaN or infinite."""
    value = float(value)
    return value if np.isfinite(value) else None


def nan_to_none(nested):
    """Nested lists with every non-finite float replaced by None."""
    if isinstance(nested, list):
        return [nan_to_none(v) for v in nested]
    return None if isinstance(nested, float) and not np.isfinite(nested) else nested
