"""How bayesvm's programs are compiled: a cache of compiled programs on disk, and cheaper XLA options on the CPU.

Most of a first fit in a fresh process is JAX compiling the solver, EP and
the tempered-SMC sampler for the problem's padded size (documentation: speed,
"A first fit in a fresh process"). Every compiled function of the package is
declared with :func:`jit`, which is ``jax.jit`` with a cache of compiled
programs of its own and the compiler options below.

The compilation cache
---------------------
On by default: a program compiled once on a machine is written to
:func:`cache_directory` (``$XDG_CACHE_HOME/bayesvm/programs``,
``~/.cache/bayesvm/programs`` where XDG_CACHE_HOME is unset) and a later
process loads it instead of compiling it. ``BAYESVM_NO_CACHE=1``
(:data:`NO_CACHE_VARIABLE`) turns it off; the package then compiles in each
process as ``jax.jit`` does. The folder is safe to delete at any time.

* **JAX's settings are left alone.** The package serialises its own
  executables (JAX's ahead-of-time API: ``lower``, ``compile``,
  ``jax.experimental.serialize_executable``); ``jax.config`` (its
  ``jax_compilation_cache_dir`` among it) stays as the caller set it, and
  the caller's own programs compile as before.
* **Nothing stale is read.** A program's file is named by a SHA-256 of what
  determines its executable: the jax and jaxlib versions, the backend, its
  platform version, device kind and device count, the CPU (model and
  instruction-set flags), ``XLA_FLAGS``, the Python version, the package's
  source (its ``.py`` files), the function, its static arguments, the tree
  structure, shapes, dtypes and weak types of its array arguments, JAX's
  tracing configuration (float64 among it) and the compiler options. Where
  the function, a static argument or a tree node comes from outside the
  package (the caller's own log-likelihood, say), the text of the lowered
  program names it instead.
* **Safe.** The folder is created private to the user (0700), and made so
  where it is the user's and open to others; another user's folder is not
  used, since loading a program runs its code.
  A file is written under a temporary name in the same folder and renamed
  (``os.replace``), so a process never reads another's partial file; it
  carries a SHA-256 of its contents, and a truncated or damaged file is
  ignored and written again. The folder is kept under
  :data:`MAX_CACHE_BYTES` by deleting the least recently used files. Where
  the folder cannot be created or written, the package compiles as without
  the cache, after one warning.
* **Once per process.** Each executable is loaded or compiled at most once
  per process and kept in memory with its function (the wrapper's
  ``_cache_size()`` counts them; ``jax.clear_caches()`` drops them with
  JAX's own); :func:`cache_statistics` counts what a process compiled and
  loaded. Calls inside the caller's own transformations (arguments that
  are tracers) are traced into the caller's program and bypass the cache.

Compiler options
----------------
:func:`jit` compiles with :data:`CPU_COMPILER_OPTIONS` for small problems
on the CPU backend: LLVM's optimisation level 1 instead of XLA's default 2,
and XLA's classic element-wise fusion emitters instead of its newer
MLIR-based ones. They apply where no array argument of a program holds more
than :data:`CHEAP_COMPILATION_MAX_ELEMENTS` numbers (the sampler's 4 x 128
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
compile faster and run slower, which a fit pays once or twice. So does EP's
Gaussian for the second route of a check's ln N(D). The programs the search
runs at every step (EP with its gradient, the sampler, the path's
reweighting) keep level 1: at level 0 their slower runs would outweigh the
compilation saved in every warm fit (CHANGELOG.md, 2026-11-29). The rarely
run programs take level 0 up to 512 points
(:data:`RARELY_RUN_MAX_ELEMENTS`; the default selects on 250 rows above
that); on larger problems their slower runs would outweigh the compilation
saved, so they keep XLA's defaults (documentation: speed).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
import platform
import stat
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np
from jax._src.config import trace_context
from jax._src import util as jax_util
from jax._src.lax import linalg
from jax.experimental import serialize_executable

from ._precision import _traced
from ._warnings import warn_user
from .exceptions import BayesvmWarning

__all__ = ["CHEAP_COMPILATION_MAX_ELEMENTS", "CPU_COMPILER_OPTIONS", "MAX_CACHE_BYTES", "NO_CACHE_VARIABLE",
           "RARELY_RUN_COMPILER_OPTIONS", "RARELY_RUN_MAX_ELEMENTS", "cache_directory", "cache_statistics", "jit"]

#: XLA options of the package's programs for small problems on the CPU backend (see the module docstring)
CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}
#: the same for the programs a fit runs only a few times (``jit(..., rarely_run=True)``): LLVM's level 0
RARELY_RUN_COMPILER_OPTIONS = {**CPU_COMPILER_OPTIONS, "xla_backend_optimization_level": 0}
#: programs whose array arguments hold at most this many numbers each compile with CPU_COMPILER_OPTIONS
CHEAP_COMPILATION_MAX_ELEMENTS = 4 * 128 * 256
#: the same bound for the programs a fit runs only a few times: problems up to 512 points (see the module docstring)
RARELY_RUN_MAX_ELEMENTS = 512 * 512

#: the environment variable that turns the compilation cache off (any value but "" and "0")
NO_CACHE_VARIABLE = "BAYESVM_NO_CACHE"

#: the cache folder's bound in bytes: a fit's programs take a few MB, so this keeps those of hundreds of problem
#: sizes and settings while staying small beside the rest of a user's cache folder
MAX_CACHE_BYTES = 1 << 30

#: the first bytes of a cache file: the format's name and version, then a SHA-256 of the rest
_FILE_HEADER = b"bayesvm compiled program 1\n"

#: programs this process compiled and programs it loaded from the cache (:func:`cache_statistics`)
_statistics = {"compiled": 0, "loaded": 0}
#: folders found usable or not, and whether a warning was given; the machine's and package's description
_process = {"folders": {}, "warned": False, "machine": None}


def cache_directory() -> Path:
    """``$XDG_CACHE_HOME/bayesvm/programs``, or ``~/.cache/bayesvm/programs`` when XDG_CACHE_HOME is unset."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bayesvm" / "programs"


