"""No kernel gets operands that share bytes they should not: a file whose kernel task writes
an output over another output, over its own workspace (a oneDNN primitive's scratchpad,
which holds pointers), or reads an input the task writes over, is refused at load with a
ModelFormatError naming the task; only the ops the memory planner runs in place may share,
and only as it places them (formats/task_operands.py).  Every model the compiler makes keeps
the rule (the writer checks it too): the light models, the samples, graphs of tests/graphs.py."""
from __future__ import annotations

import copy
import itertools
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.errors import ModelFormatError
from aircc.formats import OmFile, load_om
from aircc.formats.checks import Checker
from aircc.formats.task_operands import check_task_operands, in_place_flags
from graphs import concat_model, const, diamond, if_model, loop_if_model, model, tensor
from test_om_contract import forge
from testdata import LIGHT_MODELS, SAMPLES, light_path, numpy_target


def _conv3x3() -> onnx.ModelProto:
    """A 3x3 convolution oneDNN runs with a scratchpad (Winograd or direct), + Relu."""
    w = np.random.default_rng(0).standard_normal((16, 16, 3, 3)).astype(np.float32)
    return model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["y"])],
                 [tensor("x", [1, 16, 32, 32])], [tensor("y", [1, 16, 32, 32])], [const("w", w)])


@pytest.fixture(scope="module")
def conv_om() -> OmFile:
    return aircc.compile(_conv3x3()).om


def _slots(task: dict) -> list[tuple[str, dict]]:
    """(field, operand or workspace) of every arena address a kernel task touches."""
    out = [(f"{key}[{i}]", o) for key in ("inputs", "outputs")
           for i, o in enumerate(task[key]) if o and o["mem"] == "arena"]
    return out + ([("workspace", task["workspace"])] if task.get("workspace") else [])


def test_a_workspace_over_the_output_crashed_and_is_now_refused(conv_om):
    """The reported hole: the convolution's scratchpad moved onto its own output (one field of
    a file with valid checksums) crashed the process in oneDNN; the loader now refuses it."""
    s, i, task = next((s, i, t) for s, tl in enumerate(conv_om.sections["tasks"]["lists"])
                      for i, t in enumerate(tl) if t.get("op") == "Conv")
    assert task["workspace"]["size"] > 0
    bad = OmFile(conv_om.mode, copy.deepcopy(conv_om.sections), conv_om.weights)
    bad.sections["tasks"]["lists"][s][i]["workspace"]["offset"] = task["outputs"][0]["offset"]
    with pytest.raises(ModelFormatError, match=f"section 'tasks': lists\\[{s}\\]\\[{i}\\].workspace "
                                               f"\\(node '{task['node']}', Conv\\) bytes .* overlap "
                                               f"outputs\\[0\\]"):
        aircc.load(forge(bad))


def test_every_operand_moved_onto_another_of_its_task_is_refused(conv_om):
    """Each kernel task's outputs and workspace moved onto each other address of the task,
    and each input onto each output or the workspace: all refused, naming the task; an input
    moved onto another input (both only read) still loads."""
    cases = refused = loaded = 0
    for s, tl in enumerate(conv_om.sections["tasks"]["lists"]):
        for i, task in enumerate(tl):
            if task["kind"] != "kernel":
                continue
            for (a, moved), (b, onto) in itertools.permutations(_slots(task), 2):
                reads_only = a.startswith("inputs") and b.startswith("inputs")
                bad = OmFile(conv_om.mode, copy.deepcopy(conv_om.sections), conv_om.weights)
                target = bad.sections["tasks"]["lists"][s][i]
                slot = target["workspace"] if a == "workspace" else \
                    target[a.split("[")[0]][int(a.split("[")[1][:-1])]
                slot["offset"] = onto["offset"]
                cases += 1
                if reads_only:
                    aircc.load(forge(bad)).close()
                    loaded += 1
                    continue
                with pytest.raises(ModelFormatError) as e:
                    load_om(forge(bad))
                assert f"lists[{s}][{i}]" in str(e.value) and task["node"] in str(e.value), str(e.value)
                refused += 1
    assert refused == cases - loaded and refused >= 6


