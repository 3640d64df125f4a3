"""The .om contract on real compiled models: a file whose sections disagree with each other
(an operand outside the memory its model owns, an index past its table, a kind outside the
closed sets) is refused by the writer and by the reader with a ModelFormatError that names
the section and the field, and the next load works."""
from __future__ import annotations

import copy
import time

import numpy as np
import pytest
from onnx import helper

import aircc
from aircc.errors import ModelFormatError
from aircc.formats import OmFile, dump_om, load_om
from aircc.formats import om as omod
from aircc.formats.payload import encode_payload
from graphs import const, diamond, loop_if_model, model, tensor
from testdata import SAMPLES


def forge(om: OmFile) -> bytes:
    """The bytes of ``om`` written without the writer's checks (the checksums are right)."""
    table, chunks = omod.weight_chunks(om.weights)
    secs = [(omod.SECTION_KINDS[n], 0, [encode_payload(n, p)]) for n, p in om.sections.items()]
    secs += [(omod.WEIGHT_TABLE, 0, [encode_payload("weight_table", table)]),
             (omod.WEIGHTS_DATA, 0, chunks)]
    secs.sort(key=lambda s: s[0])
    return b"".join(omod.assemble(omod.FLAG_DYNAMIC if om.mode == "dynamic" else 0, secs)[1])


def refused(om: OmFile, mutate, fragment: str) -> str:
    """Mutate a copy of ``om``'s sections; writer, reader and loader all refuse it."""
    bad = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)
    mutate(bad.sections)
    with pytest.raises(ModelFormatError) as written:
        dump_om(bad)
    with pytest.raises(ModelFormatError) as read:
        load_om(forge(bad))
    with pytest.raises(ModelFormatError):
        aircc.load(forge(bad))
    for e in (written, read):
        assert fragment in str(e.value), str(e.value)
    return str(read.value)


