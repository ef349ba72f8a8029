"""The package's compiled programs: its own cache of them on disk (on by default, read back by a later process,
JAX's settings untouched), cheaper XLA options for small problems, and no programs of their own between them."""

import ast
import collections
import os
import re
import stat
import subprocess
import sys
import warnings

import pytest

from bayesvm import compilation
from bayesvm.compilation import cache_directory

# a fresh process fits BayesianSVC on 30 points, predicts, and reports JAX's cache setting, the package's counts of
# compiled and loaded programs, the outputs' bytes and (with a second argument) the predictions of a model pickled
# by an earlier process
_FIT_AND_REPORT = """
import pickle, sys
import jax
before = jax.config.jax_compilation_cache_dir
import numpy as np
import bayesvm
from bayesvm import compilation
rng = np.random.default_rng(0)
X = rng.normal(size=(30, 2))
y = np.where(X[:, 0] + 0.5 * rng.normal(size=30) > 0, 1, 0)
model = bayesvm.BayesianSVC(random_state=0).fit(X, y)
with open(sys.argv[1], "wb") as file:
    pickle.dump(model, file)
outputs = [model.predict_proba(X), np.asarray(model.selection_.best_value)]
if sys.argv[2:]:
    with open(sys.argv[2], "rb") as file:
        outputs.append(pickle.load(file).predict_proba(X))
print("config:", before, jax.config.jax_compilation_cache_dir, jax.config.jax_enable_x64)
print("counts:", compilation.cache_statistics()["compiled"], compilation.cache_statistics()["loaded"])
print("outputs:", [np.asarray(a).tobytes().hex() for a in outputs])
"""


def _fresh_process(cache_home, *model_files) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key != compilation.NO_CACHE_VARIABLE and not key.startswith("JAX_COMPILATION_CACHE")}
    done = subprocess.run([sys.executable, "-c", _FIT_AND_REPORT, *map(str, model_files)], capture_output=True,
                          text=True, env={**env, "XDG_CACHE_HOME": str(cache_home)}, timeout=600)
    assert done.returncode == 0, done.stderr
    return dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)


