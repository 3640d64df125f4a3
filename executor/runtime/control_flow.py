"""Control flow in dynamic mode: the host runs If, Loop and Scan.

The host reads the condition (or trip count) from the device, then runs the
body's host kernels (InferShape, Tiling, Alloc, Launch, Free) in order;
loop-carried values move from one iteration to the next without copies
where the body produced them, and scan outputs are gathered per iteration
and stacked into device memory at the end.
"""
from __future__ import annotations

import time

import numpy as np

from aircc.errors import AirccError, ModelFormatError, RunTimeoutError
from aircc.formats.exec_graph import Body, ExecGraphSection, ExecNode, HostKernel
from aircc.formats.kinds import HostKernelKind
from aircc.ops import TensorType
from aircc.ops.fallback import value_type

from .host_values import host_result


def run_control(state, kernel: HostKernel) -> None:
    node = state.plan.nodes[kernel.node]
    state.sync()                # what the control flow reads must have been computed
    if state.error is not None:
        raise state.error
    RUNNERS[node.op](state, node, kernel)


def check_control_nodes(graph: ExecGraphSection, constants: dict | None = None) -> None:
    """Every control kernel of the execute graph (bodies included) runs an op this runtime
    runs, with the bodies that op needs, and no Loop is endless by construction (no trip
    count, a condition that stays a constant true: :func:`_endless`; ``constants``: the
    model's weights by name); ModelFormatError naming the kernel otherwise."""
    def walk(kernels: list[HostKernel], where: str) -> None:
        for i, k in enumerate(kernels):
            if k.kind is not HostKernelKind.CONTROL:
                continue
            w = f"{where}kernels[{i}]"
            node = graph.nodes[k.node]
            need = BODIES.get(node.op) if not node.domain else None
            if need is None:
                raise ModelFormatError(f"section 'exec_graph': {w}.node is node {k.node} "
                                       f"('{node.name}', op {node.op}), not an If, Loop or Scan")
            missing = [b for b in need if b not in (k.bodies or {})]
            if missing:
                raise ModelFormatError(f"section 'exec_graph': {w}.bodies lacks {missing} of "
                                       f"node '{node.name}' ({node.op})")
            if node.op == "Loop" and _endless(graph, node, k.bodies["body"], constants or {}):
                raise ModelFormatError(f"section 'exec_graph': {w}: node '{node.name}' (Loop) "
                                       f"has no trip count and its condition stays a constant "
                                       f"true: it would never end; give the Loop a trip count "
                                       f"or a condition its body computes")
            for name, body in (k.bodies or {}).items():
                walk(body.kernels, f"{w}.bodies[{name!r}].")
    walk(graph.kernels, "")


def _body(state, node: ExecNode, body: Body, what: str) -> None:
    """Run ``body`` (``what``: which pass of ``node``), unless the run's deadline has passed:
    the host runs control flow, so no stream's deadline would stop a loop that spins."""
    if time.monotonic() > state.deadline:
        raise RunTimeoutError(f"model '{state.plan.name}': the run passed its deadline of "
                              f"{state.timeout:g} s in the host's control flow (node "
                              f"'{node.name}', op {node.op}, {what})")
    state.run_body(body)


def _endless(graph: ExecGraphSection, node: ExecNode, body: Body, constants: dict) -> bool:
    """A Loop with no trip count whose condition starts true (none, or a constant true)
    and that its body passes on unchanged (through Identity nodes) or sets to a constant
    true."""
    def true(name: str) -> bool:
        value = constants.get(name)
        return value is not None and np.size(value) == 1 and bool(np.asarray(value).reshape(-1)[0])

    ins = node.inputs
    if (ins[0] if ins else "") or (len(ins) > 1 and ins[1] and not true(ins[1])) \
            or len(body.inputs) < 2 or not body.outputs:
        return False
    made = {o: graph.nodes[k.node] for k in body.kernels if k.node is not None
            for o in graph.nodes[k.node].outputs if o}
    cond, seen = body.outputs[0], set()
    while cond not in seen:
        seen.add(cond)
        if cond == body.inputs[1] or true(cond):
            return True
        producer = made.get(cond)
        if producer is None or producer.op != "Identity" or producer.domain or not producer.inputs:
            return False
        cond = producer.inputs[0]
    return False


