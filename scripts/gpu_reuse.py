"""Two verifies of each problem in one process, as a search makes them (one seed, reuse_reference on): the first
runs the reference job, the second takes it from memory. Phases of both, one JSON line each, into $OUT/reuse.jsonl.
    python3 scripts/gpu_reuse.py PROBLEM ...      (each judged against its own Model renamed ModelNew)"""

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kernelwright.cli import _bytecode_cache  # noqa: E402

_bytecode_cache()  # as the CLI does, before torch

from kernelwright.verify.records import VerifyOptions  # noqa: E402
from kernelwright.verify.verifier import verify  # noqa: E402

out = Path(os.environ.get("OUT", "/tmp/gpu-reuse-out"))
out.mkdir(parents=True, exist_ok=True)
work = Path(tempfile.mkdtemp())
for problem in map(Path, sys.argv[1:]):
    cand = work / f"{problem.stem}_self.py"
    text = problem.read_text()
    cand.write_text(re.sub(r"super\(Model, self\)", "super(ModelNew, self)", re.sub(r"\bclass Model\(", "class ModelNew(", text)))
    options = VerifyOptions(device="cuda", seed=1234, reuse_reference=True, compile_baseline=False,
                            allow_library_only=True)
    for attempt in ("first", "second"):
        started = time.monotonic()
        v = verify(problem, cand, options)
        row = {"problem": problem.stem, "attempt": attempt, "status": str(v.status), "wall_s": round(time.monotonic() - started, 1),
               "phases": v.phases, "reused": any(f.code == "reference-reused" for f in v.findings),
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(json.dumps(row), flush=True)
        with open(out / "reuse.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
