"""``kernelwright bench``: score a folder of problems — ours or KernelBench's levels, unmodified — or outside
solutions to them, with the verifier's verdicts, in one resumable command (collect, runner, rows, scores, report)."""