# ---------------------------------------------------------------- values
def _read(state, name: str) -> np.ndarray:
    """A value's data on the host (device values are copied back after a sync)."""
    if name in state.host:
        return state.host[name]
    if name in state.plan.host_values:
        return state.plan.host_values[name]
    if name in state.views:
        state.sync()
        state.d2h_syncs += 1
        return np.array(state.views[name])
    raise AirccError(f"value '{name}' is not available to the host")


def _alias(state, name: str, source: str) -> None:
    """Let a body input name ``source``'s data (no copy, no ownership)."""
    state.types[name] = state.types[source]
    if source in state.views:
        state.views[name] = state.views[source]
        state.host.pop(name, None)
    else:
        state.host[name] = _read(state, source)
        state.views.pop(name, None)


def _set_host(state, name: str, value: np.ndarray) -> None:
    if value is not None:         # an empty optional keeps the type it was given
        state.types[name] = TensorType.of(value) if isinstance(value, np.ndarray) \
            else value_type(value)
    state.host[name] = value
    state.views.pop(name, None)


def _to_device(state, name: str, value: np.ndarray, stream) -> None:
    """Put a host array into a fresh device block named ``name``."""
    t = TensorType.of(value)
    block = state.pool.malloc(t.nbytes, stream, f"'{name}'")
    view = state.pool.view(block, t.dtype, t.shape)
    np.copyto(view, value)
    state.blocks[name], state.views[name], state.types[name] = block, view, t
    state.host.pop(name, None)


def _take(state, name: str, source: str, body: Body | None, stream) -> None:
    """``name`` becomes ``source``'s data: moved if the body made it, else copied."""
    state.types[name] = state.types[source]
    if body is not None and source in state.blocks and source in body.outputs \
            and source not in body.inputs and body.outputs.count(source) == 1:
        state.blocks[name] = state.blocks.pop(source)
        state.views[name] = state.views.pop(source)
        state.host.pop(name, None)
    elif source in state.views:
        _to_device(state, name, np.array(state.views[source]), stream)
    else:
        _set_host(state, name, host_result(_read(state, source)))


def _release(state, name: str) -> None:
    block = state.blocks.pop(name, None)
    state.views.pop(name, None)
    if block is not None:
        state.pool.free(block, state.ctx.streams)


def _stream(state, kernel: HostKernel):
    return state.ctx.streams[kernel.stream or 0]


# ---------------------------------------------------------------- If
def _run_if(state, node: ExecNode, kernel: HostKernel) -> None:
    cond = bool(np.asarray(_read(state, node.inputs[0])).reshape(-1)[0])
    body = kernel.bodies["then_branch" if cond else "else_branch"]
    _body(state, node, body, "then branch" if cond else "else branch")
    for out, src in zip(node.outputs, body.outputs):
        if out:
            _take(state, out, src, body, _stream(state, kernel))


# ---------------------------------------------------------------- Loop
def _run_loop(state, node: ExecNode, kernel: HostKernel) -> None:
    body = kernel.bodies["body"]
    ins = node.inputs
    m = ins[0] if ins else ""
    c = ins[1] if len(ins) > 1 else ""
    trips = int(np.asarray(_read(state, m)).reshape(-1)[0]) if m else None
    cond = bool(np.asarray(_read(state, c)).reshape(-1)[0]) if c else True
    carried = list(ins[2:])
    n = len(carried)
    stream = _stream(state, kernel)
    holders = [f"{node.name}#carry{j}" for j in range(n)]
    for h, src in zip(holders, carried):
        _take(state, h, src, None, stream)
    scans: list[list[np.ndarray]] = [[] for _ in body.outputs[1 + n:]]
    i = 0
    while (trips is None or i < trips) and cond:
        _set_host(state, body.inputs[0], np.array(i, dtype=np.int64))
        _set_host(state, body.inputs[1], np.array(cond))
        for name, h in zip(body.inputs[2:], holders):
            _alias(state, name, h)
        _body(state, node, body, f"iteration {i}")
        cond = bool(np.asarray(_read(state, body.outputs[0])).reshape(-1)[0])
        for k, out in enumerate(body.outputs[1 + n:]):
            scans[k].append(np.array(_read(state, out)))
        staged = [f"{h}#next" for h in holders]
        for s, out in zip(staged, body.outputs[1:1 + n]):
            _take(state, s, out, body, stream)
        for h, s in zip(holders, staged):
            _release(state, h)
            _rename(state, s, h)
        for out in body.outputs:
            if out in state.blocks and out not in body.inputs:
                _release(state, out)
        i += 1
    outs = node.outputs
    for out, h in zip(outs[:n], holders):
        if out:
            _rename(state, h, out)
    for out, h in zip(outs[:n], holders):
        if not out:
            _release(state, h)
    for out, values in zip(outs[n:], scans):
        if out:
            t = state.plan.exec_graph.values.get(out)
            if values:
                _to_device(state, out, np.stack(values), stream)
            else:
                dtype = t.dtype if t else "float32"
                _to_device(state, out, np.zeros((0,), dtype=dtype), stream)


