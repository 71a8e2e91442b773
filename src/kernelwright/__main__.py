"""``python -m kernelwright`` is the same as the ``kernelwright`` console script."""

from kernelwright.cli import main

raise SystemExit(main())