@pytest.fixture(scope="module")
def conv_model():
    """A static model with a weight, a workspace and both copies: conv (3x3) + relu."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c"], ["y"])],
              [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 4, 8, 8])], [const("w", w)])
    return aircc.compile(m, target="cpu-avx2").om


def _kernels(sections: dict) -> list[tuple[int, int, dict]]:
    return [(s, i, t) for s, tl in enumerate(sections["tasks"]["lists"]) for i, t in enumerate(tl)
            if t["kind"] == "kernel"]


def _first(sections: dict, kind: str, **match) -> tuple[int, int, dict]:
    return next((s, i, t) for s, tl in enumerate(sections["tasks"]["lists"]) for i, t in enumerate(tl)
                if t["kind"] == kind and all(t.get(k) == v for k, v in match.items()))


def test_the_compiled_model_is_valid(conv_model):
    o = load_om(dump_om(conv_model))
    contract = o.parsed()
    assert contract.tasks.count == sum(len(tl) for tl in contract.tasks.lists)
    kinds = {t.kind.value for tl in contract.tasks.lists for t in tl}
    assert {"kernel", "memcpy_h2d", "memcpy_d2h"} <= kinds
    assert any(t.workspace for tl in contract.tasks.lists for t in tl if t.kind.value == "kernel")


def test_an_output_past_the_arena_is_refused(conv_model):
    s, i, t = _kernels(conv_model.sections)[-1]
    arena = conv_model.sections["memory_plan"]["arena_bytes"]

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["outputs"][0]["offset"] = arena - 4
    msg = refused(conv_model, mutate, f"section 'tasks': lists[{s}][{i}].outputs[0]")
    assert f"(node '{t['node']}')" in msg and f"of the arena, which has {arena} bytes" in msg


def test_a_read_past_the_weights_is_refused(conv_model):
    s, i, t = next(k for k in _kernels(conv_model.sections) if k[2]["op"] == "Conv")
    j = next(j for j, o in enumerate(t["inputs"]) if o and o["mem"] == "weights")
    wbytes = conv_model.sections["memory_plan"]["weights_bytes"]

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["inputs"][j]["offset"] = wbytes
    refused(conv_model, mutate, f"lists[{s}][{i}].inputs[{j}] (node '{t['node']}') points to bytes "
                                f"[{wbytes}, ")


def test_a_negative_offset_is_refused(conv_model):
    s, i, _ = _kernels(conv_model.sections)[0]

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["inputs"][0]["offset"] = -64
    refused(conv_model, mutate, f"lists[{s}][{i}].inputs[0].offset must be an int >= 0")


def test_a_workspace_outside_the_arena_is_refused(conv_model):
    s, i, t = next(k for k in _kernels(conv_model.sections) if k[2]["workspace"])
    arena = conv_model.sections["memory_plan"]["arena_bytes"]

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["workspace"]["offset"] = arena
    refused(conv_model, mutate, f"lists[{s}][{i}].workspace (node '{t['node']}')")

    def into_weights(sec):
        sec["tasks"]["lists"][s][i]["workspace"]["mem"] = "weights"
    refused(conv_model, into_weights, "of the weights are not inside the arena")


def test_a_tiling_index_past_the_table_is_refused(conv_model):
    s, i, _ = _kernels(conv_model.sections)[0]
    n = len(conv_model.sections["tiling"]["entries"])

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["tiling"] = n
    refused(conv_model, mutate, f"lists[{s}][{i}].tiling")


def test_copies_serve_existing_bindings_of_their_shape(conv_model):
    s, i, _ = _first(conv_model.sections, "memcpy_h2d")

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["binding"] = 3
    refused(conv_model, mutate, f"lists[{s}][{i}].binding is input 3, but the model has 1 inputs")

    def reshape(sec):
        sec["tasks"]["lists"][s][i]["dst"]["shape"] = [1, 3, 8, 4]
    refused(conv_model, reshape, "for input 'x', which is float32[1, 3, 8, 8]")


def test_every_output_is_copied_to_the_host():
    """An output copy forged into an input copy of the same shape: the run used to return
    None for that output, with no error (the fuzz found it)."""
    om = aircc.compile(diamond()).om
    s, i, _ = _first(om.sections, "memcpy_d2h")

    def mutate(sec):
        task = sec["tasks"]["lists"][s][i]
        task["kind"], task["dst"] = "memcpy_h2d", task.pop("src")
    refused(om, mutate, "copy no output 0 ('y') to the host: every output needs a memcpy_d2h")


def test_a_task_kind_outside_the_closed_set_is_refused(conv_model):
    s, i, _ = _kernels(conv_model.sections)[0]

    def mutate(sec):
        sec["tasks"]["lists"][s][i]["kind"] = "exec"
    refused(conv_model, mutate, f"section 'tasks': lists[{s}][{i}].kind must be one of")


def test_a_weight_of_another_size_is_refused(conv_model):
    def mutate(sec):
        sec["memory_plan"]["weights"][0]["size"] += 4
    refused(conv_model, mutate, "section 'memory_plan': weights[0] gives weight")


@pytest.fixture(scope="module")
def dynamic_model():
    return aircc.compile(f"{SAMPLES}/mlp.onnx", target="cpu-avx2").om


def _host_kernel(sections: dict, kind: str) -> int:
    return next(k for k, h in enumerate(sections["exec_graph"]["kernels"]) if h["kind"] == kind)


def test_dynamic_model_is_valid(dynamic_model):
    contract = load_om(dump_om(dynamic_model)).parsed()
    assert contract.mode == "dynamic" and contract.exec_graph.kernels


def test_a_host_kernel_of_an_unknown_kind_is_refused(dynamic_model):
    k = _host_kernel(dynamic_model.sections, "launch")

    def mutate(sec):
        sec["exec_graph"]["kernels"][k]["kind"] = "run_python"
    refused(dynamic_model, mutate, f"section 'exec_graph': kernels[{k}].kind must be one of")


def test_host_kernel_ids_within_their_counts(dynamic_model):
    eg = dynamic_model.sections["exec_graph"]
    k = _host_kernel(dynamic_model.sections, "launch")
    n = len(eg["nodes"])

    def node(sec):
        sec["exec_graph"]["kernels"][k]["node"] = n
    refused(dynamic_model, node, f"kernels[{k}].node must be an int in [0, {n})")

    def stream(sec):
        sec["exec_graph"]["kernels"][k]["stream"] = eg["streams"]
    refused(dynamic_model, stream, f"kernels[{k}].stream must be an int in [0, {eg['streams']})")

    a = _host_kernel(dynamic_model.sections, "alloc")

    def value(sec):
        sec["exec_graph"]["kernels"][a]["values"] = ["nobody"]
    refused(dynamic_model, value, f"kernels[{a}].values[0] names value 'nobody'")


def test_a_control_kernel_must_run_control_flow():
    om = aircc.compile(loop_if_model(), mode="dynamic", target="cpu-avx2").om
    eg = om.sections["exec_graph"]
    k = next(k for k, h in enumerate(eg["kernels"]) if h["kind"] == "control")
    node = eg["kernels"][k]["node"]
    bad = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)
    bad.sections["exec_graph"]["nodes"][node]["op"] = "Clip"    # not control flow, same arity
    with pytest.raises(ModelFormatError, match=f"kernels\\[{k}\\].node is node {node} "
                                               f"\\('{eg['nodes'][node]['name']}', op Clip\\), not an If"):
        aircc.load(forge(bad))
    moved = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)   # results nobody made
    moved.sections["exec_graph"]["kernels"][k]["node"] = next(
        n for n, x in enumerate(eg["nodes"]) if x["op"] == "ReduceSum")
    with pytest.raises(ModelFormatError, match="section 'exec_graph': kernels\\[\\d+\\] is control of "
                                               "node \\d+ \\('ReduceSum_1'\\), which reads \\['h'\\] before"):
        aircc.load(forge(moved))
    with aircc.load(om) as good:                             # the next load works
        assert good.run({"M": np.array(2, np.int64),
                         "x": np.ones((2, 8), np.float32)})["y"].shape == (2, 8)


# ------------------------------------------------------------------ holes the fuzzer found
# (tests/fuzz_om.py: each of these got past the reader and failed later, or used memory the
# file does not describe)
def test_an_operand_shape_is_counted_exactly(conv_model):
    s, i, _ = _kernels(conv_model.sections)[0]
    arena = conv_model.sections["memory_plan"]["arena_bytes"]

    def wraps(sec):          # an int64 product of these dims wraps around to a small size
        sec["tasks"]["lists"][s][i]["inputs"][0]["shape"] = [1, 2**63 - 1, 8, 8]
    refused(conv_model, wraps, f"lists[{s}][{i}].inputs[0].shape [1, {2**63 - 1}, 8, 8] has more "
                               f"elements than an array can hold")

    def empty_but_huge(sec):  # no bytes, but no array can have that shape
        sec["tasks"]["lists"][s][i]["inputs"][0]["shape"] = [0, 2**62]
    refused(conv_model, empty_but_huge, "has more elements than an array can hold")

    def past_the_arena(sec):
        sec["tasks"]["lists"][s][i]["inputs"][0]["shape"] = [2**20, 2**20]
    msg = refused(conv_model, past_the_arena, f"lists[{s}][{i}].inputs[0] (node '")
    offset = conv_model.sections["tasks"]["lists"][s][i]["inputs"][0]["offset"]
    assert f"[{offset}, {offset + 2**42}) of the arena, which has {arena} bytes" in msg


def test_buffer_lifetimes_name_tasks_of_the_model(conv_model):
    count = conv_model.sections["tasks"]["count"]

    def mutate(sec):
        sec["memory_plan"]["buffers"][0]["last_task"] = count
    refused(conv_model, mutate, f"section 'memory_plan': buffers[0].last_task")

    def reader(sec):
        sec["memory_plan"]["buffers"][0]["readers"] = [-1]
    refused(conv_model, reader, f"buffers[0].readers[0] ('")


def test_an_io_dtype_numpy_does_not_know_is_refused(dynamic_model):
    def mutate(sec):
        sec["model"]["inputs"][0]["dtype"] = "event_record"
    refused(dynamic_model, mutate, "section 'model': inputs[0].dtype must be a dtype name")


def test_gear_batch_inputs_are_inputs_of_the_model():
    om = aircc.compile(diamond(), input_shapes={"x": [-1, 4]}, dynamic_batch=[1, 2]).om

    def mutate(sec):
        sec["gears"]["batch_inputs"] = ["k0"]
    refused(om, mutate, "section 'gears': batch_inputs[0] is 'k0', which is not an input")


def test_dynamic_events_are_bounded_by_the_kernels_recording_them(dynamic_model):
    def mutate(sec):                      # was a set of 2**62 events built at load
        sec["exec_graph"]["events"] = 2**62
    t0 = time.perf_counter()
    refused(dynamic_model, mutate, f"section 'exec_graph': events is {2**62}, but no kernel "
                                   f"records event 0 (0 events are recorded)")
    assert time.perf_counter() - t0 < 5


def test_the_model_inputs_and_outputs_are_typed_alike_in_the_exec_graph(dynamic_model):
    def mutate(sec):
        sec["model"]["inputs"][0]["dtype"] = "float64"
    refused(dynamic_model, mutate, "section 'exec_graph': values['input'] is float32")

    def untyped(sec):
        del sec["exec_graph"]["values"]["input"]
    refused(dynamic_model, untyped, "values['input'] is not typed, but section 'model' declares "
                                    "input 'input'")


def test_every_value_a_node_names_is_typed_or_stored(dynamic_model):
    def mutate(sec):
        sec["exec_graph"]["nodes"][2]["inputs"][1] = "sequence:"
    refused(dynamic_model, mutate, "section 'exec_graph': nodes[2].inputs[1] names value "
                                   "'sequence:', which the section does not type")


def test_values_are_made_before_they_are_used(dynamic_model):
    eg = dynamic_model.sections["exec_graph"]
    free = next(k for k, h in enumerate(eg["kernels"]) if h["kind"] == "free")
    launch = next(k for k, h in enumerate(eg["kernels"]) if h["kind"] == "launch")

    def freed_early(sec):                 # the launch reading it comes after its free
        kernels = sec["exec_graph"]["kernels"]
        kernels.insert(launch, kernels.pop(free))
    refused(dynamic_model, freed_early, f"kernels[{launch + 1}] is launch of node "
                                        f"{eg['kernels'][launch]['node']}")
    refused(dynamic_model, freed_early, "hold no data there (not allocated, or freed)")

    later = eg["nodes"][3]["outputs"][0]

    def made_later(sec):                  # node 2 reads node 3's output
        sec["exec_graph"]["nodes"][2]["inputs"][0] = later
    refused(dynamic_model, made_later, f"is infer_shape of node 2 ('{eg['nodes'][2]['name']}'), "
                                       f"which reads ['{later}'] before anything makes them")


def test_copy_kernels_run_copy_nodes_of_existing_bindings(dynamic_model):
    eg = dynamic_model.sections["exec_graph"]
    launch = next(k for k, h in enumerate(eg["kernels"]) if h["kind"] == "launch")
    h2d = next(k for k, h in enumerate(eg["kernels"]) if h["kind"] == "memcpy_h2d")
    d2h = next(n for n, x in enumerate(eg["nodes"]) if x["op"] == "MemcpyD2H")

    def launch_as_copy(sec):
        sec["exec_graph"]["kernels"][launch]["kind"] = "memcpy_d2h"
    refused(dynamic_model, launch_as_copy, f"kernels[{launch}].node is memcpy_d2h of node")
    refused(dynamic_model, launch_as_copy, "which is not a MemcpyD2H node")

    def copy_as_tiling(sec):
        sec["exec_graph"]["kernels"][h2d]["kind"] = "tiling"
    refused(dynamic_model, copy_as_tiling, f"kernels[{h2d}].node is tiling of node "
                                           f"{eg['kernels'][h2d]['node']}")
    refused(dynamic_model, copy_as_tiling, "a copy node (run by memcpy_h2d only)")

    def binding(sec):
        sec["exec_graph"]["nodes"][d2h]["attrs"]["binding"] = 1
    refused(dynamic_model, binding, f"section 'exec_graph': nodes[{d2h}].attrs.binding of "
                                    f"MemcpyD2H node")
