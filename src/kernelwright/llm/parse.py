"""Getting a Python file out of an LLM's response, or a one-line reason to send back to the model.

    source = extract_modelnew(response_text, finish_reason="stop")     # a KernelBench ModelNew file
    problem = extract_problem(response_text)                           # a KernelBench problem file

Responses come in every shape: reasoning inline (``<think>…</think>``, as vLLM serves DeepSeek-R1), prose around
one or several fenced blocks (```` ``` ```` or ``~~~``, tagged ``python``/``py`` or not), a bare file with no fence,
or an answer cut off by the token limit. A failure is a :class:`ParseFailure` whose message is one line meant to
be fed back to the model verbatim. Nothing here runs the code: it is only parsed with :mod:`ast`.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__"}
_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "pytorch", "torch"})
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")


class ParseFailure(ValueError):
    """The response holds no usable file; ``str(failure)`` is one line to feed back to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(" ".join(reason.split()))

    @property
    def reason(self) -> str:
        return str(self)


# ----------------------------------------------------------------------------------------------------- reasoning


def _split_reasoning(text: str) -> tuple[str, bool]:
    """The answer without reasoning, and whether the text ended inside an unclosed ``<think>``."""
    text = _THINK_BLOCK.sub("", text)
    # Servers that put "<think>" in the prompt template return only the closing tag: drop what precedes it.
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:
        return text[: opened.start()], True
    return text, False


