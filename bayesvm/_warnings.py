"""The package's warnings, raised at the line that called into the package: a stack level found on the call stack,
not counted by hand (a count breaks whenever a call gains or loses a wrapper)."""

from __future__ import annotations

import os
import sys
import warnings

#: the package's folder: a frame runs the package's code where its file lies in it
_PACKAGE = os.path.dirname(__file__) + os.sep


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the line that called into the package.

    That line is the frame just outside the outermost frame of the package's code on the stack, so that the frames of
    other libraries between the package's own (JAX transformations, functools and contextlib wrappers,
    scikit-learn's ``fit`` decorator) are passed over too; where the outermost frame is the package's (a module of
    it run as a script), that frame.
    """
    counted = []  # outward from the caller: whether each frame that warnings.warn counts is the package's
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not ("importlib" in filename and "_bootstrap" in filename):  # warnings.warn passes over the import system
            counted.append(filename.startswith(_PACKAGE))
        frame = frame.f_back
    outermost = max(index for index, inside in enumerate(counted) if inside)
    target = min(outermost + 1, len(counted) - 1)
    warnings.warn(message, category, stacklevel=target + 2)  # stacklevel 1 is this function's line, 2 its caller's