def cache_statistics() -> dict[str, int]:
    """The package's programs this process has compiled (``"compiled"``) and loaded from the cache (``"loaded"``)."""
    return dict(_statistics)


def _cache_enabled() -> bool:
    return os.environ.get(NO_CACHE_VARIABLE, "") in ("", "0")


def jit(fun=None, /, *, rarely_run: bool = False, **options):
    """``jax.jit(fun, **options)`` with the package's compilation cache and compiler options (module docstring).

    Usable as ``@jit`` or ``@jit(static_argnames=...)``, as ``jax.jit``. ``rarely_run=True`` (a program a fit
    runs only a few times) takes :data:`RARELY_RUN_COMPILER_OPTIONS` instead of :data:`CPU_COMPILER_OPTIONS` (the
    wrapper's ``small_cpu_compiler_options`` says which). The options apply where the call is a program of its own on
    the CPU backend and none of its array arguments holds more than :data:`CHEAP_COMPILATION_MAX_ELEMENTS` numbers
    (:data:`RARELY_RUN_MAX_ELEMENTS` with ``rarely_run``). Inside the caller's own transformation (arguments that
    are tracers: ``jax.jit``, ``jax.vmap``, ``jax.grad`` around a bayesvm function) the function is traced into the
    caller's program, which JAX compiles with the caller's options (JAX accepts compiler options only on the
    outermost ``jax.jit``), and the cache is not used. NumPy arguments are put on the device before the call
    (:func:`_on_device`), so that a NumPy array and a device array of the same shape share one program.

    A call outside transformations, with the cache on, runs the executable kept in memory for its static arguments,
    argument structure and types and JAX's tracing configuration; the first such call loads it from
    :func:`cache_directory`, or compiles and writes it there.
    """
    if fun is None:
        return functools.partial(jit, rarely_run=rarely_run, **options)
    cheap_options, max_elements = ((RARELY_RUN_COMPILER_OPTIONS, RARELY_RUN_MAX_ELEMENTS) if rarely_run
                                   else (CPU_COMPILER_OPTIONS, CHEAP_COMPILATION_MAX_ELEMENTS))
    programs = {True: jax.jit(fun, compiler_options=cheap_options, **options), False: jax.jit(fun, **options)}
    static = _StaticArguments(fun, options.get("static_argnums"), options.get("static_argnames"))
    executables = _Executables()
    jax_util.register_cache(executables, f"bayesvm {fun.__qualname__}")

    @functools.wraps(fun)
    def compiled(*args, **kwargs):
        args, kwargs = _on_device(args), _on_device(kwargs)
        (dynamic_args, dynamic_kwargs), statics = static.split(args, kwargs)
        cheap = _cheap_to_compile(dynamic_args, dynamic_kwargs, max_elements)
        program = programs[cheap]
        if not _cache_enabled() or _traced(dynamic_args, dynamic_kwargs):
            return program(*args, **kwargs)
        leaves, tree = jax.tree_util.tree_flatten((dynamic_args, dynamic_kwargs))
        try:
            key = (cheap, statics, tree, tuple(_leaf_type(leaf) for leaf in leaves), trace_context())
            executable = executables.get(key)
        except TypeError:  # an unhashable static argument: jax.jit's own call says what is wrong
            return program(*args, **kwargs)
        if executable is None:
            call = _Call(fun, program, cheap_options if cheap else {}, options, statics, tree, leaves, args, kwargs)
            executable = executables[key] = call.load_or_compile()
        return executable(*dynamic_args, **dynamic_kwargs)

    # the number of programs compiled or loaded for it so far (executables kept here, and JAX's private count on its
    # jitted functions for the calls outside the cache), which tests read
    compiled._cache_size = lambda: len(executables) + sum(program._cache_size() for program in programs.values())
    compiled.small_cpu_compiler_options = cheap_options
    return compiled


