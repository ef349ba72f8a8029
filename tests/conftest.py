"""Test-session setup.

JAX's persistent compilation cache is off by default: with it on, writing
the compiled batched dual solver of the grid tests to the cache crashed the
whole test process (a segmentation fault inside JAX's cache write, jax
0.10.2, reproduced three times in full runs, where the CLI tests had turned
the command's cache on in the test process), and on a fresh CI machine the cache
cannot pay for itself anyway. Set BAYESVM_TEST_CACHE=1 to keep compiled
programs between local runs in the user's cache directory. Precision is not
touched: the package scopes float64 to its own entry points, and the tests
check that.
"""

import os
from pathlib import Path

import jax


def pytest_configure(config):
    if not os.environ.get("BAYESVM_TEST_CACHE"):
        # the command enables the cache for its own process; the CLI tests run it in this one
        os.environ.setdefault("BAYESVM_NO_CACHE", "1")
        return
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    jax.config.update("jax_compilation_cache_dir", str(base / "bayesvm" / "jax-tests"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
