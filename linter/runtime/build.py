"""Importing a target, building the model on a device, and remembering where each sub-module
was created (the user's source line)."""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import importlib.util
import inspect
import linecache
import os
import sys
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.overrides import TorchFunctionMode
from torch.utils.hooks import RemovableHandle

from modellint.runtime.sources import UserCode
from modellint.static.discover import read_file_bytes

_LOADED: dict[str, Any] = {}


class BuildError(Exception):
    """The model could not be built; `phase` is "import" or "build"."""

    def __init__(self, message: str, phase: str, exc: BaseException | None = None,
                 location: tuple[str, int, str] | None = None) -> None:
        super().__init__(message)
        self.phase = phase
        self.exc = exc
        self.location = location


_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


# calls that only read the machine or build a plain value: a file's top level that binds
# `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` or
# `logger = logging.getLogger(__name__)` keeps them, as the model's code reads them
PURE_CALLS = frozenset({
    "torch.device", "torch.cuda.is_available", "torch.cuda.device_count",
    "torch.backends.mps.is_available", "torch.backends.cudnn.is_available",
    "logging.getLogger", "os.environ.get", "os.getenv", "functools.partial",
    "collections.namedtuple", "typing.TypeVar", "typing.NewType", "math.sqrt", "math.log",
})


def _constant(node: ast.expr | None, bound: _Bound) -> bool:
    """Whether evaluating `node` calls nothing but `PURE_CALLS`: literals, names, attributes
    (aliases such as `Norm = nn.LayerNorm`), and containers, operators, comparisons and
    conditional expressions of those."""
    if node is None or isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Attribute):
        return _constant(node.value, bound)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_constant(e, bound) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_constant(k, bound) and _constant(v, bound)
                   for k, v in zip(node.keys, node.values, strict=True))
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand, bound)
    if isinstance(node, ast.BinOp):
        return _constant(node.left, bound) and _constant(node.right, bound)
    if isinstance(node, ast.BoolOp):
        return all(_constant(v, bound) for v in node.values)
    if isinstance(node, ast.Compare):
        return _constant(node.left, bound) and all(_constant(c, bound) for c in node.comparators)
    if isinstance(node, ast.Subscript):
        return _constant(node.value, bound) and _constant(node.slice, bound)
    if isinstance(node, ast.IfExp):
        return all(_constant(part, bound) for part in (node.test, node.body, node.orelse))
    if isinstance(node, ast.Call):
        return bound.calls_pure(node.func) and all(
            _constant(a.value if isinstance(a, ast.Starred) else a, bound) for a in node.args
        ) and all(_constant(k.value, bound) for k in node.keywords)
    return False


