"""Convolutions in compiled models on the device: the weight layout pack-weights chooses for
the backend, the Winograd mode in a model, the matrix engine that GEMM kernels take turns on."""
from __future__ import annotations

import threading
import time

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.executor.device.device import VirtualDevice
from aircc.executor.kernels.conv import choice as conv_choice
from aircc.ops import KernelImpl, kernel_backend, resolve_target
from graphs import const, model, tensor

RNG = np.random.default_rng(7)
TARGET = resolve_target("cpu-avx2")
CONV = kernel_backend("numpy").impl("Conv", 11)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def _conv_net(channels: int, group: int = 1, size: int = 10):
    inits = [const("W1", rand(channels, channels // group, 3, 3)), const("B1", rand(channels)),
             const("W2", rand(channels, channels, 1, 1)), const("W3", rand(channels, channels // group, 3, 3))]
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["a"], pads=[1, 1, 1, 1], group=group, name="c1"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "W2"], ["p"], name="c2"),
             helper.make_node("Conv", ["p", "W3"], ["q"], pads=[1, 1, 1, 1], strides=[2, 2], group=group,
                              name="c3"),
             helper.make_node("Add", ["q", "q"], ["y"], name="add")]
    half = (size + 1) // 2
    return model(nodes, [tensor("x", [1, channels, size, size])], [tensor("y", [1, channels, half, half])],
                 inits)


@pytest.mark.parametrize("channels,group,size,expect,stack", [
    (64, 1, 10, 2, False), (128, 2, 10, 2, False), (32, 1, 10, 0, False), (512, 8, 10, 0, False),
    (64, 1, 7, 0, False), (64, 1, 7, 1, True)])
def test_pack_weights_packs_what_the_tap_kernel_wants_and_keeps_the_numbers(channels, group, size, expect,
                                                                            stack, monkeypatch):
    """Packed per tap: 64+ channels per group, few groups, outputs wide enough; at 7 x 7 (3x3
    rows 9 wide for 7 outputs) the weights stay for the wide mode's exact columns, unless
    the stacked mode (stride 1 only here: c1) takes the conv.  (These convs are small
    enough for the wide mode: the size rule is off here, and tested on its own below.)"""
    monkeypatch.setattr(conv_choice, "TAPS_MIN_MACS", 0)
    if stack:
        monkeypatch.setattr(conv_choice, "STACKED_MAX_CHANNEL_SHARE", 1.0)
    m = _conv_net(channels, group, size)
    compiled = aircc.compile(m, streams=1, target=TARGET.name)
    assert compiled.report.stats["packed_conv_weights"] == expect
    if size == 7:
        for n in compiled.graph.nodes:
            if n.op == "Conv" and n.attrs.get("kernel_shape", [3])[0] != 1 and n.name != "c2":
                t = CONV.tile([compiled.graph.types[i] for i in n.inputs], n.attrs, TARGET)
                if stack and n.name == "c1":
                    assert t["mode"] == "stacked"
                else:
                    assert t["mode"] == "wide" and t["exact"]
    convs = [n for n in compiled.graph.nodes if n.op == "Conv"]
    layouts = sorted(n.attrs.get("weight_layout", "OIHW") for n in convs)
    assert layouts.count("HWOI") == expect
    for n in convs:
        if n.attrs.get("weight_layout") == "HWOI":
            kh, kw, mo, cg = compiled.graph.constants[n.inputs[1]].shape
            assert (kh, kw, mo, cg) == (3, 3, channels, channels // group)
    x = rand(1, channels, size, size)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x})[0]
    got = aircc.load(compiled.om).run({"x": x})["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_small_convs_stay_in_the_wide_mode_big_ones_are_packed():
    """Below TAPS_MIN_MACS multiply-adds one im2col GEMM beats nine per-tap GEMM calls:
    a 64 -> 48 conv at 14 x 14 (5.4 M) keeps ONNX's layout and runs wide; at 56 x 56
    (87 M) it is packed and runs per tap (48 outputs: too few for Winograd); both equal
    onnxruntime."""
    for size, packed in ((14, 0), (56, 1)):
        w = const("W", rand(48, 64, 3, 3))
        m = model([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])],
                  [tensor("x", [1, 64, size, size])], [tensor("y", [1, 48, size, size])], [w])
        compiled = aircc.compile(m, streams=1, target=TARGET.name)
        assert compiled.report.stats["packed_conv_weights"] == packed
        conv = next(n for n in compiled.graph.nodes if n.op == "Conv")
        mode = CONV.tile([compiled.graph.types[i] for i in conv.inputs], conv.attrs, TARGET)["mode"]
        assert mode == ("taps" if packed else "wide")
        x = rand(1, 64, size, size)
        expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(aircc.load(compiled.om).run({"x": x})["y"], expected, rtol=1e-4, atol=1e-4)


