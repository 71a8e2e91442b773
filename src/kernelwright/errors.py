"""Errors a user can act on.

Every error that reaches the command line carries a one-line message that names the problem and the fix; the CLI
prints it without a traceback (unless ``--verbose``) and exits with status 2 (1 for an unsupported problem, which is
no fault of the input). Failures of *candidates* are never
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
    """The problem is valid but the template generator cannot take it: no template covers any of it (the
    operators named), or ``torch.export`` cannot capture its graph (the LLM generator can still try). Not a bad
    input: the CLI exits 1, as for any verdict but passed, and ``kernelwright bench`` scores it ``unsupported``."""

    exit_code = 1