def test_ops_in_place_share_exactly_where_the_planner_puts_them(tmp_path):
    """A Concat whose parts are written into their slices and a Reshape on its input's bytes
    load and match onnxruntime; a part moved by one element, or an in-place flag on an op the
    planner never runs in place, is refused."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("Tanh", ["r"], ["y"])]
    m = model(nodes, [tensor("x", [1, 4, 6])], [tensor("y", [8, 6])],
              [const("shape", np.array([8, 6], np.int64))])
    om = aircc.compile(m, target=numpy_target()).om
    tasks = [(s, i, t) for s, tl in enumerate(om.sections["tasks"]["lists"]) for i, t in enumerate(tl)
             if t["kind"] == "kernel"]
    concat = next(x for x in tasks if x[2]["op"] == "Concat")
    assert concat[2]["attrs"]["in_place"] == [True, True]
    assert any(t["op"] == "Reshape" and t["attrs"].get("in_place") for _, _, t in tasks)
    x = np.random.default_rng(1).standard_normal((1, 4, 6)).astype(np.float32)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with aircc.load(forge(om)) as loaded:
        np.testing.assert_allclose(loaded.run({"x": x})["y"], ref, rtol=1e-6)

    s, i, t = concat
    shifted = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)
    shifted.sections["tasks"]["lists"][s][i]["inputs"][1]["offset"] += 4
    with pytest.raises(ModelFormatError, match="marked in place .* not at its place in outputs\\[0\\]"):
        load_om(forge(shifted))
    s, i, t = next(x for x in tasks if x[2]["op"] == "Tanh")
    flagged = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)
    task = flagged.sections["tasks"]["lists"][s][i]
    task["attrs"]["in_place"] = [True]
    task["outputs"][0]["offset"] = task["inputs"][0]["offset"]
    with pytest.raises(ModelFormatError, match="only an op run in place may write over its input"):
        load_om(forge(flagged))


#: Light models whose layers are few and large (fully connected heads of 100 MB and more):
#: long to compile, and nothing their convolutions share with the others'.
BIG = {"vgg19", "zfnet512", "bvlc_alexnet"}


def _compiled() -> list[tuple[str, OmFile]]:
    """The models the rule must hold for: light models (native and numpy targets), samples, graphs."""
    out = []
    for name in (m for m in LIGHT_MODELS if m not in BIG):
        out.append((name, aircc.compile(light_path(name)).om))
        if name in ("densenet121", "inception_v1", "inception_v2", "squeezenet", "shufflenet"):
            out.append((f"{name} (numpy)", aircc.compile(light_path(name), target=numpy_target()).om))
    out += [("mlp", aircc.compile(os.path.join(SAMPLES, "mlp.onnx"), input_shapes={"input": [4, 784]}).om),
            ("branches", aircc.compile(os.path.join(SAMPLES, "branches.onnx")).om),
            ("bert", aircc.compile(os.path.join(SAMPLES, "bert_encoder.onnx"), mode="static",
                                   input_shapes={"input_ids": [2, 16], "attention_mask": [2, 16]}).om),
            ("diamond", aircc.compile(diamond(), streams=None, min_branch_bytes=0).om),
            ("gears", aircc.compile(diamond(), input_shapes={"x": [-1, 4]}, dynamic_batch=[1, 2]).om),
            ("loop_if", aircc.compile(loop_if_model(), mode="static").om),
            ("if", aircc.compile(if_model()).om), ("concat", aircc.compile(concat_model(1)).om)]
    return out


def test_every_compiled_model_keeps_the_rule():
    """The compiler's own files pass the check (it is the writer's as well), and the rule is
    not vacuous: many of their tasks run in place, and every one of those shares bytes."""
    in_place = 0
    for name, om in _compiled():
        for plan in om.parsed().static_plans():
            check_task_operands(plan.tasks, Checker("tasks"), "")
            for task in (t for tl in plan.tasks.lists for t in tl if t.kind.value == "kernel"):
                flags = in_place_flags(task)
                for k in (k for k, f in enumerate(flags) if f):
                    x, y = task.inputs[k], task.outputs[0]
                    assert y.offset <= x.offset < y.offset + y.nbytes, (name, task.node)
                    in_place += 1
    assert in_place >= 50