def test_cube_kernels_of_different_streams_take_turns_vector_kernels_do_not():
    dev = VirtualDevice(1 << 20)
    try:
        for engine, expect_overlap in (("cube", False), ("vector", True)):
            spans, barrier = [], threading.Barrier(2)

            def kernel(ins, outs, attrs, tiling, ws, spans=spans):
                t0 = time.perf_counter()
                time.sleep(0.05)
                spans.append((t0, time.perf_counter()))

            probe = KernelImpl("Probe", 1, "", kernel)
            calls = [dev.engine_call(probe, engine, [], [], {}, {}, None) for _ in range(2)]

            def go(call):
                barrier.wait()
                call()
            threads = [threading.Thread(target=go, args=(c,)) for c in calls]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            (a0, a1), (b0, b1) = sorted(spans)
            assert (b0 < a1) == expect_overlap, (engine, spans)
    finally:
        dev.close()


def test_compiled_model_keeps_onnx_layout_and_matches_onnxruntime():
    """pack-weights leaves Winograd convs in ONNX's layout; an F(4, 3) conv and an F(2, 3)
    conv with a Relu between them equal onnxruntime's result."""
    w1, b1, w2 = const("W1", rand(96, 64, 3, 3) * 0.1), const("B1", rand(96)), const("W2", rand(128, 96, 3, 3) * 0.1)
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Relu", ["p"], ["r"]),
             helper.make_node("Conv", ["r", "W2"], ["y"], pads=[1, 1, 1, 1])]
    m = model(nodes, [tensor("x", [1, 64, 28, 28])], [tensor("y", [1, 128, 14, 14])], [w1, b1, w2])
    compiled = aircc.compile(m, streams=1, target=TARGET.name)
    assert compiled.report.stats["packed_conv_weights"] == 0
    convs = [n for n in compiled.graph.nodes if n.op == "Conv"]
    tiles = [CONV.tile([compiled.graph.types[i] for i in n.inputs], n.attrs, TARGET).get("tile") for n in convs]
    assert sorted(tiles) == [2, 4]
    x = rand(1, 64, 28, 28)
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with aircc.load(compiled.om) as loaded:
        got = loaded.run({"x": x})["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _residual_net(batch):
    """A ResNet-style block at 28 x 28 (F(4x4) on oneDNN: two 3x3 convs, the second with
    the residual and Relu fused) and a 3x3 conv at 14 x 14 with 128 channels (F(2x2))."""
    inits = [const("W1", rand(64, 64, 3, 3) * 0.06), const("B1", rand(64)),
             const("W2", rand(64, 64, 3, 3) * 0.06), const("B2", rand(64)),
             const("W3", rand(128, 64, 1, 1) * 0.1), const("W4", rand(128, 128, 3, 3) * 0.04),
             const("B4", rand(128))]
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["a"], pads=[1, 1, 1, 1], name="c1"),
             helper.make_node("Relu", ["a"], ["ar"], name="r1"),
             helper.make_node("Conv", ["ar", "W2", "B2"], ["b"], pads=[1, 1, 1, 1], name="c2"),
             helper.make_node("Add", ["b", "x"], ["s"], name="residual"),
             helper.make_node("Relu", ["s"], ["sr"], name="r2"),
             helper.make_node("MaxPool", ["sr"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "W3"], ["q"], name="c3"),
             helper.make_node("Conv", ["q", "W4", "B4"], ["y"], pads=[1, 1, 1, 1], name="c4")]
    return model(nodes, [tensor("x", [batch, 64, 28, 28])], [tensor("y", [batch, 128, 14, 14])],
                 inits)