class _Executables(dict):
    """A function's executables by call key; ``jax.clear_caches()`` empties it as it empties JAX's own caches (it
    keeps its caches by identity)."""

    __hash__ = object.__hash__
    __eq__ = object.__eq__

    def cache_clear(self):
        self.clear()


def _leaf_type(leaf):
    """What a leaf contributes to its executable's key in memory: a JAX array's shape, dtype and weak type, another
    leaf's Python type (a Python scalar's JAX type follows from it and the precision, part of the key)."""
    if isinstance(leaf, jax.Array):
        return leaf.shape, leaf.dtype, getattr(leaf, "weak_type", False)  # a typed PRNG key has no weak type
    return type(leaf)


class _StaticArguments:
    """Which arguments of ``fun`` are static for ``jax.jit(fun, static_argnums=..., static_argnames=...)``: the
    numbers and names given, each completed by the other through ``fun``'s signature, as jax.jit completes them."""

    def __init__(self, fun, argnums, argnames):
        numbers = {argnums} if isinstance(argnums, int) else set(argnums or ())
        names = {argnames} if isinstance(argnames, str) else set(argnames or ())
        try:
            parameters = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):  # no signature (a builtin): only what was given
            parameters = []
        positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        keyword = {p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD}
        self.numbers = numbers | {i for i, name in enumerate(positional) if name in names}
        self.names = names | {name for i, name in enumerate(positional) if i in numbers and name in keyword}

    def split(self, args: tuple, kwargs: dict):
        """((dynamic positional arguments, dynamic keyword arguments), the static ones as a hashable tuple)."""
        if not self.numbers and not self.names:
            return (args, kwargs), ()
        dynamic = (tuple(a for i, a in enumerate(args) if i not in self.numbers),
                   {k: v for k, v in kwargs.items() if k not in self.names})
        statics = (tuple((i, a) for i, a in enumerate(args) if i in self.numbers),
                   tuple(sorted(((k, v) for k, v in kwargs.items() if k in self.names), key=lambda kv: kv[0])))
        return dynamic, statics