def strip_reasoning(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks. Text after an unclosed ``<think>`` is reasoning too (the answer
    never came), so a response that is nothing but unfinished reasoning gives ``""``."""
    return _split_reasoning(text)[0].strip()


# ----------------------------------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class _Block:
    code: str
    tag: str  # the fence's language tag, lower case ("" when none)
    start_line: int  # 1-based line of the opening fence in the answer
    closed: bool

    @property
    def maybe_python(self) -> bool:
        return self.tag in _PYTHON_TAGS or self.tag == ""


def _fenced_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        tag = (opening.group("info").split() or [""])[0].lower().lstrip(".{").rstrip("}")
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (closing and closing.group("fence")[0] == fence[0] and len(closing.group("fence")) >= len(fence)
                    and not closing.group("info")):
                closed = True
                break
            body.append(lines[j])
            j += 1
        blocks.append(_Block(code=textwrap.dedent("\n".join(body)).strip("\n"), tag=tag, start_line=i + 1,
                             closed=closed))
        i = j + 1
    return blocks


def _parse(code: str) -> ast.Module | SyntaxError:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # e.g. NUL bytes
        return SyntaxError(str(exc))


def _describe_syntax_error(exc: SyntaxError, code: str) -> str:
    where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
    text = ""
    if exc.lineno and 0 < exc.lineno <= len(code.splitlines()):
        text = code.splitlines()[exc.lineno - 1].strip()
    shown = f" (`{text[:80]}`)" if text else ""
    return f"{where}: {exc.msg}{shown}"


# ----------------------------------------------------------------------------------------------------- names


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
                elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return names


def _free_names(tree: ast.Module) -> set[str]:
    """Names a module reads that nothing in it binds (anywhere) and that are not builtins: what another block of
    the same response must provide."""
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound - _BUILTINS


def _defines_class(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def _defines_function(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


_CLASS_LINE = "^[ \t]*class[ \t]+{name}\\b"


def _mentions_class(code: str, name: str) -> bool:
    return re.search(_CLASS_LINE.format(name=re.escape(name)), code, re.MULTILINE) is not None


def _join(main: _Block, main_tree: ast.Module, others: list[tuple[_Block, ast.Module]]) -> str:
    """``main`` plus the other blocks that bind names it (or a block it pulls in) needs, in response order, their
    imports first. A lone self-sufficient block comes back unchanged."""
    chosen: list[tuple[_Block, ast.Module]] = [(main, main_tree)]

    def missing() -> set[str]:
        free = set().union(*(_free_names(t) for _, t in chosen))
        return free - set().union(*(_top_level_names(t) for _, t in chosen))

    needed = missing()
    while needed:
        extra = next(((b, t) for b, t in others if all(b is not c for c, _ in chosen)
                      and _top_level_names(t) & needed), None)
        if extra is None:
            break
        chosen.append(extra)
        needed = missing()
    if len(chosen) == 1:
        return main.code
    chosen.sort(key=lambda bt: bt[0].start_line)
    imports: list[str] = []
    bodies: list[str] = []
    for block, tree in chosen:
        lines = block.code.splitlines()
        drop: set[int] = set()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                span = range(node.lineno - 1, (node.end_lineno or node.lineno))
                text = "\n".join(lines[k] for k in span)
                if text not in imports:
                    imports.append(text)
                drop.update(span)
        body = "\n".join(line for k, line in enumerate(lines) if k not in drop).strip("\n")
        if body:
            bodies.append(body)
    future = [i for i in imports if i.startswith("from __future__")]
    ordered = future + [i for i in imports if i not in future]
    return "\n".join(ordered) + "\n\n\n" + "\n\n\n".join(bodies)


# ----------------------------------------------------------------------------------------------------- extraction


def _cut_off(finish_reason: str | None) -> str:
    return " (finish_reason=length: the token limit was reached)" if finish_reason == "length" else ""


def _extract(text: str, *, finish_reason: str | None, wanted: str,
             accepts: Callable[[ast.Module], bool]) -> tuple[str, ast.Module]:
    """The source (and its tree) of the file in ``text`` that defines class ``wanted``."""
    answer, unclosed_think = _split_reasoning(text)
    blocks = _fenced_blocks(answer)
    if unclosed_think and not blocks:
        raise ParseFailure(f"the response ended inside its <think> reasoning, before any answer{_cut_off(finish_reason)};"
                           f" reason briefly, then give the whole file defining class {wanted} in one ```python block")
    python = [b for b in blocks if b.maybe_python and b.code.strip()]
    if not blocks:
        bare = textwrap.dedent(answer).strip("\n")
        if bare and _mentions_class(bare, wanted):
            python = [_Block(code=bare, tag="python", start_line=1, closed=True)]
    parsed = [(b, _parse(b.code)) for b in python]
    good = [(b, t) for b, t in parsed if isinstance(t, ast.Module)]
    with_class = [(b, t) for b, t in good if accepts(t)]
    if with_class:
        main, tree = with_class[-1]  # a response that revises its code gives the final version last
        others = [(b, t) for b, t in good if not accepts(t)]
        source = _join(main, tree, others)
        joined = _parse(source)
        if isinstance(joined, SyntaxError):  # should not happen: every part parsed on its own
            source, joined = main.code, tree
        return source.rstrip() + "\n", joined
    broken = [(b, t) for b, t in parsed if isinstance(t, SyntaxError) and _mentions_class(b.code, wanted)]
    if broken:
        block, error = broken[-1]
        detail = _describe_syntax_error(error, block.code)
        if not block.closed:
            raise ParseFailure(f"the answer was cut off{_cut_off(finish_reason)} inside the code block, which has a "
                               f"syntax error at {detail}; give a shorter complete file")
        raise ParseFailure(f"the python code block defining class {wanted} has a syntax error at {detail}")
    if python and any(not b.closed for b in python) and finish_reason == "length":
        raise ParseFailure(f"the answer was cut off{_cut_off(finish_reason)} before class {wanted} was written; "
                           "give a shorter complete file")
    if good:
        raise ParseFailure(f"the python code in the response defines no class {wanted}; the file must define "
                           f"class {wanted}")
    unparsable = [(b, t) for b, t in parsed if isinstance(t, SyntaxError) and b.tag in _PYTHON_TAGS]
    if unparsable:
        block, error = unparsable[-1]
        raise ParseFailure(f"the python code block has a syntax error at {_describe_syntax_error(error, block.code)} "
                           f"and defines no class {wanted}")
    if finish_reason == "length":
        raise ParseFailure(f"the answer was cut off{_cut_off(finish_reason)} before any code block; give the whole "
                           f"file defining class {wanted} in one ```python block")
    raise ParseFailure(f"no python code block defining class {wanted} in the response; give the whole file in one "
                       "```python block")


def extract_modelnew(text: str, *, finish_reason: str | None = None) -> str:
    """The KernelBench ``ModelNew`` file in an LLM response, with a trailing newline.

    Picks the (last) Python block defining ``class ModelNew``; when it uses names that other Python blocks of the
    response define (kernels, helpers, imports), those blocks are joined in (imports first, then the blocks in the
    order they appear). A block cut off by the token limit is accepted when what is there parses and defines
    ``ModelNew``. Raises :class:`ParseFailure` otherwise."""
    source, _ = _extract(text, finish_reason=finish_reason, wanted="ModelNew",
                         accepts=lambda tree: _defines_class(tree, "ModelNew"))
    return source


def extract_problem(text: str, *, finish_reason: str | None = None) -> str:
    """The KernelBench problem file (``class Model``, ``get_inputs``, ``get_init_inputs``) in an LLM response.

    ``def get_init_inputs(): return []`` is appended when it is missing; a file without ``get_inputs`` is a
    :class:`ParseFailure`."""
    source, tree = _extract(text, finish_reason=finish_reason, wanted="Model",
                            accepts=lambda tree: _defines_class(tree, "Model"))
    if not _defines_function(tree, "get_inputs"):
        raise ParseFailure("the problem file defines no get_inputs(); it must return the list of forward inputs "
                           "(CPU tensors)")
    if not _defines_function(tree, "get_init_inputs"):
        source += "\n\ndef get_init_inputs():\n    return []\n"
    return source
