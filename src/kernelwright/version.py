"""kernelwright's version, in a module of its own: the run database, verdicts, bench rows and exported packages
record it, and none of them needs the package's face (``kernelwright.load``) to read it."""

__version__ = "0.1.0"
