"""How bayesvm's programs are compiled: cheaper XLA options on the CPU, and an opt-in persistent cache.

Most of a first fit in a fresh process is JAX compiling the solver, EP and
the tempered-SMC sampler for the problem's padded size (the documentation's
page "Speed: the first fit"). JAX can keep compiled programs on disk and
reuse them in later processes, but that is a process-wide JAX setting, so
importing bayesvm never turns it on: a library user opts in with
:func:`enable_compilation_cache`. The ``bayesvm`` command turns it on for
itself (``BAYESVM_NO_CACHE=1`` turns it off there).

Every compiled function of the package is declared with :func:`jit`, which
is ``jax.jit`` with :data:`CPU_COMPILER_OPTIONS` for small problems on the
CPU backend: LLVM's optimisation level 1 instead of XLA's default 2, and
XLA's classic element-wise fusion emitters instead of its newer MLIR-based
ones. They apply where no array argument of a program holds more than
:data:`CHEAP_COMPILATION_MAX_ELEMENTS` numbers (the sampler's 4 x 128
particles up to 256 points): there they cut a first fit's compilation and
the computation runs as fast; on larger problems the computation runs
slower, which every later fit pays for compilation saved once, so they keep
XLA's defaults (documentation: speed; ``benchmarks/cold_start.py``). They are per-program options
(``jax.jit``'s ``compiler_options``), not process-wide flags: the caller's
own JAX programs compile as before, and on an accelerator the package's
compile with XLA's defaults.

Programs that a fit runs only a few times (the MAP SVM's solver, EP's
posterior at the answer, the predictions; ``jit(..., rarely_run=True)``)
take :data:`RARELY_RUN_COMPILER_OPTIONS` instead, LLVM's level 0: they
compile about three times faster and run somewhat slower, which a fit pays
once or twice. So does EP's Gaussian for the second route of a check's ln N(D). The
programs the search runs at every step (EP with its gradient, the sampler,
the path's reweighting) keep level 1: at level 0 a warm fit took more than
twice as long. The rarely run programs take level 0 up to 512 points
(:data:`RARELY_RUN_MAX_ELEMENTS`; the default selects on 250 rows above
that); on larger problems their slower runs would outweigh the compilation
saved, so they keep XLA's defaults (documentation: speed).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jax
import numpy as np

from ._precision import _traced

__all__ = ["CHEAP_COMPILATION_MAX_ELEMENTS", "CPU_COMPILER_OPTIONS", "RARELY_RUN_COMPILER_OPTIONS",
           "RARELY_RUN_MAX_ELEMENTS", "default_cache_directory", "enable_compilation_cache", "jit"]

#: XLA options of the package's programs for small problems on the CPU backend (see the module docstring)
CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}
#: the same for the programs a fit runs only a few times (``jit(..., rarely_run=True)``): LLVM's level 0
RARELY_RUN_COMPILER_OPTIONS = {**CPU_COMPILER_OPTIONS, "xla_backend_optimization_level": 0}
#: programs whose array arguments hold at most this many numbers each compile with CPU_COMPILER_OPTIONS
CHEAP_COMPILATION_MAX_ELEMENTS = 4 * 128 * 256
#: the same bound for the programs a fit runs only a few times: problems up to 512 points (see the module docstring)
RARELY_RUN_MAX_ELEMENTS = 512 * 512

#: programs that compile faster than this are not written. 0: JAX's own default (1 s) would skip most of bayesvm's
#: programs, small ones that together slow a cached first fit (benchmarks/cold_start.py)
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
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    return path


def jit(fun=None, /, *, rarely_run: bool = False, **options):
    """``jax.jit(fun, **options)``, compiled with :data:`CPU_COMPILER_OPTIONS` for small problems on the CPU.

    Usable as ``@jit`` or ``@jit(static_argnames=...)``, as ``jax.jit``. ``rarely_run=True`` (a program a fit
    runs only a few times) takes :data:`RARELY_RUN_COMPILER_OPTIONS` instead (the wrapper's
    ``small_cpu_compiler_options`` says which). The options apply where the call is a program of its own on the
    CPU backend and none of its array arguments holds more than :data:`CHEAP_COMPILATION_MAX_ELEMENTS` numbers
    (:data:`RARELY_RUN_MAX_ELEMENTS` with ``rarely_run``). Inside the caller's own transformation (arguments that
    are tracers: ``jax.jit``, ``jax.vmap``, ``jax.grad`` around a bayesvm function) the function is traced into the
    caller's program, which JAX compiles with the caller's options (JAX accepts compiler options only on the
    outermost ``jax.jit``). NumPy arguments are put on the device before the call (:func:`_on_device`), so that a
    NumPy array and a device array of the same shape share one program.
    """
    if fun is None:
        return functools.partial(jit, rarely_run=rarely_run, **options)
    cheap_options, max_elements = ((RARELY_RUN_COMPILER_OPTIONS, RARELY_RUN_MAX_ELEMENTS) if rarely_run
                                   else (CPU_COMPILER_OPTIONS, CHEAP_COMPILATION_MAX_ELEMENTS))
    cheap = jax.jit(fun, compiler_options=cheap_options, **options)
    as_given = jax.jit(fun, **options)

    @functools.wraps(fun)
    def compiled(*args, **kwargs):
        program = cheap if _cheap_to_compile(args, kwargs, max_elements) else as_given
        return program(*_on_device(args), **_on_device(kwargs))

    # the number of programs compiled for it so far (JAX's private count on its jitted functions, which tests read)
    compiled._cache_size = lambda: cheap._cache_size() + as_given._cache_size()
    compiled.small_cpu_compiler_options = cheap_options
    return compiled


def _on_device(tree):
    """``tree`` with its NumPy arrays and scalars put on the device (JAX's ``device_put``), everything else as it is.

    ``jax.jit`` keeps one compiled program per kind of argument as well as per shape and type: a NumPy array and a
    device array (another program's output) of the same shape compile a program each. The package's host-side code
    passes both where a value comes now from NumPy and now from a program: EP's program took the checks' Gram
    matrix from NumPy and the search's from the program that builds it, and compiled twice (documentation: speed).
    The transfer is the one jit makes for a NumPy argument anyway."""
    return jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf) if isinstance(leaf, (np.ndarray, np.generic))
                                  else leaf, tree)


def _cheap_to_compile(args, kwargs, max_elements: int = CHEAP_COMPILATION_MAX_ELEMENTS) -> bool:
    """Whether a call with these arguments compiles with the cheaper options: on the CPU, not traced, and no array
    argument holding more than ``max_elements`` numbers (see :func:`jit`)."""
    if jax.default_backend() != "cpu" or _traced(args, kwargs):
        return False
    sizes = (getattr(leaf, "size", 0) for leaf in jax.tree_util.tree_leaves((args, kwargs)))
    return max(sizes, default=0) <= max_elements
