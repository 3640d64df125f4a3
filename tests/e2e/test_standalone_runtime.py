"""The runtime stands without the compiler: loading and running an .om in a fresh process
imports neither the compiler nor networkx (onnx still comes with the ops' fallback
definitions and the loader's check of each node against its onnx schema)."""
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
m = aircc.load(sys.argv[1])
y = m.run({"input": np.load(sys.argv[2])})["probs"]
print(json.dumps({"shape": list(y.shape), "sum": float(y.sum()),
                  "loaded": sorted(k for k in ("networkx", "aircc.compiler", "onnx")
                                   if k in sys.modules)}))
"""


def test_loading_and_running_an_om_imports_neither_the_compiler_nor_networkx(tmp_path):
    om = tmp_path / "mlp.om"
    aircc.compile(f"{SAMPLES}/mlp.onnx", om, input_shapes={"input": [4, 784]})
    x = np.random.default_rng(0).standard_normal((4, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([sys.executable, "-c", PROBE, str(om), str(tmp_path / "x.npy")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert "aircc.compiler" not in got["loaded"] and "networkx" not in got["loaded"], got
    with aircc.load(om) as m:                       # and it ran the model
        want = m.run({"input": x})["probs"]
    assert got["shape"] == list(want.shape) and abs(got["sum"] - float(want.sum())) < 1e-4
