"""Bytecode kept in kernelwright's cache only where the installation has none and cannot hold any."""

import importlib
import os
import sys

import pytest

from kernelwright.isolation import bytecode


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)


def _package(tmp_path, monkeypatch, name, read_only):
    root = tmp_path / "site"
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    if read_only:  # as the GPU machine's image (chmod does not stop root, which CI may be)
        real = os.access
        monkeypatch.setattr(bytecode.os, "access", lambda p, mode: False if str(root) in str(p) else real(p, mode))
    return root


def test_read_only_install_without_bytecode_gets_a_prefix(tmp_path, monkeypatch, clean):
    _package(tmp_path, monkeypatch, "kw_ro_pkg", read_only=True)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # PYTHONDONTWRITEBYTECODE=1, as on the GPU machine
    prefix = bytecode.enable(tmp_path / "cache", module="kw_ro_pkg")
    assert prefix == str(tmp_path / "cache" / "pycache") == sys.pycache_prefix == os.environ["PYTHONPYCACHEPREFIX"]
    assert not sys.dont_write_bytecode


def test_writable_or_compiled_install_is_left_alone(tmp_path, monkeypatch, clean):
    _package(tmp_path, monkeypatch, "kw_rw_pkg", read_only=False)
    assert bytecode.enable(tmp_path / "cache", module="kw_rw_pkg") is None
    assert sys.pycache_prefix is None and "PYTHONPYCACHEPREFIX" not in os.environ
    assert bytecode.enable(tmp_path / "cache", module="no_such_module_kw") is None


def test_a_prefix_the_user_set_wins(tmp_path, monkeypatch, clean):
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    _package(tmp_path, monkeypatch, "kw_ro2_pkg", read_only=True)
    assert bytecode.enable(tmp_path / "cache", module="kw_ro2_pkg") is None


def test_a_writable_install_that_never_gets_bytecode_gets_a_prefix(tmp_path, monkeypatch, clean):
    _package(tmp_path, monkeypatch, "kw_rw2_pkg", read_only=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode.enable(tmp_path / "cache", module="kw_rw2_pkg") == str(tmp_path / "cache" / "pycache")
