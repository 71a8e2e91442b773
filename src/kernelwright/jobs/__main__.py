"""The entry point of every isolated job: ``python -m kernelwright.jobs [--prestarted] JOB SPEC.json FD``.

Importing :mod:`kernelwright.jobs` registers every job's spec; :func:`kernelwright.isolation.child.main` then reads
the spec, runs the job's function and reports on the pipe ``FD``.
"""

import sys

import kernelwright.jobs  # noqa: F401 - registers every job
from kernelwright.isolation.child import main

raise SystemExit(main(sys.argv[1:]))
