"""``kernelwright config``: every setting, its value and where it came from, as a kernelwright.toml would say it."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from kernelwright.config import (
    CONFIG_FILE_NAME,
    GENERAL_TABLE,
    KNOBS,
    LLM_TABLE,
    config,
    find_file,
    redact_url,
)

HELP = "print every setting, its value and where it came from (flag, environment, kernelwright.toml or default)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="as optimize's --model: show the [llm] settings with it")
    p.add_argument("--base-url", default=None, help="as optimize's --base-url")


def run(args: argparse.Namespace) -> int:
    """The settings as a kernelwright.toml, each line commented with its source; never an API key."""
    from kernelwright.llm.settings import key_status, resolve_llm_table

    file = find_file()
    llm = resolve_llm_table(model=args.model, base_url=args.base_url, file=file)
    tables = {GENERAL_TABLE: {name: config.resolve(name) for name in KNOBS}, LLM_TABLE: llm}
    print(f"# {file.path}" if file.path else f"# no {CONFIG_FILE_NAME} in {Path.cwd()}: defaults and environment")
    for table, values in tables.items():
        print(f"\n[{table}]")
        for name, (value, source) in values.items():
            if table == LLM_TABLE and name == "base_url":
                value = redact_url(value)
            shown = json.dumps(str(value) if isinstance(value, Path) else value)
            line = f"{name} = {shown}" if value is not None else f"# {name} unset"
            print(f"{line:<48} # {source}")
    print(f"# API key: {key_status(llm['base_url'].value, llm['api_key_env'].value, os.environ)}")
    return 0