class _NotDescribable(Exception):
    """A value whose text would not name it the same way in every process (an object from outside the package)."""


class _Call:
    """The first call of one of the package's programs at a key: its executable from the cache, or compiled."""

    def __init__(self, fun, program, compiler_options, jit_options, statics, tree, leaves, args, kwargs):
        self.fun, self.program, self.args, self.kwargs = fun, program, args, kwargs
        self.compiler_options, self.jit_options = compiler_options, jit_options
        self.statics, self.tree, self.leaves = statics, tree, leaves
        self.lowered = None

    def load_or_compile(self):
        folder = _usable_folder(cache_directory())
        path = folder / f"{self.key()}.bin" if folder is not None else None
        executable = _read(path, self.tree) if path is not None else None
        if executable is not None:
            _statistics["loaded"] += 1
            return executable
        executable = (self.lowered or self.program.lower(*self.args, **self.kwargs)).compile()
        _statistics["compiled"] += 1
        if path is not None:
            _write(path, executable)
        return executable

    def key(self) -> str:
        """SHA-256 of what determines the executable (module docstring): the program described by its function and
        arguments where every part is the package's or plain data, else by its lowered text."""
        try:
            program = "|".join([_package_name(self.fun), _describe(self.jit_options), _describe(self.statics),
                                _describe_tree(self.tree), _describe([_aval_text(leaf) for leaf in self.leaves])])
        except _NotDescribable:  # the lowered text holds the jit options that shape the program (donation, ...)
            self.lowered = self.program.lower(*self.args, **self.kwargs)
            program = self.lowered.as_text()
        tracing = _describe_trace_context(trace_context())
        text = "\n".join([_machine_and_package(), _describe(self.compiler_options), tracing, program])
        return hashlib.sha256(text.encode()).hexdigest()


def _aval_text(leaf) -> str:
    aval = jax.typeof(leaf)
    return f"{aval.dtype}{list(aval.shape)}{'weak' if aval.weak_type else ''}"


def _describe(value) -> str:
    """Text naming ``value`` the same way in every process: plain data (None, numbers, strings, bytes, NumPy dtypes,
    and tuples, lists and string-keyed dicts of them) and the package's module-level functions and classes;
    :class:`_NotDescribable` for anything else."""
    kind = type(value)
    if value is None or kind in (bool, int, float, complex, str, bytes):
        return f"{kind.__name__}:{value!r}"
    if kind in (tuple, list):
        return f"{kind.__name__}(" + ",".join(_describe(item) for item in value) + ")"
    if kind is dict and all(type(k) is str for k in value):
        return "dict(" + ",".join(f"{k!r}:{_describe(value[k])}" for k in sorted(value)) + ")"
    if isinstance(value, np.dtype):
        return f"dtype:{value}"
    return _package_name(value)


