"""The prose of the prompts: ``prompts/*.md`` read as :class:`string.Template` files, their ``## heading``
sections, and the short explanations of ``prompts/hints.md``.

Kept apart from the code that picks the pieces (:mod:`.prompting`, :mod:`.feedback`, :mod:`.target`) so that every
one of them reads the files the same way and a missing template or value fails with one error type.
"""

from __future__ import annotations

import functools
import re
import string
from importlib import resources
from typing import Any


class PromptTemplateError(LookupError):
    """A prompt template is missing, or a placeholder in it was given no value (a defect, not a user error)."""


def _read(name: str) -> str:
    try:
        return resources.files("kernelwright.llm").joinpath("prompts").joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptTemplateError(f"prompt template {name!r} is missing from kernelwright/llm/prompts") from None


@functools.cache
def load_template(name: str) -> string.Template:
    """``prompts/<name>`` as a :class:`string.Template`."""
    return string.Template(_read(name))


def render(name: str, **values: Any) -> str:
    """``prompts/<name>`` with every ``$placeholder`` filled; a placeholder without a value is an error."""
    template = load_template(name)
    try:
        text = template.substitute(values)
    except KeyError as exc:
        raise PromptTemplateError(f"prompt template {name!r} needs a value for ${exc.args[0]}") from None
    except ValueError as exc:
        raise PromptTemplateError(f"prompt template {name!r} has a malformed placeholder: {exc}") from None
    return text.strip("\n")


def placeholders(name: str) -> set[str]:
    """The placeholder names ``prompts/<name>`` uses."""
    pattern = load_template(name).pattern
    found = set()
    for match in pattern.finditer(load_template(name).template):
        key = match.group("named") or match.group("braced")
        if key:
            found.add(key)
    return found


@functools.cache
def _sections(name: str) -> dict[str, str]:
    """``## heading`` sections of ``prompts/<name>``."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in _read(name).splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip("\n") for k, v in sections.items()}


@functools.cache
def _hints(section: str) -> dict[str, str]:
    """The ``- `key`: text`` items of one section of ``prompts/hints.md``, in file order."""
    items: dict[str, str] = {}
    key = None
    for line in _sections("hints.md").get(section, "").splitlines():
        match = re.match(r"^- `([^`]+)`: (.*)$", line)
        if match:
            key = match.group(1)
            items[key] = match.group(2).strip()
        elif key and line.startswith("  ") and line.strip():
            items[key] += " " + line.strip()
    return items


def _hint(section: str, key: str) -> str:
    return _hints(section).get(key, "")
