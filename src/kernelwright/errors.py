"""Errors a user can act on.

Every error that reaches the command line carries a one-line message that names the problem and the fix; the CLI
prints it without a traceback (unless ``--verbose``) and exits with status 2. Failures of *candidates* are never
raised as these: they are data in a verdict.
"""

from __future__ import annotations


class KernelwrightError(Exception):
    """Base class for errors caused by how kernelwright was invoked or configured (exit status 2)."""

    exit_code = 2


class InputError(KernelwrightError):
    """A user-supplied file or argument cannot be used: missing, unreadable, malformed."""


class ConfigError(KernelwrightError):
    """A setting (flag, ``KERNELWRIGHT_*`` variable or config file) has an invalid value."""


class ToolchainError(KernelwrightError):
    """A required external tool (nvcc, ptxas, cuobjdump, nvdisasm, ncu) is missing or too old."""


class UnsupportedProblem(InputError):
    """The problem is valid but no template covers any of it: the template generator cannot help (the LLM can).
    ``kernelwright bench`` scores it ``unsupported`` with the operators named, not as a bad input."""
