"""Test setup.

Compiled programs are released after a test module once the worker holds
more than half of Linux's limit of memory mappings per process
(vm.max_map_count, 65,530 by default; after every module where the system
does not say). Each compiled program keeps its code in memory mappings
(about 400 for the batched dual solver at one problem size, measured with
jax 0.10.2 on CPU), and the suite compiles for many problem sizes: when the
suite compiled more than twice as many programs as today, kept all together
they passed the limit and XLA aborted the test run while compiling (exit
134, in CI and locally). Today a worker peaks near 29,000 mappings and keeps
every program: released after every module, they were traced, lowered and
read back from the cache again by later modules (the suite took 344 s with
empty caches against 316 s kept; 2-core machine).

So that a released program is not compiled again by a later module, the
tests share JAX's persistent compilation cache, in the user's cache directory
(``$XDG_CACHE_HOME/bayesvm/jax-tests``; ``BAYESVM_TEST_CACHE=0`` turns it
off). It keeps every program, however fast it compiled: with an empty cache
the suite compiles 3,932 programs under 0.1 s, and 1,671 of them repeat one
compiled earlier in the run; kept, they are read back instead (1,405 cache
hits against 155, 608 s of compiling and reading summed over the two
workers against 644 s, 43 MB on disk; the whole run 502 s against 517 s),
and a later run took 178-184 s against 218 s with only the slower programs
kept (jax 0.10.2, the 2-core development machine, the same hour). The
command's own cache stays off in the test process (``BAYESVM_NO_CACHE``),
since the CLI tests run the command in this process and it would otherwise
move the cache directory for every later test.
Precision is not touched: the package scopes float64 to its own entry
points, and the tests check that.

The suite runs in two worker processes (pytest-xdist, set in pyproject's
``addopts``; ``-n 0`` for one process): most of its time is XLA compiling,
one program at a time per process. Each test module stays in one worker, so
its programs are compiled once; the workers share the persistent cache. On
an accelerator each worker allocates device memory as it needs it instead of
preallocating most of it.

Each worker keeps to its own share of the cores (``os.sched_setaffinity``,
where the system has it and there are at least as many cores as workers;
``BAYESVM_TEST_PIN=0`` turns it off), set before JAX starts: JAX sizes its
CPU thread pool to the cores a process may use when its backend starts, and
a compiled program's parallel operations wait for every thread of the pool,
so two workers that each ran a pool as large as the machine kept waiting for
threads the other had displaced. Pinned, the suite took 108-115 s against
157-162 s (2-core machine, warm cache, two runs each).
"""

import os
from pathlib import Path

import jax
import pytest


def pytest_configure(config):
    _pin_worker()
    os.environ.setdefault("BAYESVM_NO_CACHE", "1")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if os.environ.get("BAYESVM_TEST_CACHE", "1") == "0":
        return
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    jax.config.update("jax_compilation_cache_dir", str(base / "bayesvm" / "jax-tests"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _pin_worker():
    """Keep each xdist worker to its own share of the cores before JAX starts (module docstring)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not hasattr(os, "sched_setaffinity") or os.environ.get("BAYESVM_TEST_PIN", "1") == "0":
        return
    cpus = sorted(os.sched_getaffinity(0))
    count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    index = int(worker.removeprefix("gw"))
    if len(cpus) >= count:
        os.sched_setaffinity(0, cpus[index::count])


#: scikit-learn checks that repeat a fast-tier check on read-only memory maps of the same data: each refits the
#: estimator on the 300-point, 3-class blobs (about 25 s), so they run with the slow tier
_SLOW_ESTIMATOR_CHECKS = ("check_classifiers_train(readonly_memmap",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the repeated estimator checks slow before ``-m 'not slow'`` deselects."""
    for item in items:
        if any(name in item.name for name in _SLOW_ESTIMATOR_CHECKS):
            item.add_marker(pytest.mark.slow)


#: a worker drops its compiled programs after a module once its memory mappings pass this share of the limit
_MAPPINGS_SHARE = 0.5


def _memory_mappings() -> tuple[int, int] | None:
    """(this process's memory mappings, the system's limit per process), where Linux says; None elsewhere."""
    try:
        with open("/proc/self/maps") as maps, open("/proc/sys/vm/max_map_count") as limit:
            return sum(1 for _ in maps), int(limit.read())
    except OSError:
        return None


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's in-memory compiled programs after a test module once the worker's memory mappings pass half the
    system's limit (or after every module where the system does not say; see the module docstring)."""
    yield
    counted = _memory_mappings()
    if counted is None or counted[0] > _MAPPINGS_SHARE * counted[1]:
        jax.clear_caches()
