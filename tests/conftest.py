"""Test-session setup: JAX's persistent compilation cache, shared by every test run on this machine.

Most of the suite's time is compilation (every new problem size compiles the
solver, EP and the sampler once). The cache keeps compiled programs between
runs, in the user's cache directory, not in the checkout; set
BAYESVM_NO_CACHE=1 to run without it. Precision is not touched: the package
scopes float64 to its own entry points, and the tests check that.
"""

import os
from pathlib import Path

import jax


def pytest_configure(config):
    if os.environ.get("BAYESVM_NO_CACHE"):
        return
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    jax.config.update("jax_compilation_cache_dir", str(base / "bayesvm" / "jax-tests"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
