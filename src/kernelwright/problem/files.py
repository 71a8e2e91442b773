"""Problem and candidate files: read, hashed and checked *statically* (their code is never executed here).

A problem is a KernelBench module (``class Model``, ``get_inputs()``, ``get_init_inputs()``); a candidate is a
KernelBench solution module (``class ModelNew``). Executing either happens only in the verifier's child processes
(:func:`import_from_path`). A problem that cannot be used is a user error (:class:`InputError`, exit 2); a candidate
that cannot be used is *data* — the verifier turns it into a verdict, because generated candidates fail routinely.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kernelwright.errors import InputError
from kernelwright.runtime.modules import load_module

_GLOBAL_KERNEL = re.compile(r"__global__\s+[^;{(]*?\b(\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_TRITON_DECORATORS = {"jit", "autotune", "heuristics"}


def _read_text(path: Path, role: str) -> str:
    if not path.exists():
        raise InputError(f"{role} file {path} does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{role} path {path} is a directory; pass the .py file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {role} file {path}: {exc.strerror}; check its permissions") from None
    if b"\x00" in data:
        raise InputError(f"{role} file {path} is binary, not Python source; pass the .py file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{role} file {path} is not UTF-8 text; save it as UTF-8") from None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _top_level_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a**b, ast.LShift: lambda a, b: a << b}


def _const_int(node: ast.expr) -> int | None:
    """The value of an integer constant expression (``4096``, ``2**26``, ``1 << 20``, ``8 * 1024``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        left, right = _const_int(node.left), _const_int(node.right)
        if left is not None and right is not None and (not isinstance(node.op, ast.Pow) or 0 <= right <= 64):
            return _INT_OPS[type(node.op)](left, right)
    return None


def _int_globals(tree: ast.Module) -> dict[str, int]:
    """Module-level integer constants — the problem's size knobs: ``NAME = <integer constant expression>``,
    chained (``height = width = 256``) and unpacked (``depth, height, width = 16, 32, 32``)."""
    found: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                pairs = [(target, node.value)]
            elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List))
                  and len(target.elts) == len(node.value.elts)):
                pairs = list(zip(target.elts, node.value.elts, strict=True))
            else:
                continue
            for name, expr in pairs:
                value = _const_int(expr) if isinstance(name, ast.Name) else None
                if value is not None:
                    found[name.id] = value
                elif isinstance(name, ast.Name):
                    found.pop(name.id, None)  # rebound to something else: not a size knob
    return found


# Tensor constructors whose positional arguments are all sizes (`torch.rand(batch_size, 3, 224, 224)`).
_SIZED_CONSTRUCTORS = frozenset({"rand", "randn", "zeros", "ones", "empty"})
LITERAL_PREFIX = "literal:"


def literal_key(value: int) -> str:
    """The size name of an integer written as a number in a shape: ``literal:224``."""
    return f"{LITERAL_PREFIX}{value}"


def sized_literals(function: ast.FunctionDef) -> list[ast.Constant]:
    """The integer literals among the shape arguments of ``torch.rand/randn/zeros/ones/empty`` calls in
    ``function`` (positional, or in a tuple or list given positionally)."""
    found: list[ast.Constant] = []
    for call in ast.walk(function):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr in _SIZED_CONSTRUCTORS and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "torch"):
            continue
        for arg in call.args:
            items = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
            found += [a for a in items if _size_constant(a)]
    return found


# Smaller numbers in a shape are channels, kernel sizes and the like (`torch.rand(n, 3, 224, 224)`'s 3), which no
# reduced size changes (problem/sizes.py shrinks nothing below 8).
LITERAL_MIN = 8


def display_literals(value: ast.expr) -> list[ast.Constant]:
    """The integer literals (of at least :data:`LITERAL_MIN`) that are elements of a tuple or list display:
    ``(batch_size, 3, 224, 224)``'s 224, ``[16384, 16384]``."""
    return [e for e in value.elts if _size_constant(e)] if isinstance(value, (ast.Tuple, ast.List)) else []


def _size_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= LITERAL_MIN


def _input_literals(tree: ast.Module) -> dict[str, int]:
    """Sizes written as numbers in shapes — inside ``get_inputs``' tensor constructors (``torch.rand(batch_size, 3,
    224, 224)``) and in module-level tuples and lists (``input_shape = (batch_size, 3, 224, 224)``, ``layer_sizes =
    [16384, 16384]``): KernelBench's level 3 sizes its networks that way. One name per distinct value, so that equal
    sizes stay equal."""
    found: list[ast.Constant] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            found += sized_literals(node)
        elif isinstance(node, ast.Assign):
            found += display_literals(node.value)
    return {literal_key(c.value): c.value for c in found}


