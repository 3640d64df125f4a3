"""Which compile targets the benchmark can time here, and which nodes of a compiled
model run on the fallback kernel."""
from __future__ import annotations

from collections import Counter

import onnx

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.errors import CompileOptionError, TargetUnavailableError
from aircc.formats.kinds import Impl
from aircc.ops import device as device_dialect, kernel_backend, resolve_target


def _probe_model() -> onnx.ModelProto:
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


#: How a ``--targets`` entry names a precision mode: ``native@allow_mix_precision_bf16``.
MODE_MARK = "@"


def options_of(spec: str) -> dict:
    """The compile options a ``--targets`` entry names: its target, and the precision mode
    after ``@`` (``native@allow_mix_precision_bf16``; none: the graph's own types)."""
    name, _, mode = spec.partition(MODE_MARK)
    return {"target": name, **({"precision_mode": mode} if mode else {})}


def expand(names: list[str]) -> list[str]:
    """``names`` with ``numpy`` replaced by this machine's numpy target (``cpu-<vector
    class>``: the reference backend where ``native`` is another), duplicates dropped."""
    out: list[str] = []
    for name in names:
        if name.partition(MODE_MARK)[0] == "numpy":
            name = f"cpu-{resolve_target('native').vector_class}" + name[len("numpy"):]
        if name not in out:
            out.append(name)
    return out


def usable_targets(names: list[str], device=None) -> tuple[dict[str, str], dict[str, str]]:
    """(target -> what it is, for those this machine can compile for and load;
    target -> why not, for the others), in the order of ``names``."""
    usable, skipped = {}, {}
    for name in names:
        try:
            compiled = compile_model(_probe_model(), CompileOptions(**options_of(name)))
            aircc.load(compiled.om, device=device).close()
            mode = options_of(name).get("precision_mode")
            usable[name] = resolve_target(compiled.report.target).describe() + (
                f", precision mode {mode}" if mode else "")
        except (CompileOptionError, TargetUnavailableError) as e:
            skipped[name] = f"{type(e).__name__}: {e}"
            print(f"target {name} skipped: {skipped[name]}", flush=True)
    return usable, skipped


def fallback_ops(compiled) -> dict[str, int]:
    """Op type -> count of the optimised graph's nodes that run on the fallback kernel
    (onnx's reference op): those the compiler marked so, and those of ops the target's
    kernel backend has no kernel of its own for."""
    backend = kernel_backend(resolve_target(compiled.report.target).backend)
    ops: Counter = Counter()
    for node in compiled.graph.walk():
        if node.domain == device_dialect.DOMAIN:          # the device's own dialect
            continue
        if node.impl is Impl.FALLBACK:
            ops[node.op] += 1
            continue
        try:
            native = backend.impl(node.op, node.version or None, node.domain).native
        except aircc.UnsupportedOpError:                  # run by the runtime itself
            continue
        ops[node.op] += not native
    return {op: n for op, n in sorted(ops.items()) if n}