@pytest.mark.skipif(kernel_backend("dnnl").unavailable_reason() is not None,
                    reason="oneDNN is not installed")
@pytest.mark.parametrize("batch", [2, "N"], ids=["static", "dynamic-batch"])
def test_winograd_convs_on_onednn_match_onnxruntime(tmp_path, batch):
    """The oneDNN backend runs the 3x3 convs of the shapes where it pays as Winograd
    F(4x4) / F(2x2) (``inspect`` says which), static and with a batch known only at run
    time, and the results equal onnxruntime's."""
    from aircc.executor.kernels.dnnl_backend import winograd

    if not winograd.available():
        pytest.skip("the C transforms were not built")
    m = _residual_net(batch)
    path = tmp_path / "net.om"
    aircc.compile(m, path)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    with aircc.load(path) as loaded:
        for n in ([2] if batch == 2 else [1, 3, 1]):
            x = rand(n, 64, 28, 28)
            want = sess.run(None, {"x": x})[0]
            got = loaded.run({"x": x})["y"]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    if batch == 2:
        from click.testing import CliRunner
        from aircc.cli.aircc_cmd import main as aircc_cli

        shown = CliRunner().invoke(aircc_cli, ["inspect", str(path)]).output
        kinds = sorted(line.split("winograd ")[1][:9] for line in shown.splitlines()
                       if "winograd F(" in line)
        assert kinds == ["F(2x2, 3x", "F(4x4, 3x", "F(4x4, 3x"], shown


@pytest.mark.skipif(kernel_backend("dnnl").unavailable_reason() is not None,
                    reason="oneDNN is not installed")
def test_the_winograd_option_reaches_the_tiling_and_keys_the_compile_cache(tmp_path, aircc_env):
    """``winograd`` is a compile option: ``off`` plans no Winograd conv where ``auto`` plans
    three, whatever ``$AIRCC_WINOGRAD`` says (it is only the default), and a session's compile
    cache keeps two compiles that differ only in it apart."""
    from aircc.executor.kernels.dnnl_backend import winograd

    if not winograd.available():
        pytest.skip("the C transforms were not built")

    def planned(compiled) -> int:
        return sum(1 for t in compiled.om.parsed().tiling.entries if t.get("winograd"))

    m = _residual_net(2)
    aircc_env("AIRCC_WINOGRAD", "off")
    assert planned(aircc.compile(m)) == 0
    assert planned(aircc.compile(m, winograd="auto")) == 3
    aircc_env("AIRCC_WINOGRAD", "auto")
    assert planned(aircc.compile(m, winograd="off")) == 0
    aircc_env("AIRCC_CACHE_DIR", str(tmp_path))
    entries = {}
    for mode in ("auto", "off"):
        sess = aircc.InferenceSession(m.SerializeToString(),
                                      providers=[("AirccVirtualDeviceProvider", {"winograd": mode})])
        entries[mode] = sess.compile_cache
    assert entries["auto"].path != entries["off"].path
    assert [e.status for e in entries.values()] == ["compiled", "compiled"]
    cached = {mode: sum(1 for t in aircc.formats.load_om(e.path).parsed().tiling.entries
                        if t.get("winograd")) for mode, e in entries.items()}
    assert cached == {"auto": 3, "off": 0}
