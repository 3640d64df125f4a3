"""Compile targets: chosen by --target (or $AIRCC_TARGET), recorded in the .om, shown by
inspect, deciding what the backend tunes (the Winograd tiles), and checked at load."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import helper

import aircc
from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.cli.airrun_cmd import main as airrun
from aircc.errors import CompileOptionError, TargetUnavailableError
from aircc.formats import OmFile
from aircc.ops import machine, targets
from graphs import const, model, tensor
from test_om_contract import forge
from testdata import SAMPLES


def _conv(size: int = 112, channels: int = 64):
    """A 3x3 conv whose Winograd tile the target decides: F(4x4) for AVX2 kernels at every
    size, none for AVX-512 kernels above 64 x 64 (their GEMMs are twice as fast)."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype(np.float32)
    return model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                 [tensor("x", [1, channels, size, size])],
                 [tensor("y", [1, channels, size, size])], [const("w", w)])


def _tiles(om: OmFile) -> list:
    return [e.get("tile") for e in om.sections["tiling"]["entries"] if e.get("mode")]


def test_the_target_is_recorded_and_decides_the_tuning():
    avx2 = aircc.compile(_conv(), target="cpu-avx2")
    avx512 = aircc.compile(_conv(), target="cpu-avx512")
    assert avx2.om.sections["model"]["target"] == {"name": "cpu-avx2", "backend": "numpy",
                                                   "vector_class": "avx2"}
    assert avx512.om.sections["model"]["target"]["vector_class"] == "avx512"
    assert avx2.report.target == "cpu-avx2"
    assert _tiles(avx2.om) == [4] and _tiles(avx512.om) == [None]
    x = np.random.default_rng(2).standard_normal((1, 64, 112, 112)).astype(np.float32)
    with aircc.load(avx2.om) as a, aircc.load(avx512.om) as b:
        np.testing.assert_allclose(a.run({"x": x})["y"], b.run({"x": x})["y"], rtol=1e-4, atol=1e-4)


def test_native_is_this_machines_backend_and_class():
    """oneDNN where it runs here, else numpy; at the vector class its kernels run with."""
    native = machine.resolve_target("native")
    from aircc.ops.backend import backend_unavailable
    assert native.backend == ("dnnl" if backend_unavailable("dnnl") is None else "numpy")
    assert native.vector_class == aircc.ops.kernel_backend(native.backend).host_vector_class()
    assert aircc.compile(_conv(16), target="native").om.sections["model"]["target"]["name"] == native.name


def test_the_environment_sets_the_default_target(aircc_env):
    aircc_env("AIRCC_TARGET", "cpu-avx512")
    assert aircc.compile(_conv(16)).report.target == "cpu-avx512"
    aircc_env("AIRCC_TARGET", "")
    aircc_env("AIRCC_VECTOR_CLASS", "avx2")                # the older spelling
    assert aircc.compile(_conv(16)).report.target == "cpu-avx2"


def test_an_unknown_target_names_the_known_ones():
    with pytest.raises(CompileOptionError, match="unknown target 'tpu'; known targets: native, "
                                                 "cpu-avx2, cpu-avx512"):
        aircc.compile(_conv(16), target="tpu")


def test_compile_and_inspect_show_the_target(tmp_path):
    out = tmp_path / "m.om"
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(out),
                                       "--input-shape", "input:4,784", "--target", "cpu-avx512"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(aircc_cli, ["inspect", str(out), "--json"])
    assert json.loads(r.output)["target"] == {"name": "cpu-avx512", "backend": "numpy",
                                              "vector_class": "avx512"}
    r = CliRunner().invoke(aircc_cli, ["inspect", str(out)])
    assert "target     cpu-avx512 (kernel backend numpy, vector class avx512)" in r.output


def _retargeted(om: OmFile, **target) -> bytes:
    sections = copy.deepcopy(om.sections)
    sections["model"]["target"].update(target)
    return forge(OmFile(om.mode, sections, om.weights))


def test_a_backend_this_machine_lacks_is_refused_at_load(tmp_path):
    om = aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [4, 784]}, target="cpu-avx2").om
    data = _retargeted(om, name="npu-v1", backend="ascendc")
    with pytest.raises(TargetUnavailableError) as e:
        aircc.load(data)
    assert ("was compiled for target npu-v1 (kernel backend ascendc, vector class avx2), but "
            "no kernel backend 'ascendc' is installed (installed and able to run: ") in str(e.value)
    assert "numpy" in str(e.value).split("able to run: ")[1]
    path = tmp_path / "npu.om"
    path.write_bytes(data)
    r = CliRunner().invoke(airrun, [str(path), "--random", "0"])
    assert r.exit_code == 3 and "no kernel backend 'ascendc' is installed" in r.output
    with aircc.load(om) as m:                                 # the next load works
        assert m.run({"input": np.ones((4, 784), np.float32)})


def test_a_vector_class_the_cpu_lacks_is_refused_at_load(monkeypatch):
    om = aircc.compile(_conv(16), target="cpu-avx512").om
    monkeypatch.setattr(machine, "host_vector_classes", lambda: ("avx2",))   # an older CPU
    with pytest.raises(TargetUnavailableError, match="but this machine's CPU offers vector classes "
                                                     "avx2; recompile it with --target cpu-avx2"):
        aircc.load(om)
    with aircc.load(aircc.compile(_conv(16), target="cpu-avx2").om):
        pass


def test_the_cpu_flags_decide_the_classes_offered():
    offered = machine.host_vector_classes()
    assert offered and set(offered) <= set(targets.VECTOR_CLASS_FLAGS)
    assert machine.native_target().vector_class in offered or not offered


def test_gears_get_the_streams_of_the_static_build_of_their_batch():
    """--split-matrix-branches reaches every gear (it once fell off on the way)."""
    branches = [helper.make_node("Conv", ["x", f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]) for k in range(3)]
    rng = np.random.default_rng(3)
    inits = [const(f"w{k}", rng.standard_normal((32, 32, 3, 3)).astype(np.float32)) for k in range(3)]
    m = model(branches + [helper.make_node("Sum", ["c0", "c1", "c2"], ["y"])],
              [tensor("x", ["N", 32, 32, 32])], [tensor("y", ["N", 32, 32, 32])], inits)
    for split in (False, True):
        gears = aircc.compile(m, dynamic_batch=[1, 4], split_matrix_branches=split)
        for plan in gears.om.sections["gears"]["plans"]:
            static = aircc.compile(m, input_shapes={"x": [plan["batch"], 32, 32, 32]},
                                   split_matrix_branches=split)
            assert plan["tasks"]["streams"] == static.report.streams, (split, plan["batch"])
        assert gears.report.streams == (3 if split else 1)
