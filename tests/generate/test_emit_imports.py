"""A written candidate imports each module once and nothing it does not use (a best.py imported torch twice)."""

from __future__ import annotations

import ast
from pathlib import Path

from kernelwright.search.candidates import template_builder

ROOT = Path(__file__).resolve().parents[2]


def _imports(source: str) -> list[str]:
    tree = ast.parse(source)
    return [ast.get_source_segment(source, s) or "" for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]


def test_each_import_once_and_each_used(tmp_path: Path) -> None:
    for name in ("attention_sdpa_bf16", "layernorm", "linear_gelu_bf16"):
        _, builder = template_builder(ROOT / "problems" / f"{name}.py", tmp_path / name, arch="sm_90a")
        source = builder.build(tuple(0 for _ in builder.spaces), "default").path.read_text()
        imports = _imports(source)
        assert len(imports) == len(set(imports)), (name, imports)
        body = "\n".join(line for line in source.splitlines() if not line.startswith(("import ", "from ")))
        for statement in imports:
            bound = statement.split(" as ")[-1] if " as " in statement else statement.split()[1].split(".")[0]
            assert bound in body, (name, statement)