def _package_name(value) -> str:
    """``module.qualname`` of a module-level function or class of the package, found there by that name."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module.split(".")[0] != "bayesvm":
        raise _NotDescribable
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is None or inspect.unwrap(found) is not inspect.unwrap(value):  # the function or a wrapper of it
        raise _NotDescribable
    return f"{module}.{qualname}"


def _describe_tree(tree) -> str:
    """Text of a tree structure: its node types (built-in containers or the package's classes), their static data
    and children; :class:`_NotDescribable` where a node comes from outside the package."""
    node = tree.node_data()
    if node is None:
        return "*"
    kind, data = node
    name = kind.__name__ if kind in (tuple, list, dict, type(None)) else _package_name(kind)
    return f"{name}[{_describe(data)}](" + ",".join(_describe_tree(child) for child in tree.children()) + ")"


def _describe_trace_context(context) -> str:
    """JAX's tracing configuration (precision, default device, matmul precision, ...) as text: each setting's repr,
    an object without a repr of its own (an empty axis environment outside transformations) by its type."""
    return repr(tuple(type(item).__name__ if " at 0x" in repr(item) else repr(item) for item in context))


def _machine_and_package() -> str:
    """The versions, backend, devices, CPU, XLA flags and package source that a program's executable depends on,
    computed once per process."""
    if _process["machine"] is None:
        device = jax.devices()[0]
        parts = [f"jax {jax.__version__}", f"jaxlib {jax.lib.__version__}", f"python {platform.python_version()}",
                 f"backend {device.platform} {device.client.platform_version}", f"device {device.device_kind}",
                 f"devices {jax.device_count()}", f"cpu {_cpu_description()}",
                 f"XLA_FLAGS {os.environ.get('XLA_FLAGS', '')}", f"bayesvm {_package_source_hash()}"]
        _process["machine"] = "\n".join(parts)
    return _process["machine"]


def _cpu_description() -> str:
    """The CPU's model and instruction-set flags (Linux's /proc/cpuinfo, first processor), else the platform's
    machine and processor names: XLA compiles for the host CPU's features."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            first = cpuinfo.read().split("\n\n")[0]
        lines = [line for line in first.splitlines() if line.split(":")[0].strip() in
                 ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part")]
        if lines:
            return platform.machine() + " " + " ".join(" ".join(line.split()) for line in lines)
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _package_source_hash() -> str:
    """SHA-256 of the package's ``.py`` files (their paths and contents)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _usable_folder(folder: Path) -> Path | None:
    """``folder`` created private to the user (0700), or None (with one warning per process) where it cannot be
    created, or is not the user's own or may be written by others."""
    known = _process["folders"]
    if folder not in known:
        try:
            _make_private(folder)
            known[folder] = folder
        except OSError as error:
            known[folder] = None
            _warn_once(f"bayesvm's compilation cache in {str(folder)!r} cannot be used ({error}); each process "
                       f"compiles its own programs. Make the folder writable by you alone, or set "
                       f"{NO_CACHE_VARIABLE}=1 to turn the cache off.")
    return known[folder]


def _make_private(folder: Path) -> None:
    """Create ``folder`` and its missing parents with mode 0700; make it 0700 where it is the user's but open to
    others; PermissionError where it belongs to someone else."""
    for path in reversed([folder, *folder.parents]):
        if not path.exists():
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:  # another process made it first
                pass
    if not hasattr(os, "getuid"):  # no POSIX owners and modes (Windows): the user's profile folder is private
        return
    status = folder.stat()
    if status.st_uid != os.getuid():
        raise PermissionError(f"the folder belongs to user id {status.st_uid}, not to you")
    if stat.S_IMODE(status.st_mode) & 0o077:
        folder.chmod(0o700)


def _warn_once(message: str) -> None:
    if not _process["warned"]:
        _process["warned"] = True
        warn_user(message, BayesvmWarning)


def _read(path: Path, in_tree):
    """The executable in ``path`` for arguments of tree structure ``in_tree``, or None where it is missing or not a
    whole, valid file of this format."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header, digest, body = data[:len(_FILE_HEADER)], data[len(_FILE_HEADER):len(_FILE_HEADER) + 32], \
        data[len(_FILE_HEADER) + 32:]
    if header != _FILE_HEADER or hashlib.sha256(body).digest() != digest:
        return None
    if jax.default_backend() == "cpu":
        # the CPU's LAPACK kernels are bound when a program using them is lowered; a loaded program is not lowered
        # here, so bind them first as jax.export does for the programs it loads (a loaded Cholesky crashed otherwise)
        linalg.initialize_lapack()
    try:
        serialized, out_tree = pickle.loads(body)
        executable = serialize_executable.deserialize_and_load(serialized, in_tree, _tree_from_nodes(out_tree))

    except Exception:  # written by a JAX that reads it otherwise: compiled and written again
        return None
    try:
        os.utime(path)  # the least recently used files go first
    except OSError:
        pass
    return executable


def _tree_nodes(tree):
    """A tree structure as nested (node type, node data, children), None for a leaf: picklable by reference to the
    node types (a pickled PyTreeDef of named tuples crashed JAX 0.10's ``tree_unflatten``)."""
    node = tree.node_data()
    return None if node is None else (*node, [_tree_nodes(child) for child in tree.children()])


def _tree_from_nodes(nodes):
    """The tree structure that :func:`_tree_nodes` took apart."""
    if nodes is None:
        return jax.tree_util.tree_structure(0)
    kind, data, children = nodes
    return type(jax.tree_util.tree_structure(0)).from_node_data_and_children(
        jax.tree_util.default_registry, (kind, data), [_tree_from_nodes(child) for child in children])


def _write(path: Path, executable) -> None:
    """Write ``executable`` to ``path`` atomically (a temporary file in the same folder, then ``os.replace``), then
    keep the folder under :data:`MAX_CACHE_BYTES`. A program that JAX cannot serialise (one holding constants) is
    not written; a folder that cannot be written gives one warning and no further writes in this process."""
    try:
        serialized, _, out_tree = serialize_executable.serialize(executable)
        body = pickle.dumps((serialized, _tree_nodes(out_tree)), protocol=pickle.HIGHEST_PROTOCOL)
    except (ValueError, NotImplementedError, pickle.PicklingError, AttributeError, TypeError):
        return
    folder = path.parent
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        with os.fdopen(descriptor, "wb") as file:
            file.write(_FILE_HEADER + hashlib.sha256(body).digest() + body)
        os.replace(temporary, path)
    except OSError as error:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        _process["folders"][folder] = None
        _warn_once(f"bayesvm cannot write its compilation cache in {str(folder)!r} ({error}); each process compiles "
                   f"its own programs. Make the folder writable, or set {NO_CACHE_VARIABLE}=1 to turn the cache off.")
        return
    _evict(folder)


def _evict(folder: Path, limit: int = MAX_CACHE_BYTES) -> None:
    """Delete the least recently used files of ``folder`` until the rest hold at most ``limit`` bytes."""
    files = []
    for entry in os.scandir(folder):
        try:
            if entry.is_file(follow_symlinks=False):
                status = entry.stat(follow_symlinks=False)
                files.append((status.st_mtime, status.st_size, entry.path))
        except OSError:  # deleted by another process meanwhile
            continue
    total = sum(size for _, size, _ in files)
    for _, size, file in sorted(files):
        if total <= limit:
            break
        try:
            os.unlink(file)
        except OSError:
            pass
        total -= size

def _on_device(tree):
    """``tree`` with its NumPy arrays and scalars put on the device (JAX's ``device_put``), everything else as it is.

    ``jax.jit`` keeps one compiled program per kind of argument as well as per shape and type: a NumPy array and a
    device array (another program's output) of the same shape compile a program each. The package's host-side code
    passes both where a value comes now from NumPy and now from a program (EP's program takes the checks' Gram
    matrix from NumPy and the search's from the program that builds it), and each would compile twice
    (documentation: speed, "A first fit in a fresh process"). The transfer is the one jit makes for a NumPy argument
    anyway."""
    return jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf) if isinstance(leaf, (np.ndarray, np.generic))
                                  else leaf, tree)


def _cheap_to_compile(args, kwargs, max_elements: int = CHEAP_COMPILATION_MAX_ELEMENTS) -> bool:
    """Whether a call with these arguments compiles with the cheaper options: on the CPU, not traced, and no array
    argument holding more than ``max_elements`` numbers (see :func:`jit`)."""
    if jax.default_backend() != "cpu" or _traced(args, kwargs):
        return False
    sizes = (getattr(leaf, "size", 0) for leaf in jax.tree_util.tree_leaves((args, kwargs)))
    return max(sizes, default=0) <= max_elements
