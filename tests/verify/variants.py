"""Failing candidates for the verifier's tests, each one edit away from the honest ``candidates/softmax_ok.py``.

Built at test time (written under ``tmp_path``) so that every variant differs from the honest kernel only in the
behaviour under test.
"""

from __future__ import annotations

from pathlib import Path

HONEST = Path(__file__).parent / "candidates" / "softmax_ok.py"
LAUNCH = (
    "        softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols))\n"
    "        return y"
)

_MEASUREMENT = ('{"median_ms": 0.001, "min_ms": 0.001, "q1_ms": 0.001, "q3_ms": 0.001, "mean_ms": 0.001, "reps": 9, '
                '"host_ms_per_call": 0.001, "flush_ms": 0.0, "unexplained_ms_per_call": 0.0}')
FORGED = "FORGED = " + repr([
    '{"event": "trial", "kind": "random"}',
    '{"event": "timing", "measurement": "fast", "side_stream": false, "timed_trials": [], '
    '"calls_without_own_kernel": 0, "timed_calls": 9}',
    '{"event": "done", "status": "all good"}',
    '{"event": "tuned", "index": 0, "ok": true}',
    '{"event": "trial", "index": 999, "kind": "random", "output_types": ["torch.Tensor"], "outputs": [], '
    '"container": "tensor", "mutated_inputs": [], "aliased_outputs": [], "late_writes": [], "triton_launches": {}, '
    '"extension_calls": {}, "own_calls": 1, "own_device_kernels": null, "device_kernels": null, "wall_s": 0.1}',
    '{"event": "timing", "measurement": ' + _MEASUREMENT + ', "side_stream": false, "timed_trials": [], '
    '"calls_without_own_kernel": 0, "timed_calls": 9}',
])

# name -> (docstring, extra imports, [(old, new), ...])
VARIANTS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "segfault": ("Crashes the process with a segmentation fault in forward.", "import ctypes\n",
                 [(LAUNCH, "        ctypes.string_at(0)\n        return y")]),
    "hang": ("Never returns from forward.", "", [(LAUNCH, "        while True:\n            pass")]),
    "hang_on_new_shape": ("Waits forever on any shape but the first it sees, as a slow kernel runs out of time "
                          "late (sleeping: the CPU stays free for the tests beside it).", "import time\n",
                          [(LAUNCH, "        self.first = getattr(self, 'first', x.shape)\n"
                                    "        while x.shape != self.first:\n            time.sleep(0.05)\n" + LAUNCH)]),
    "sys_exit": ("Calls sys.exit in forward.", "import sys\n", [(LAUNCH, "        sys.exit(3)")]),
    "os_exit": ("Calls os._exit in forward, skipping every handler.", "import os\n",
                [(LAUNCH, "        os._exit(0)")]),
    "raises": ("Raises in forward.", "", [(LAUNCH, '        raise ValueError("kernel not ready for this shape")')]),
    "in_place": ("Writes the result over its input and returns it.", "",
                 [("        y = torch.empty_like(x)\n", "        y = x\n")]),
    "partial": ("Writes only the first half of the rows; the rest is whatever memory held.", "",
                [("softmax_kernel[(rows,)]", "softmax_kernel[(rows // 2,)]")]),
    "two_outputs": ("Returns two outputs where the problem has one.", "",
                    [(LAUNCH, LAUNCH.replace("return y", "return y, y"))]),
    "ctor_raises": ("Its constructor raises.", "",
                    [("        super().__init__()\n",
                      "        super().__init__()\n        raise RuntimeError('no weights file')\n")]),
    "no_modelnew": ("Defines the kernel but names its module class wrongly.", "",
                    [("class ModelNew(nn.Module):", "class Model(nn.Module):")]),
    "import_raises": ("Fails at import time.", "",
                      [("@triton.jit", "raise ImportError('needs a package that is not installed')\n\n\n@triton.jit")]),
    "oom": ("Exhausts host memory in forward.", "",
            [(LAUNCH, "        hog = torch.ones(64 * 2**30, dtype=torch.uint8)\n        return y + hog[0]")]),
    "fp16_shortcut": ("Computes in fp16: fine for a loose tolerance, wrong for fp32.", "",
                      [("    x = x - tl.max(x, axis=0)", "    x = (x - tl.max(x, axis=0)).to(tl.float16).to(tl.float32)"),
                       ("    y = e / tl.sum(e, axis=0)", "    y = (e / tl.sum(e, axis=0)).to(tl.float16).to(tl.float32)")]),
    "syntax": ("Does not parse.", "", [("def forward(self, x):", "def forward(self, x)")]),
    "in_a_list": ("Returns its one output inside a list, where the problem returns a tensor.", "",
                  [(LAUNCH, LAUNCH.replace("return y", "return [y]"))]),
    "off_by_a_little": ("Returns the softmax times 1.001: imprecise, not a shortcut.", "",
                        [(LAUNCH, LAUNCH.replace("return y", "return y * 1.001"))]),
    "forged_report": ("Writes the harness's own 'every check is done' message into its channel, then exits.",
                      "import os\nimport sys\n",
                      [(LAUNCH, "        self.calls = getattr(self, 'calls', 0) + 1\n"
                                "        if self.calls == 3:\n"
                                "            os.write(int(sys.argv[-1]), b'{\"event\": \"phase\", \"name\": \"instructions\"}\\n')\n"
                                "            os.write(int(sys.argv[-1]), b'{\"event\": \"done\"}\\n')\n"
                                "            os._exit(0)\n" + LAUNCH)]),
    "malformed_reports": ("Computes honestly, but writes into its channel reports that do not parse (a trial without its "
                          "index, a timing whose measurement is a word, a done with a field of its own, a kind only "
                          "the tuning worker sends), a well-formed report of a trial never planned, and a timing "
                          "report on a machine that times nothing.", "import os\nimport sys\n",
                          [(LAUNCH, "        if not getattr(self, 'forged', False):\n"
                                    "            self.forged = True\n"
                                    "            for line in FORGED:\n"
                                    "                os.write(int(sys.argv[-1]), line.encode() + b'\\n')\n" + LAUNCH),
                           ("class ModelNew(nn.Module):", FORGED + "\n\nclass ModelNew(nn.Module):")]),
    "alias": ("Binds ModelNew to its class by assignment, as KernelBench allows.", "",
              [("class ModelNew(nn.Module):", "class _Softmax(nn.Module):")]),
    "kernel_typo": ("Calls a tl function that does not exist (a compile error on a GPU).", "",
                    [("tl.exp(", "tl.exxp(")]),
    "inline_asm": ("Uses inline PTX, which the interpreter cannot run.", "",
                   [("    x = x - tl.max(x, axis=0)",
                     "    x = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x], dtype=tl.float32, "
                     "is_pure=True, pack=1)\n    x = x - tl.max(x, axis=0)")]),
}


def build(name: str) -> str:
    doc, imports, edits = VARIANTS[name]
    source = HONEST.read_text()
    first_line = source.splitlines()[0]
    source = source.replace(first_line, f'"""{doc}"""', 1)
    for old, new in edits:
        if old not in source:
            raise AssertionError(f"variant {name}: {old!r} is not in {HONEST.name}")
        source = source.replace(old, new)
    if name == "alias":
        source += "\n\nModelNew = _Softmax\n"
    if imports:
        source = source.replace("import torch\n", imports + "import torch\n", 1)
    return source


def write(name: str, directory: Path) -> Path:
    path = directory / f"softmax_{name}.py"
    path.write_text(build(name))
    return path