def _rename(state, old: str, new: str) -> None:
    for table in (state.blocks, state.views, state.host, state.types):
        if old in table:
            table[new] = table.pop(old)


# ---------------------------------------------------------------- Scan
def _run_scan(state, node: ExecNode, kernel: HostKernel) -> None:
    body = kernel.bodies["body"]
    stream = _stream(state, kernel)
    attrs = node.attrs
    m = int(attrs["num_scan_inputs"])
    if node.version < 9:
        return _run_scan8(state, node, body, m, stream)
    n = len(node.inputs) - m
    states = [np.array(_read(state, s)) for s in node.inputs[:n]]
    scan_in = [np.asarray(_read(state, s)) for s in node.inputs[n:]]
    results = _scan_loop(state, node, body, states, scan_in, attrs, n, stream)
    for out, value in zip(node.outputs, results):
        if out:
            _to_device(state, out, value, stream)


def _scan_loop(state, node, body, states, scan_in, attrs, n, stream) -> list[np.ndarray]:
    m = len(scan_in)
    in_axes = [a % max(1, x.ndim) for a, x in zip(attrs.get("scan_input_axes") or [0] * m, scan_in)]
    in_dirs = attrs.get("scan_input_directions") or [0] * m
    length = scan_in[0].shape[in_axes[0]] if scan_in else 0
    k = len(body.outputs) - n
    collected: list[list[np.ndarray]] = [[] for _ in range(k)]
    for t in range(length):
        for name, value in zip(body.inputs[:n], states):
            _to_device(state, name, value, stream)
        for name, x, axis, d in zip(body.inputs[n:], scan_in, in_axes, in_dirs):
            idx = length - 1 - t if d else t
            _to_device(state, name, np.take(x, idx, axis=axis), stream)
        _body(state, node, body, f"step {t}")
        states = [np.array(_read(state, o)) for o in body.outputs[:n]]
        for j, o in enumerate(body.outputs[n:]):
            collected[j].append(np.array(_read(state, o)))
        for name in [*body.inputs, *body.outputs]:
            _release(state, name)
    out_axes = attrs.get("scan_output_axes") or [0] * k
    out_dirs = attrs.get("scan_output_directions") or [0] * k
    scans = []
    for values, axis, d in zip(collected, out_axes, out_dirs):
        if d:
            values = values[::-1]
        stacked = np.stack(values) if values else np.zeros((0,), np.float32)
        scans.append(np.moveaxis(stacked, 0, axis % stacked.ndim) if values else stacked)
    return [*states, *scans]


def _run_scan8(state, node: ExecNode, body: Body, m: int, stream) -> None:
    lens, operands = node.inputs[0], node.inputs[1:]
    n = len(operands) - m
    values = [np.asarray(_read(state, s)) for s in operands]
    batch = values[0].shape[0]
    if lens:
        seq = np.asarray(_read(state, lens))
        full = values[n].shape[1] if m else 0
        if np.any(seq != full):
            raise AirccError(f"node '{node.name}' (Scan-8): sequence_lens shorter than the "
                             f"scan length are not supported")
    per_batch = []
    attrs = {"scan_input_directions": node.attrs.get("directions")}
    for b in range(batch):
        per_batch.append(_scan_loop(state, node, body, [v[b] for v in values[:n]],
                                    [v[b] for v in values[n:]], attrs, n, stream))
    for j, out in enumerate(node.outputs):
        if out:
            _to_device(state, out, np.stack([r[j] for r in per_batch]), stream)


#: The runner of each control-flow op, and the bodies it needs.
RUNNERS = {"If": _run_if, "Loop": _run_loop, "Scan": _run_scan}
BODIES = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}
