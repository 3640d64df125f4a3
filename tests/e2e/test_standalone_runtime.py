"""The runtime stands without the compiler: loading and running an .om in a fresh process
imports neither the compiler nor networkx nor onnx (the reader checks nodes against a
table of onnx's signatures; onnx comes only with a fallback kernel, when one runs)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

import aircc
from testdata import SAMPLES

PROBE = r"""
import json, sys
import numpy as np
import aircc
sums = []
for path in sys.argv[2:]:
    with aircc.load(path) as m:
        sums.append(float(m.run({"input": np.load(sys.argv[1])})["probs"].sum()))
print(json.dumps({"sums": sums,
                  "loaded": sorted(k for k in sys.modules
                                   if k.split(".")[0] in ("networkx", "onnx")
                                   or k.startswith("aircc.compiler"))}))
"""


def test_loading_and_running_an_om_imports_neither_the_compiler_nor_networkx_nor_onnx(tmp_path):
    static, dynamic = tmp_path / "static.om", tmp_path / "dynamic.om"
    aircc.compile(f"{SAMPLES}/mlp.onnx", static, input_shapes={"input": [4, 784]})
    aircc.compile(f"{SAMPLES}/mlp.onnx", dynamic, mode="dynamic")
    x = np.random.default_rng(0).standard_normal((4, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "x.npy"), str(static),
                          str(dynamic)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["loaded"] == [], got
    for om, total in zip((static, dynamic), got["sums"]):   # and it ran both models
        with aircc.load(om) as m:
            want = m.run({"input": x})["probs"]
        assert abs(total - float(want.sum())) < 1e-4