def test_a_second_process_loads_every_program_and_computes_the_same_bits(tmp_path):
    """The first process compiles and writes its programs; the second loads all of them (compiles none), and its fit,
    evidence and predictions, and those of the first process's model unpickled, are bitwise those of the first."""
    first = _fresh_process(tmp_path, tmp_path / "first.pkl")
    assert first["config"] == "None None False"  # JAX's persistent cache and precision left as they were
    compiled, loaded = map(int, first["counts"].split())
    assert compiled >= 5 and loaded == 0
    folder = tmp_path / "bayesvm" / "programs"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    assert len(list(folder.glob("*.bin"))) == compiled

    second = _fresh_process(tmp_path, tmp_path / "second.pkl", tmp_path / "first.pkl")
    assert second["counts"] == f"0 {compiled}"
    assert second["config"] == first["config"]
    first_outputs, second_outputs = ast.literal_eval(first["outputs"]), ast.literal_eval(second["outputs"])
    assert second_outputs[:2] == first_outputs and second_outputs[2] == first_outputs[0]


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_directory() == tmp_path / "bayesvm" / "programs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_directory().parts[-3:] == (".cache", "bayesvm", "programs")


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """The package cache in a temporary folder, on, with this process's record of folders and warnings reset."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(compilation.NO_CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(compilation, "_process", {**compilation._process, "folders": {}, "warned": False})
    return tmp_path / "home" / "bayesvm" / "programs"


def _add_one():
    """A function of its own for a test: a new ``compilation.jit`` of it starts with no executables in memory."""
    import numpy as np

    from bayesvm.compilation import jit

    return jit(lambda x, *, scale: scale * x + 1.0, static_argnames="scale"), np.arange(3.0)


def test_importing_and_running_leave_jax_config_as_it_was(fresh_cache):
    import jax

    from bayesvm.kernels import RBF, gram_matrix

    before = dict(jax.config.values)
    gram_matrix(RBF(amplitude=1.0, length_scale=0.5, offset=1.0), [[0.0, 1.0], [2.0, 3.0], [1.0, 1.0]])
    assert dict(jax.config.values) == before
    assert any(fresh_cache.glob("*.bin"))


def test_the_switch_turns_the_cache_off(fresh_cache, monkeypatch):
    monkeypatch.setenv(compilation.NO_CACHE_VARIABLE, "1")
    add_one, x = _add_one()
    before = compilation.cache_statistics()
    assert list(add_one(x, scale=2.0)) == [1.0, 3.0, 5.0]
    assert compilation.cache_statistics() == before and not fresh_cache.exists()


def test_a_damaged_file_is_compiled_again_and_replaced(fresh_cache):
    add_one, x = _add_one()
    expected = add_one(x, scale=2.0)
    (written,) = fresh_cache.glob("*.bin")
    good = written.read_bytes()
    written.write_bytes(good[: len(good) // 2])  # truncated, as by a process killed while writing without a rename
    again, _ = _add_one()  # the same program, no executable in memory: read from disk
    before = compilation.cache_statistics()
    assert list(again(x, scale=2.0)) == list(expected)
    after = compilation.cache_statistics()
    assert (after["compiled"] - before["compiled"], after["loaded"] - before["loaded"]) == (1, 0)
    third, _ = _add_one()  # the file was written again, whole
    third(x, scale=2.0)
    assert compilation.cache_statistics()["loaded"] == after["loaded"] + 1


def test_a_folder_that_cannot_be_created_leaves_compiling_with_one_warning(fresh_cache, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the cache folder would lie under a file
    add_one, x = _add_one()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [list(add_one(x[:size], scale=2.0)) for size in (1, 2, 3)]
    assert results == [[1.0], [1.0, 3.0], [1.0, 3.0, 5.0]]
    (warned,) = [w for w in caught if issubclass(w.category, compilation.BayesvmWarning)]
    assert "cannot be used" in str(warned.message) and compilation.NO_CACHE_VARIABLE in str(warned.message)
    assert warned.filename == __file__  # the line that called the compiled function


def test_a_folder_that_cannot_be_written_is_read_with_one_warning(fresh_cache, monkeypatch):
    """As a read-only folder (which the superuser would still write): writes fail, programs on disk still load."""
    add_one, x = _add_one()
    add_one(x, scale=2.0)
    written = sorted(fresh_cache.iterdir())

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(compilation.tempfile, "mkstemp", refuse)
    again, _ = _add_one()
    before = compilation.cache_statistics()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [list(again(x[:size], scale=2.0)) for size in (3, 2, 1)]  # loaded, then two compiled
    after = compilation.cache_statistics()
    assert results == [[1.0, 3.0, 5.0], [1.0, 3.0], [1.0]]
    assert (after["loaded"] - before["loaded"], after["compiled"] - before["compiled"]) == (1, 2)
    (warned,) = [w for w in caught if issubclass(w.category, compilation.BayesvmWarning)]
    assert warned.filename == __file__
    assert sorted(fresh_cache.iterdir()) == written


def test_typed_keys_python_scalars_keywords_and_donated_arguments_load_from_disk(fresh_cache):
    """A program with a typed PRNG key, a weak-typed Python scalar, a dynamic keyword argument and a donated argument,
    loaded from disk by a new wrapper, computes what the compiled one did."""
    import jax
    import numpy as np

    from bayesvm.compilation import jit

    def noisy(key, x, scale, *, shift):
        return jax.random.normal(key, x.shape) * scale + x + shift

    def call():
        program = jit(noisy, donate_argnums=1)
        return np.asarray(program(jax.random.key(3), jax.numpy.arange(4.0), 2.0, shift=np.float32(1.0)))

    compiled = call()
    before = compilation.cache_statistics()
    assert np.array_equal(call(), compiled)
    assert compilation.cache_statistics()["loaded"] == before["loaded"] + 1


def test_the_least_recently_used_files_go_first(tmp_path):
    for age, name in enumerate(["newest", "middle", "oldest"]):
        path = tmp_path / f"{name}.bin"
        path.write_bytes(b"x" * 100)
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    compilation._evict(tmp_path, limit=250)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["middle.bin", "newest.bin"]


_Pair = collections.namedtuple("_Pair", "a b")


def test_a_call_key_names_the_package_s_functions_and_plain_data_only():
    """Functions, static arguments and tree nodes from outside the package are named by the lowered program's text:
    their names would not say what they compute in another process."""
    import jax

    from bayesvm.kernels import RBF, gram_matrix

    assert compilation._package_name(gram_matrix.__wrapped__) == "bayesvm.kernels.gram_matrix"
    assert compilation._describe(("rbf", 2, 0.5, None)) == "tuple(str:'rbf',int:2,float:0.5,NoneType:None)"
    tree = jax.tree_util.tree_structure(RBF(amplitude=1.0, length_scale=1.0, offset=1.0))
    assert compilation._describe_tree(tree).startswith("bayesvm.kernels.RBF[")
    for outside in (lambda x: x, object(), _add_one):
        with pytest.raises(compilation._NotDescribable):
            compilation._describe(outside)
    with pytest.raises(compilation._NotDescribable):
        compilation._describe_tree(jax.tree_util.tree_structure(_Pair(1, 2)))


# ---------------------------------------------------------------------------
# the package's programs: cheaper XLA options for small problems on the CPU


def test_cheap_options_go_to_small_programs_of_their_own():
    import jax
    import numpy as np

    from bayesvm.compilation import CHEAP_COMPILATION_MAX_ELEMENTS, _cheap_to_compile

    assert jax.default_backend() != "cpu" or _cheap_to_compile((np.zeros((256, 256)), 1.0), {"kind": "rbf"})
    assert not _cheap_to_compile((np.zeros(CHEAP_COMPILATION_MAX_ELEMENTS + 1),), {})
    seen = []
    jax.jit(lambda x: seen.append(_cheap_to_compile((x,), {})) or x)(np.zeros(3))
    assert seen == [False]  # traced into the caller's program: JAX takes compiler options on the outermost jit only


def test_only_the_programs_a_fit_runs_a_few_times_compile_at_level_0():
    """Level 0 compiles about three times faster but runs the compiled loops 1.3-3x slower: it pays only for
    programs that run once or twice per fit, never for those the search runs at every step."""
    import jax
    import numpy as np

    from bayesvm import compilation, posterior
    from bayesvm.inference import ep, ep_gradient, ep_posterior
    from bayesvm.normalization import path, smc
    from bayesvm.solver import dual

    rarely = compilation.RARELY_RUN_COMPILER_OPTIONS
    assert rarely["xla_backend_optimization_level"] == 0
    assert {**rarely, "xla_backend_optimization_level": 1} == compilation.CPU_COMPILER_OPTIONS
    for program in (dual._ascend_jit, dual._finish_jit, ep._padded_nu_run, ep_posterior.ep_predict,
                    posterior.averaged_probability):
        assert program.small_cpu_compiler_options == rarely, program.__name__
    # EP with label sites is one program for the search (every step), the checks and the posterior
    for program in (ep._padded_label_run, ep_gradient._gram_vjp, smc.smc_runs, path._reweighted, path._log_f):
        assert program.small_cpu_compiler_options == compilation.CPU_COMPILER_OPTIONS, program.__name__
    # up to the default's selection subsample of 500 points (padded to 512)
    gram, bound = np.zeros((512, 512)), compilation.RARELY_RUN_MAX_ELEMENTS
    assert jax.default_backend() != "cpu" or compilation._cheap_to_compile((gram,), {}, bound)
    assert not compilation._cheap_to_compile((gram,), {})
    assert not compilation._cheap_to_compile((np.zeros((513, 512)),), {}, bound)


def test_numpy_and_device_arguments_share_one_program():
    """jax.jit compiles a NumPy argument and a device array of the same shape as two programs; the package's jit
    puts NumPy arguments on the device first, so they share one."""
    import jax
    import numpy as np

    from bayesvm.compilation import jit

    @jit
    def double(a, b):
        return 2.0 * a + b

    host = np.arange(6.0).reshape(2, 3)
    with jax.enable_x64(True):
        expected = np.asarray(double(host, np.float64(1.0)))
        again = double(jax.device_put(host), jax.device_put(np.float64(1.0)))
        plain = jax.jit(lambda a, b: 2.0 * a + b)  # a function of its own: jax.jit of the same one shares its cache
        plain(host, np.float64(1.0)), plain(jax.device_put(host), jax.device_put(np.float64(1.0)))
    assert np.array_equal(np.asarray(again), expected) and np.array_equal(expected, 2.0 * host + 1.0)
    assert double._cache_size() == 1
    assert plain._cache_size() == 2  # what the wrapper avoids


def test_a_package_function_runs_inside_the_callers_transformations():
    import jax
    import numpy as np

    from bayesvm.kernels import RBF, gram_matrix

    X = np.random.default_rng(0).normal(size=(12, 2))
    kernel = RBF(amplitude=2.0, length_scale=0.7, offset=0.5)
    direct = np.asarray(gram_matrix(kernel, X))
    programs = compilation.cache_statistics()
    with jax.enable_x64(True):
        assert np.allclose(jax.jit(lambda X: gram_matrix(kernel, X))(X), direct)
        assert np.allclose(jax.vmap(lambda X: gram_matrix(kernel, X))(np.stack([X, X])), direct)
    assert compilation.cache_statistics() == programs  # traced into the caller's programs: the cache is not used


def test_the_cheap_options_leave_eps_values_as_xlas_defaults_give_them(monkeypatch):
    """EP's ln Q(D), posterior and predictor from the program compiled with the package's CPU options (LLVM's
    level 1) against the same program compiled with XLA's defaults (``jax.jit`` of the undecorated function)."""
    import jax
    import numpy as np

    from bayesvm.inference import ep
    from bayesvm.kernels import RBF, gram_matrix

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    with jax.enable_x64(True):
        K = gram_matrix(RBF(amplitude=3.0, length_scale=1.2, offset=1.0), X)
        cheap = ep.ep_log_evidence(K, y, 2.0)
        monkeypatch.setattr(ep, "_padded_label_run", jax.jit(ep._padded_label_run.__wrapped__))
        default = ep.ep_log_evidence(K, y, 2.0)
    assert bool(cheap.converged) and bool(default.converged)
    for a, b in zip(jax.tree_util.tree_leaves(cheap), jax.tree_util.tree_leaves(default)):
        assert np.allclose(a, b, rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------------------
# the host-side code between the package's programs compiles nothing of its own

# a fresh process fits BayesianSVC on 40 points and predicts, and lists every program JAX compiled (its compile log)
_FIT_AND_LIST_PROGRAMS = """
import logging, re, sys
import jax
jax.config.update("jax_log_compiles", True)
compiled = []
class Programs(logging.Handler):
    def emit(self, record):
        found = re.match(r"Compiling jit\\((\\w+)\\) with global shapes and types \\((.*?)\\)\\. ", record.getMessage())
        if found:
            compiled.append(found.groups())
for name in ("jax._src.interpreters.pxla", "jax._src.dispatch"):
    logging.getLogger(name).addHandler(Programs())
    logging.getLogger(name).setLevel(logging.DEBUG)
import importlib, pkgutil
import numpy as np
import bayesvm
package_programs = set()
for module in pkgutil.walk_packages(bayesvm.__path__, "bayesvm."):
    for value in vars(importlib.import_module(module.name)).values():
        if hasattr(value, "_cache_size"):  # a function compiled by bayesvm.compilation.jit
            package_programs.add(value.__name__)
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 2))
y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1, 0)
bayesvm.BayesianSVC(random_state=0).fit(X, y).predict_proba(X)
def compile_log_canary(x):  # compiled by JAX whatever the package's cache holds: the log was read
    return x + 1.0
jax.jit(compile_log_canary)(1.0)
for name, shapes in compiled:
    print(("package" if name in package_programs else "other") + "|" + name + "|" + shapes)
"""


def test_a_fit_compiles_the_packages_programs_and_next_to_nothing_else():
    """Called eagerly, a jax.numpy operation (a pad, a slice, ``jnp.asarray`` of a NumPy array, a key split)
    compiles a one-operation program of its own for every shape it meets: 24 of the 41 programs of a first fit
    before the host-side code kept to NumPy. What may remain is a PRNG key's seeding (a scalar program or two)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("JAX_COMPILATION_CACHE")}
    done = subprocess.run([sys.executable, "-c", _FIT_AND_LIST_PROGRAMS], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    programs = [line.split("|", 2) for line in done.stdout.splitlines() if line.count("|") >= 2]
    others = [(name, shapes) for kind, name, shapes in programs if kind == "other"]
    assert any(name == "compile_log_canary" for name, _ in others)  # the log was read
    others = [(name, shapes) for name, shapes in others if name != "compile_log_canary"]
    scalar = re.compile(r"ShapedArray\(\w+\[\](, weak_type=True)?\),?")
    seeding = [(name, shapes) for name, shapes in others
               if name in ("_threefry_seed", "stage") and scalar.fullmatch(shapes.strip())]
    assert [program for program in others if program not in seeding] == []
    assert len(seeding) <= 2