def _dotted(node: ast.expr) -> list[str] | None:
    """`torch.cuda.is_available` as its parts, None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else [*head, node.attr]
    return None


def _names(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    return isinstance(target, (ast.Tuple, ast.List)) and all(_names(e) for e in target.elts)


def _main_guard(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(test))


# names a module has before its first line runs
_MODULE_NAMES = frozenset({*dir(builtins), "__name__", "__file__", "__doc__", "__spec__",
                           "__loader__", "__package__", "__builtins__", "__cached__"})


class _Bound:
    """The names the statements kept so far bind (a `from m import *` may bind any)."""

    def __init__(self) -> None:
        self.names: set[str] = set(_MODULE_NAMES)
        self.any = False
        self.modules: dict[str, str] = {}  # a bound name -> the module it is (`nn`: torch.nn)
        # a name only left-out statements bind -> the line of the first of them
        self.left_out: dict[str, int] = {}

    def calls_pure(self, func: ast.expr) -> bool:
        parts = _dotted(func)
        if not parts or parts[0] not in self.modules:
            return False
        return ".".join([self.modules[parts[0]], *parts[1:]]) in PURE_CALLS

    def leave_out(self, node: ast.stmt) -> None:
        """Record the module-level names `node` binds (not those of the functions, classes and
        comprehensions inside it, which are their own)."""
        pending: list[ast.AST] = [node]
        while pending:
            inner = pending.pop()
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                self.left_out.setdefault(inner.id, node.lineno)
            elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.left_out.setdefault(inner.name, node.lineno)
                continue
            elif isinstance(inner, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                    ast.GeneratorExp)):
                continue
            pending.extend(ast.iter_child_nodes(inner))

    def has_all(self, node: ast.AST) -> bool:
        """Whether every name `node` reads is bound: a kept statement that reads a name whose
        binding was left out (`use_accel = torch.cuda.is_available()`) would stop the import
        with a NameError, so it is left out too."""
        return self.any or all(n.id in self.names for n in ast.walk(node)
                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))

    def bind(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    self.any = True
                bound = alias.asname or alias.name.split(".")[0]
                self.names.add(bound)
                if isinstance(node, ast.Import):
                    self.modules[bound] = alias.name if alias.asname else bound
                elif node.module and not node.level:
                    self.modules[bound] = f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names.add(node.name)
            self.modules.pop(node.name, None)  # no longer the module it was imported as
        else:
            targets = node.targets if isinstance(node, ast.Assign) else [
                getattr(node, "target", None)]
            for target in targets:
                for name in ast.walk(target) if target is not None else ():
                    if isinstance(name, ast.Name):
                        self.names.add(name.id)
                        self.modules.pop(name.id, None)


def _definitions(body: list[ast.stmt], bound: _Bound) -> list[ast.stmt]:
    kept: list[ast.stmt] = []
    for node in body:
        if isinstance(node, _DEFINITIONS):
            kept.append(node)
            bound.bind(node)
        elif isinstance(node, ast.Assign) and all(_names(t) for t in node.targets) and (
                _constant(node.value, bound)) and bound.has_all(node.value):
            kept.append(node)
            bound.bind(node)
        elif isinstance(node, ast.AnnAssign) and _names(node.target) \
                and _constant(node.value, bound) \
                and (node.value is None or bound.has_all(node.value)):
            kept.append(node)
            if node.value is not None:
                bound.bind(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            kept.append(node)  # the docstring
        elif isinstance(node, ast.If) and not _main_guard(node.test) \
                and _constant(node.test, bound) and bound.has_all(node.test):
            # `if TYPE_CHECKING:`, `if sys.version_info >= (3, 11):`
            node.body = _definitions(node.body, bound) or [ast.Pass()]
            node.orelse = _definitions(node.orelse, bound)
            kept.append(node)
        elif isinstance(node, ast.Try):
            # `try: import apex` / `except ImportError: apex = None`
            node.body = _definitions(node.body, bound) or [ast.Pass()]
            for handler in node.handlers:
                handler.body = _definitions(handler.body, bound) or [ast.Pass()]
            node.orelse = _definitions(node.orelse, bound)
            node.finalbody = _definitions(node.finalbody, bound)
            kept.append(node)
        else:
            bound.leave_out(node)
    return kept


class Definitions(NamedTuple):
    tree: ast.Module
    left_out: dict[str, int]  # a name only left-out statements bind -> the first one's line


def definitions_only(source: str | bytes, filename: str) -> Definitions:
    """A file's definitions without its script body: imports, classes, functions and
    assignments that call nothing but `PURE_CALLS` (and `if`/`try` blocks of those) are kept;
    every other statement, `if __name__ == "__main__":` included, is left out, and so is a
    kept kind of statement that reads a name only a left-out one binds. Line numbers stay."""
    tree = ast.parse(source, filename)
    bound = _Bound()
    tree.body = _definitions(tree.body, bound)
    left_out = {name: line for name, line in bound.left_out.items() if name not in bound.names}
    return Definitions(ast.fix_missing_locations(tree), left_out)


# a file `import_file` imported -> the names only its left-out statements bind
_LEFT_OUT: dict[str, dict[str, int]] = {}


def left_out_binding(exc: BaseException) -> tuple[str, str, int] | None:
    """(the name, the file, the line that binds it) when `exc` is the NameError of a name
    that a file `import_file` imported binds only in a statement the import left out: the
    runtime pass's doing, not a mistake of the model."""
    name = getattr(exc, "name", None)
    tb = exc.__traceback__
    if not isinstance(exc, NameError) or not isinstance(name, str) or tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = tb.tb_frame.f_globals.get("__file__")
    if not isinstance(path, str) or name not in _LEFT_OUT.get(path, {}):
        return None
    return name, path, _LEFT_OUT[path][name]


