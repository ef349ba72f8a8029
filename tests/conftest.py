"""Test setup.

* **Two workers** (pytest-xdist, set in pyproject's ``addopts``; ``-n 0`` for
  one process): most of the suite's time is XLA compiling, one program at a
  time per process. Each test module stays in one worker, so its programs
  are compiled once.
* **The package's compilation cache** (:mod:`bayesvm.compilation`), as for
  any user: on, in the user's cache folder, ``BAYESVM_NO_CACHE=1`` turns it
  off. The workers share it, a program released by one module is read back
  instead of compiled again, and a later run reads most programs back.
  JAX's own persistent cache is not set.
* **Released programs.** Each compiled program keeps its code in memory
  mappings, and XLA aborts a process that passes Linux's limit per process
  (vm.max_map_count): a worker drops its compiled programs after a module
  once it holds more than half the limit (after every module where the
  system does not say).
* **Pinned workers.** Each worker keeps to its own share of the cores
  (``os.sched_setaffinity``, where the system has it and there are at least
  as many cores as workers; ``BAYESVM_TEST_PIN=0`` turns it off), set before
  JAX starts: JAX sizes its CPU thread pool to the cores a process may use,
  and a compiled program's parallel operations wait for every thread of the
  pool, so two workers each running a pool as large as the machine wait for
  threads the other has displaced.
* On an accelerator each worker allocates device memory as it needs it
  instead of preallocating most of it.

Precision is not touched: the package scopes float64 to its own entry
points, and the tests check that.
"""

import os

import jax
import pytest


def pytest_configure(config):
    _pin_worker()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


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
#: estimator on the 300-point, 3-class blobs, so they run with the slow tier
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
    """Drop JAX's and the package's in-memory compiled programs after a test module once the worker's memory mappings pass half the
    system's limit (or after every module where the system does not say; see the module docstring)."""
    yield
    counted = _memory_mappings()
    if counted is None or counted[0] > _MAPPINGS_SHARE * counted[1]:
        jax.clear_caches()