@dataclass(frozen=True, kw_only=True)
class ProblemFile:
    path: Path
    source: str
    sha256: str
    has_init_inputs: bool
    size_globals: dict[str, int]  # module-level int constants (candidates for a second-shape trial)
    # Sizes written as numbers in shapes (`literal:224`, get_inputs' tensors and module-level tuples and lists):
    # reduced sizes may change them too, every occurrence of the number at once.
    size_literals: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def sizes(self) -> dict[str, int]:
        """Every size a check may change: the module's integer constants and the literal sizes."""
        return {**self.size_globals, **self.size_literals}


def read_problem(path: str | Path) -> ProblemFile:
    """Read and check a KernelBench problem file; raise :class:`InputError` with a one-line fix if unusable."""
    path = Path(path)
    source = _read_text(path, "problem")
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise InputError(f"problem {path}:{exc.lineno}: syntax error: {exc.msg}; fix the file") from None
    names = _top_level_names(tree)
    missing = [n for n in ("Model", "get_inputs") if n not in names]
    if missing:
        raise InputError(
            f"problem {path} does not define {' or '.join(missing)}; a KernelBench problem needs "
            "class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    if not isinstance(names["Model"], ast.ClassDef):
        raise InputError(f"problem {path}: Model must be a class (an nn.Module), not a {type(names['Model']).__name__}")
    return ProblemFile(
        path=path.resolve(),
        source=source,
        sha256=_sha256(source),
        has_init_inputs="get_init_inputs" in names,
        size_globals=_int_globals(tree),
        size_literals=_input_literals(tree),
    )


@dataclass(frozen=True, kw_only=True)
class CandidateFile:
    path: Path
    source: str
    sha256: str
    syntax_error: str | None  # one line, with the line number, when the file does not parse
    has_model_new: bool
    triton_kernels: tuple[str, ...]  # functions decorated with triton.jit / autotune / heuristics
    cuda_kernels: tuple[str, ...]  # __global__ functions named in the file's string literals
    uses_load_inline: bool
    # Hooks Triton's compile pipeline (a PTX-rewriting candidate, generate/ptx_variant.py): code below Triton's own.
    rewrites_ptx: bool = False

    @property
    def problem_with_structure(self) -> str | None:
        """A one-line reason this candidate cannot run at all, or None."""
        if self.syntax_error:
            return self.syntax_error
        if not self.has_model_new:
            return (
                f"candidate {self.path.name} defines no class ModelNew; a KernelBench solution must define "
                "class ModelNew(nn.Module) with the problem's constructor arguments"
            )
        return None


def _decorator_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def global_functions(cuda_source: str) -> set[str]:
    """The names of the ``__global__`` functions a CUDA source defines."""
    return {m.group(1) for m in _GLOBAL_KERNEL.finditer(_LAUNCH_BOUNDS.sub(" ", cuda_source))}


def read_candidate(path: str | Path) -> CandidateFile:
    """Read a candidate; only an unreadable file raises (:class:`InputError`), everything else is data."""
    path = Path(path)
    source = _read_text(path, "candidate")
    syntax_error = None
    triton_kernels: list[str] = []
    strings: list[str] = []
    has_model_new = False
    uses_load_inline = "load_inline" in source
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        syntax_error = f"candidate {path.name}:{exc.lineno}: syntax error: {exc.msg}"
        tree = None
    if tree is not None:
        # A class statement, or a name bound to one (``ModelNew = _Impl``, ``from .impl import ModelNew``): the
        # child checks that it is a class once the module has run.
        has_model_new = isinstance(_top_level_names(tree).get("ModelNew"),
                                   (ast.ClassDef, ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _decorator_name(d) in _TRITON_DECORATORS for d in node.decorator_list
            ):
                triton_kernels.append(node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.append(node.value)
    cuda_kernels = sorted({name for text in strings for name in global_functions(text)})
    return CandidateFile(
        path=path.resolve(),
        source=source,
        sha256=_sha256(source),
        syntax_error=syntax_error,
        has_model_new=has_model_new,
        triton_kernels=tuple(sorted(set(triton_kernels))),
        cuda_kernels=tuple(cuda_kernels),
        uses_load_inline=uses_load_inline,
        rewrites_ptx="add_stages_inspection_hook" in source,
    )


def import_from_path(path: str | Path, module_name: str) -> ModuleType:
    """Execute a Python file as module ``module_name`` (registered in ``sys.modules`` so that Triton's and
    pickle's look-ups by module work). Only the verifier's child processes call this."""
    return load_module(module_name, Path(path))