def package_root(path: str) -> tuple[str, str]:
    """(the folder to import `path` from, its module's dotted name), as pytest's `prepend`
    import mode finds them: the file's package is every folder above it that holds an
    `__init__.py`, and the first folder above those is the root (`src/pkg/sub/model.py` with
    `pkg/__init__.py` and `pkg/sub/__init__.py` is `pkg.sub.model`, imported from `src/`). A
    file outside any package is its own module, imported from its folder."""
    directory, filename = os.path.split(os.path.abspath(path))
    parts = [os.path.splitext(filename)[0]]
    if parts[0] == "__init__":
        parts = []
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        if not package.isidentifier():
            break
        parts.insert(0, package)
    return directory, ".".join(parts)


def import_file(path: str):
    """Import a file's definitions as a module (`definitions_only`): a training script's
    top-level code does not run. The modules it imports are imported as usual; a file in a
    package is imported under its package's name (`package_root`), so that its relative
    imports work and its package's `__init__.py` runs as on any import."""
    path = os.path.abspath(path)
    if path in _LOADED:
        return _LOADED[path]
    directory, dotted = package_root(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    package = dotted.rpartition(".")[0] if "." in dotted else ""
    if package:
        importlib.import_module(package)
        name = dotted
        existing = sys.modules.get(name)
        if existing is not None and os.path.abspath(getattr(existing, "__file__", None) or "") == path:
            # the package's `__init__.py` imported it already, top-level code and all
            _LOADED[path] = existing
            return existing
    else:
        stem = os.path.splitext(os.path.basename(path))[0]
        name = stem if stem.isidentifier() and stem not in sys.modules else (
            f"_modellint_{abs(hash(path)):x}_{stem}".replace("-", "_")
        )
    source = _notebook_program(path)
    if source is None:
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        spec = importlib.util.spec_from_loader(name, None, origin=path)
    if spec is None or (source is None and spec.loader is None):
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module
    try:
        # bytes: Python's own reading of an encoding declaration
        definitions = definitions_only(read_file_bytes(path) if source is None else source,
                                       path)
        _LEFT_OUT[path] = definitions.left_out
        code = compile(definitions.tree, path, "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the file's definitions, as an import would
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if package:
        setattr(sys.modules[package], name.rpartition(".")[2], module)
    _LOADED[path] = module
    return module


def _notebook_program(path: str) -> str | None:
    """A notebook's code cells joined, magics masked (None: `path` is no notebook), as the
    static pass lints them: its lines are the ones the static pass gave its classes. They
    become the file's lines for `inspect` and tracebacks (the JSON text would not be)."""
    from modellint.static.notebook import NotebookError, read_notebook_file

    try:
        book = read_notebook_file(path)
    except NotebookError as exc:
        raise ImportError(f"{os.path.basename(path)} is not a notebook modellint can read: "
                          f"{exc}") from None
    if book is None:
        return None
    # no modification time: `linecache.checkcache` keeps the entry
    linecache.cache[path] = (len(book.source), None, book.source.splitlines(True), path)
    return book.source


def resolve(job: dict[str, Any]):
    """The class or factory a job names, and the folders whose code counts as the user's."""
    if job.get("file"):
        module = import_file(job["file"])
        directory, dotted = package_root(job["file"])
        # a package's files are all the user's: the folder of its top package
        allowed = [os.path.join(directory, dotted.split(".")[0]) if "." in dotted
                   else os.path.dirname(os.path.abspath(job["file"]))]
    else:
        module = importlib.import_module(job["module"])
        top = importlib.import_module(job["module"].split(".")[0])
        allowed = [os.path.dirname(os.path.abspath(f)) for f in [getattr(top, "__file__", None)]
                   if f]
    try:
        return getattr(module, job["name"]), allowed
    except AttributeError:
        raise AttributeError(f"`{job['module'] or job['file']}` has no `{job['name']}`") from None


def required_arguments(factory) -> list[str]:
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    names = []
    params = list(signature.parameters.values())
    if inspect.isclass(factory) and params and params[0].name in ("self", "cls"):
        params = params[1:]
    for param in params:
        if param.default is inspect.Parameter.empty and param.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            names.append(param.name)
    return names


class CreationRecorder:
    """A global module-registration hook: for every sub-module registered while it is active,
    the innermost user frame (file, line) — the line that built it."""

    def __init__(self, user_code: UserCode) -> None:
        self.user_code = user_code
        self.lines: dict[int, tuple[str, int]] = {}
        self._keep: list[nn.Module] = []
        self._handle: RemovableHandle | None = None

    def _hook(self, parent, name, submodule):
        if submodule is not None and id(submodule) not in self.lines:
            found = self.user_code.innermost_frame(sys._getframe(1))
            if found is not None:
                self.lines[id(submodule)] = (found[0], found[1])
                self._keep.append(submodule)
        return None

    def __enter__(self) -> CreationRecorder:
        self._handle = module_hooks.register_module_module_registration_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None


_INIT_OPS = frozenset({"normal_", "uniform_", "fill_", "zero_", "exponential_", "geometric_",
                       "log_normal_", "cauchy_", "random_", "bernoulli_", "trunc_normal_",
                       "orthogonal_", "copy_", "clamp_", "mul_", "div_", "add_", "sub_",
                       "erfinv_"})


class SkipMetaInit(TorchFunctionMode):
    """Initialisation writes into meta tensors are no-ops: skipping them saves the import of
    torch's Python reference ops (seconds) while building on `meta`. With `parameters=True`
    initialisation of any `nn.Parameter` is skipped too: for a twin whose parameters
    `load_state_dict(strict=True)` overwrites anyway."""

    def __init__(self, parameters: bool = False) -> None:
        super().__init__()
        self.parameters = parameters

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _INIT_OPS or (
            name.endswith("_") and getattr(func, "__module__", "") == "torch.nn.init"
        ):
            target = args[0] if args else kwargs.get(
                "tensor", kwargs.get("self", kwargs.get("input")))
            if isinstance(target, torch.Tensor) and (
                target.is_meta or (self.parameters and isinstance(target, nn.Parameter))
            ):
                return target
        return func(*args, **kwargs)


def build(factory, kwargs: dict[str, Any], device: str, recorder: CreationRecorder | None,
          seed: int = 0, skip_parameter_init: bool = False) -> nn.Module:
    torch.manual_seed(seed)
    with contextlib.ExitStack() as stack:
        if recorder is not None:
            stack.enter_context(recorder)
        stack.enter_context(torch.device(device))
        if device == "meta" or skip_parameter_init:
            stack.enter_context(SkipMetaInit(parameters=skip_parameter_init))
        model = factory(**kwargs)
    if not isinstance(model, nn.Module):
        raise TypeError(f"it returned a {type(model).__name__}, not an nn.Module")
    if device != "meta":
        # parameters made outside the device context (e.g. by a library) follow the model
        leftovers = any(p.device != torch.device(device) for p in model.parameters())
        if leftovers:
            model.to(device)
    return model


def parameter_count_on_meta(factory, kwargs) -> int | None:
    """Parameters of the model built on `meta` (no memory); None when that fails."""
    try:
        with torch.device("meta"), SkipMetaInit():
            model = factory(**kwargs)
        if not isinstance(model, nn.Module):
            return None
        return sum(p.numel() * p.element_size() for p in model.parameters())
    except Exception:  # noqa: BLE001 - some models cannot be built on meta
        return None


def available_memory(device: str) -> int | None:
    if device.startswith("cuda") and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return free
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
