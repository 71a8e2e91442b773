"""Named, documented rewrites of a kernel's PTX (issue 30 item 2), each assembled by ptxas for the target arch
before it is offered: what Triton (or nvcc) wrote, with one change a kernel engineer would try by hand.

==================  ==============================================================================================
``no-allocate-loads``  global loads without an L1 qualifier get ``.L1::no_allocate``: streamed data does not evict
                    what L1 holds for reuse (a memory-bound kernel that reads each byte once)
``evict-first-loads``  ... get ``.L1::evict_first``: kept in L1 only until something else needs the line
``streaming-stores``   global stores without a cache operator get ``.cs`` (cache-streaming: likely accessed once,
                    allocated with evict-first in L1 and L2)
``evict-last-loads``   ... get ``.L1::evict_last``: data a kernel will read again (a GEMM's operand tiles)
==================  ==============================================================================================

Each pass only adds a qualifier where the instruction has none of its kind (a Triton ``eviction_policy`` hint, an
``.nc`` load, a cache operator or a ``.cg`` store stays as written); predicated instructions and vector widths are
kept. A rewrite is a candidate like any other: :func:`rewrite_ptx` says what changed, ``kernelwright inspect
A.ptx --diff B.ptx`` shows the SASS difference, a candidate file carries passes through Triton's compile hook
(generate/ptx_variant.py) and the search times them beside the plain kernel (search/rewrites.py): only timing says
whether one helps. Passes that change semantics (``.nc`` loads of data a kernel also writes) are not offered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# A pass: (instruction, qualifier added right after it, left alone if a qualifier contains one of these, left alone if
# the first qualifier is one of these). Data, so that a candidate carrying a rewrite (generate/ptx_variant.py) holds
# the same rules and the same applier, ``rewrite_lines``, as the library.
Rule = tuple[str, str, tuple[str, ...], tuple[str, ...]]
_LOAD_COP = (".nc", ".ca", ".cg", ".cs", ".lu", ".cv")  # a cache operator and an L1 eviction priority exclude each other
PASSES: dict[str, Rule] = {
    "no-allocate-loads": ("ld.global", "L1::no_allocate", ("L1::",), _LOAD_COP),
    "evict-first-loads": ("ld.global", "L1::evict_first", ("L1::",), _LOAD_COP),
    "evict-last-loads": ("ld.global", "L1::evict_last", ("L1::",), _LOAD_COP),
    "streaming-stores": ("st.global", "cs", ("L1::", "L2::"), (".wb", ".cg", ".cs", ".wt")),
}


@dataclass(frozen=True)
class Rewrite:
    name: str
    ptx: str
    changed: int  # instructions rewritten
    examples: tuple[tuple[str, str], ...]  # (before, after) of the first few


def rewrite_lines(ptx, rule):
    """``ptx`` with ``rule`` applied to its instructions (directives and comments untouched): the new text, the
    number of instructions changed and up to three (before, after) pairs. Plain Python and ``re`` alone: a
    candidate file carries this function's source as it is."""
    opcode, qualifier, skip_within, skip_first = rule
    pattern = re.compile(r"(\b" + re.escape(opcode) + r")((?:\.[A-Za-z0-9_:]+)*)")

    def qualify(match):
        head, rest = match.group(1), match.group(2)
        if any(q in rest for q in skip_within) or any(rest.startswith(q) for q in skip_first):
            return match.group(0)
        return f"{head}.{qualifier}{rest}"

    out, changed, examples = [], 0, []
    for line in ptx.splitlines(keepends=True):
        code = line.split("//", 1)[0]
        if not code.strip() or code.lstrip().startswith("."):
            out.append(line)
            continue
        new = pattern.sub(qualify, line)
        if new != line:
            changed += 1
            if len(examples) < 3:
                examples.append((line.strip(), new.strip()))
        out.append(new)
    return "".join(out), changed, examples


def rewrite_ptx(ptx: str, name: str) -> Rewrite:
    """``ptx`` with the pass ``name`` applied (instructions only: directives and comments untouched)."""
    if name not in PASSES:
        raise ValueError(f"no PTX rewrite {name!r}: use one of {', '.join(PASSES)}")
    text, changed, examples = rewrite_lines(ptx, PASSES[name])
    return Rewrite(name=name, ptx=text, changed=changed, examples=tuple(examples))


def rewrite_all(ptx: str, names: Sequence[str]) -> Rewrite:
    """Several passes in order, as one rewrite (``changed``: the instructions any of them changed)."""
    text, changed, examples = ptx, 0, []
    for name in names:
        step = rewrite_ptx(text, name)
        text, changed, examples = step.ptx, changed + step.changed, [*examples, *step.examples]
    return Rewrite(name="+".join(names), ptx=text, changed=changed, examples=tuple(examples[:3]))
