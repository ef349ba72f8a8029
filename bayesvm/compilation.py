"""An opt-in persistent cache for the programs JAX compiles for bayesvm.

Most of a first fit in a fresh process is JAX compiling the solver, EP and
the tempered-SMC sampler for the problem's padded size (the documentation's
page "Speed: the first fit"). JAX can keep compiled programs on disk and
reuse them in later processes, but that is a process-wide JAX setting, so
importing bayesvm never turns it on: a library user opts in with
:func:`enable_compilation_cache`. The ``bayesvm`` command turns it on for
itself (``BAYESVM_NO_CACHE=1`` turns it off there).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_directory", "enable_compilation_cache"]

#: programs that compile faster than this are not written. JAX's own default (1 s) would skip most of bayesvm's:
#: about 75 of the 85-98 programs of a first fit are small ones (0.02-0.05 s each, about 1.5 s together), and
#: keeping them too took a cached first fit from 10.7 s to 9.4 s at 150 points and from 19.3 s to 16.6 s at 400
#: (1.4 MB on disk; benchmarks/cold_start.py)
_MIN_COMPILE_SECONDS = 0.0


def default_cache_directory() -> Path:
    """``$XDG_CACHE_HOME/bayesvm/jax``, or ``~/.cache/bayesvm/jax`` when XDG_CACHE_HOME is unset."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bayesvm" / "jax"


def enable_compilation_cache(directory: str | os.PathLike | None = None, *,
                             min_compile_seconds: float = _MIN_COMPILE_SECONDS) -> Path:
    """Keep JAX's compiled programs on disk, so that later processes skip most compilation.

    Sets JAX's ``jax_compilation_cache_dir`` to ``directory`` (default
    :func:`default_cache_directory`) and ``jax_persistent_cache_min_compile_time_secs``
    to ``min_compile_seconds``. These are process-wide JAX settings: they
    also apply to the caller's own JAX code, which is why bayesvm never sets
    them on import. A directory already set by the caller is replaced.
    Returns the directory. ``ValueError`` if ``min_compile_seconds`` is negative
    or the directory exists as a file.
    """
    if not min_compile_seconds >= 0.0:
        raise ValueError(f"min_compile_seconds must be a number >= 0; got {min_compile_seconds!r}")
    path = Path(directory) if directory is not None else default_cache_directory()
    if path.exists() and not path.is_dir():
        raise ValueError(f"the compilation cache must be a directory; {str(path)!r} is a file")
    import jax

    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    return path
