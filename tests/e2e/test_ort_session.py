"""aircc.InferenceSession against onnxruntime.InferenceSession: one script, both runtimes.

:func:`session_script` is code written for onnxruntime (sessions from a path and from
bytes, inputs, outputs, metadata, ``run`` with and without output names, IO binding into
pre-allocated arrays, SessionOptions); it runs once with ``onnxruntime`` and once with
``aircc`` as the runtime module, and everything the two return must agree.  Then what
is aircc's own: the compile cache, .om files, and the errors user code depends on.
"""
from __future__ import annotations

import json
import os
import types

import numpy as np
import onnx
import onnxruntime
import pytest

import aircc
from aircc import config
from aircc.session import compile_cache
from aircc.errors import InputError, ModelFormatError
from aircc.formats import dump_om, load_om
from testdata import SAMPLES

PROVIDERS = ["CPUExecutionProvider"]
#: (sample, ONNX metadata set on it, feeds) — a dynamic MLP (symbolic batch, no model
#: version), the BERT-style encoder (dynamic, int64 inputs, two outputs whose inferred
#: dims aircc names its own way) and the static multi-stream branches model.
MODELS = {
    "mlp": ({"doc_string": "a three-layer perceptron", "domain": "ai.aircc.test",
             "props": {"author": "aircc tests", "task": "classification"}},
            lambda rng: {"input": rng.standard_normal((3, 784)).astype(np.float32)}),
    "bert_encoder": ({"doc_string": "encoder", "model_version": 7, "graph_doc_string": "layers",
                      "props": {"license": "Apache-2.0"}},
                     lambda rng: {"input_ids": rng.integers(0, 100, (2, 9)),
                                  "attention_mask": np.ones((2, 9), np.int64)}),
    "branches": ({"doc_string": "two branches", "model_version": 0, "domain": "branches"},
                 lambda rng: {"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}),
}
META_FIELDS = ("producer_name", "graph_name", "domain", "description", "graph_description",
               "version", "custom_metadata_map")


@pytest.fixture(autouse=True)
def threads_restored():
    """``intra_op_num_threads`` sets aircc's threads for the whole process: put them back."""
    yield
    aircc.set_threads(None)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """A compile cache of this module's own (``AIRCC_CACHE_DIR``), undone at its end."""
    folder = tmp_path_factory.mktemp("aircc_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRCC_CACHE_DIR", str(folder))
        config.reload()
        yield folder
    config.reload()


@pytest.fixture(scope="module")
def models(tmp_path_factory, cache_dir):
    """The samples with metadata of their own, as .onnx files."""
    folder = tmp_path_factory.mktemp("ort_models")
    paths = {}
    for name, (meta, _) in MODELS.items():
        m = onnx.load(os.path.join(SAMPLES, f"{name}.onnx"))
        m.doc_string, m.domain = meta["doc_string"], meta.get("domain", "")
        if "model_version" in meta:
            m.model_version = meta["model_version"]
        m.graph.doc_string = meta.get("graph_doc_string", "")
        onnx.helper.set_model_props(m, meta.get("props", {}))
        paths[name] = str(folder / f"{name}.onnx")
        onnx.save(m, paths[name])
    return paths


def session_script(rt: types.ModuleType, model_path: str, feeds: dict) -> dict:
    """onnxruntime user code, run with ``rt`` (onnxruntime or aircc): what it sees."""
    so = rt.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = rt.InferenceSession(model_path, sess_options=so, providers=PROVIDERS)
    with open(model_path, "rb") as f:
        from_bytes = rt.InferenceSession(f.read(), providers=PROVIDERS)

    def args(nodes):
        return [(a.name, list(a.shape), a.type) for a in nodes]

    meta = sess.get_modelmeta()
    outputs = sess.get_outputs()
    out = {"inputs": args(sess.get_inputs()), "outputs": args(outputs),
           "bytes_inputs": args(from_bytes.get_inputs()),
           "bytes_outputs": args(from_bytes.get_outputs()),
           "meta": {k: getattr(meta, k) for k in META_FIELDS},
           "threads": sess.get_session_options().intra_op_num_threads,
           "run_all": sess.run(None, feeds), "run_bytes": from_bytes.run(None, feeds),
           "run_last": sess.run([outputs[-1].name], feeds)}
    first = outputs[0].name
    shape, dtype = out["run_all"][0].shape, out["run_all"][0].dtype

    # IO binding: the first output into a pre-allocated OrtValue over a numpy array
    pre = np.full(shape, np.nan, dtype)
    binding = sess.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_output(first, rt.OrtValue.ortvalue_from_numpy(pre))
    sess.run_with_iobinding(binding)
    out["bound_into_array"] = pre.copy()
    out["bound_value"] = binding.get_outputs()[0].numpy().copy()

    # IO binding: every output allocated by the run, then copied to the host
    binding = sess.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, rt.OrtValue.ortvalue_from_numpy(value))
    for o in outputs:
        binding.bind_output(o.name)
    sess.run_with_iobinding(binding)
    binding.synchronize_outputs()
    out["bound_copied"] = binding.copy_outputs_to_cpu()

    # IO binding: the first output into raw memory (buffer_ptr), as device code does
    raw = np.full(shape, np.nan, dtype)
    binding.clear_binding_outputs()
    binding.bind_output(first, "cpu", 0, dtype, list(shape), raw.ctypes.data)
    sess.run_with_iobinding(binding)
    out["bound_into_pointer"] = raw.copy()
    value = rt.OrtValue.ortvalue_from_numpy(raw)
    out["ortvalue"] = (value.shape(), value.data_type(), value.device_name(),
                       value.data_ptr() == raw.ctypes.data)
    return out


def assert_same(ours, theirs, where: str = "") -> None:
    """Equal structure and values; arrays equal in dtype and shape, within float tolerance."""
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.dtype == theirs.dtype, where
        assert ours.shape == theirs.shape, where
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5, err_msg=where)
    elif isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), where
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{where}.{k}")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), f"{where}: {ours!r} != {theirs!r}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, f"{where}: aircc {ours!r}, onnxruntime {theirs!r}"


@pytest.mark.parametrize("name", list(MODELS))
def test_the_same_script_sees_the_same_with_both_runtimes(models, name):
    feeds = MODELS[name][1](np.random.default_rng(0))
    theirs = session_script(onnxruntime, models[name], feeds)
    ours = session_script(aircc, models[name], feeds)
    assert_same(ours, theirs)
    # and the script saw real work: the runs agree with one another, the bound arrays hold
    # the outputs (they began as NaN), and the metadata is the model's own
    for key in ("run_bytes", "bound_copied"):
        assert_same(ours[key], ours["run_all"], key)
    for key in ("bound_into_array", "bound_value", "bound_into_pointer"):
        np.testing.assert_array_equal(ours[key], ours["run_all"][0], err_msg=key)
    np.testing.assert_array_equal(ours["run_last"][0], ours["run_all"][-1])
    assert ours["meta"]["description"] == MODELS[name][0]["doc_string"]
    assert ours["threads"] == 1


def test_a_model_with_symbolic_dims_compiles_dynamic_and_reads_as_declared(models):
    sess = aircc.InferenceSession(models["bert_encoder"], providers=PROVIDERS)
    assert sess.model.engine.om.mode == "dynamic"
    inferred = [list(o.shape) for o in sess.model.outputs]
    assert inferred != [o.shape for o in sess.get_outputs()]      # aircc's own symbols ...
    assert [o.shape for o in sess.get_outputs()] == [["batch", "seq", 64], ["batch", 64]]  # ... shown as declared
    static = aircc.InferenceSession(models["branches"])
    assert static.model.engine.om.mode == "static"


def test_a_free_dimension_override_compiles_static_as_onnxruntime_shows_it(models):
    shapes = []
    for rt in (onnxruntime, aircc):
        so = rt.SessionOptions()
        so.add_free_dimension_override_by_name("batch", 4)
        sess = rt.InferenceSession(models["mlp"], so, providers=PROVIDERS)
        shapes.append([(a.name, list(a.shape)) for a in sess.get_inputs() + sess.get_outputs()])
    assert shapes[0] == shapes[1] == [("input", [4, 784]), ("probs", [4, 10])]
    assert sess.model.engine.om.mode == "static"


def test_the_second_session_loads_the_cached_model(models, monkeypatch):
    calls = []
    real = compile_cache.compile_model
    monkeypatch.setattr(compile_cache, "compile_model",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    so = aircc.SessionOptions()
    so.graph_optimization_level = aircc.GraphOptimizationLevel.ORT_DISABLE_ALL  # a key of its own
    first = aircc.InferenceSession(models["mlp"], so)
    assert first.compile_cache.status in ("compiled", "hit") and os.path.isfile(first.compile_cache.path)
    stamp = os.stat(first.compile_cache.path).st_mtime_ns
    calls.clear()
    second = aircc.InferenceSession(models["mlp"], so)
    assert second.compile_cache.status == "hit" and calls == []
    assert second.compile_cache.path == first.compile_cache.path
    assert os.stat(second.compile_cache.path).st_mtime_ns == stamp
    # other options, another entry: ORT_DISABLE_ALL leaves MatMul, Add and Relu unfused
    default = aircc.InferenceSession(models["mlp"])
    assert default.compile_cache.path != first.compile_cache.path
    kernels = [load_om(s.compile_cache.path).sections["model"]["compile_report"]["kernels"]
               for s in (first, default)]
    assert kernels[0] > kernels[1]
    x = MODELS["mlp"][1](np.random.default_rng(1))
    np.testing.assert_allclose(first.run(None, x)[0], default.run(None, x)[0], rtol=1e-5, atol=1e-6)


def test_a_corrupt_cache_entry_is_compiled_again(models, monkeypatch):
    feeds = MODELS["branches"][1](np.random.default_rng(2))
    expected = onnxruntime.InferenceSession(models["branches"], providers=PROVIDERS).run(None, feeds)
    path = aircc.InferenceSession(models["branches"]).compile_cache.path
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF                         # a flipped byte inside a section
    open(path, "wb").write(bytes(data))
    with pytest.raises(ModelFormatError, match="checksum mismatch"):
        load_om(path)
    calls = []
    real = compile_cache.compile_model
    monkeypatch.setattr(compile_cache, "compile_model",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    sess = aircc.InferenceSession(models["branches"])
    assert sess.compile_cache.status == "recompiled" and calls == [1]
    load_om(path)                                        # replaced by a sound file
    np.testing.assert_allclose(sess.run(None, feeds)[0], expected[0], rtol=1e-4, atol=1e-5)
    open(path, "wb").write(bytes(data[:100]))            # truncated
    assert aircc.InferenceSession(models["branches"]).compile_cache.status == "recompiled"


def test_an_om_path_or_bytes_reads_as_the_onnx_model(models, tmp_path):
    om_path = str(tmp_path / "bert.om")
    aircc.compile(models["bert_encoder"], om_path)
    ref = onnxruntime.InferenceSession(models["bert_encoder"], providers=PROVIDERS)
    feeds = MODELS["bert_encoder"][1](np.random.default_rng(3))
    for source in (om_path, open(om_path, "rb").read()):
        sess = aircc.InferenceSession(source)
        assert sess.compile_cache is None                # loaded, not compiled
        for ours, theirs in ((sess.get_inputs(), ref.get_inputs()),
                             (sess.get_outputs(), ref.get_outputs())):
            assert [(a.name, a.shape, a.type) for a in ours] == \
                [(a.name, a.shape, a.type) for a in theirs]
        assert {k: getattr(sess.get_modelmeta(), k) for k in META_FIELDS} == \
            {k: getattr(ref.get_modelmeta(), k) for k in META_FIELDS}
        assert_same(sess.run(None, feeds), ref.run(None, feeds))


def test_an_om_without_the_onnx_record_still_loads(models):
    om = aircc.compile(models["mlp"]).om
    del om.sections["model"]["onnx"]
    om.contract = None
    sess = aircc.InferenceSession(dump_om(om))
    assert sess.get_modelmeta().graph_name == "mlp"
    assert sess.get_modelmeta().version == 2**63 - 1 and sess.get_modelmeta().description == ""
    assert [a.shape for a in sess.get_inputs()] == [["batch", 784]]


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(extra=1), "onnx has unknown keys ['extra']"),
    (lambda r: r.pop("graph_name"), "onnx is missing key 'graph_name'"),
    (lambda r: r.update(model_version="7"), "onnx.model_version must be an int"),
    (lambda r: r["metadata_props"].update(k=1), "onnx.metadata_props must map str to str"),
    (lambda r: r["input_shapes"].update(nope=[1]), "not one of the model's inputs"),
    (lambda r: r["output_shapes"].update(probs=[1.5, 10]), "onnx.output_shapes.probs[0] must be"),
])
def test_the_onnx_record_is_read_strictly(models, mutate, message):
    om = aircc.compile(models["mlp"]).om
    data = bytearray(dump_om(om))
    om.sections["model"] = json.loads(json.dumps(om.sections["model"]))
    mutate(om.sections["model"]["onnx"])
    om.contract = None
    with pytest.raises(ModelFormatError, match="section 'model'") as e:
        dump_om(om)                                      # the writer checks what the reader does
    assert message in str(e.value)
    assert load_om(bytes(data)).parsed().model.onnx is not None


def test_providers_onnxruntime_names_run_here_and_unknown_ones_are_refused(models):
    sess = aircc.InferenceSession(models["mlp"], providers=[
        ("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"])
    assert sess.get_providers() == ["AirccVirtualDeviceProvider"]
    assert sess.get_provider_options() == {"AirccVirtualDeviceProvider": {"device_id": "0"}}
    assert aircc.get_available_providers() == ["AirccVirtualDeviceProvider"]
    with pytest.raises(ValueError, match="unknown provider 'FooExecutionProvider'.*"
                                         "AirccVirtualDeviceProvider"):
        aircc.InferenceSession(models["mlp"], providers=["FooExecutionProvider"])
    with pytest.raises(ValueError, match=r"has no options \['arena_size'\]"):
        aircc.InferenceSession(models["mlp"], providers=["AirccVirtualDeviceProvider"],
                               provider_options=[{"arena_size": "1"}])


def test_wrong_names_are_errors_naming_what_the_model_has(models):
    x = MODELS["mlp"][1](np.random.default_rng(4))["input"]
    ref = onnxruntime.InferenceSession(models["mlp"], providers=PROVIDERS)
    with pytest.raises(ValueError, match="input"):                # onnxruntime refuses it too
        ref.run(None, {"inp": x})
    sess = aircc.InferenceSession(models["mlp"])
    with pytest.raises(InputError, match=r"unknown input names \['inp'\]; the model's inputs "
                                         r"are \['input'\]"):
        sess.run(None, {"inp": x})
    with pytest.raises(InputError, match=r"unknown output names \['prob'\]; the model's "
                                         r"outputs are \['probs'\]"):
        sess.run(["prob"], {"input": x})
    binding = sess.io_binding()
    with pytest.raises(InputError, match=r"cannot bind input 'x': the model's inputs are \['input'\]"):
        binding.bind_cpu_input("x", x)
    binding.bind_cpu_input("input", x)
    with pytest.raises(InputError, match="no output is bound"):
        sess.run_with_iobinding(binding)
    binding.bind_ortvalue_output("probs", aircc.OrtValue.ortvalue_from_numpy(np.zeros((2, 10), np.float32)))
    with pytest.raises(InputError, match=r"output 'probs' is float32\[3, 10\] in this run but "
                                         r"the value bound to it is float32\[2, 10\]"):
        sess.run_with_iobinding(binding)


def test_session_options_log_and_profile(models, tmp_path, capfd):
    so = aircc.SessionOptions()
    so.log_severity_level = 1                            # info: what the session did
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "mlp_profile")
    sess = aircc.InferenceSession(models["mlp"], so)
    assert "aircc INFO [aircc.cache] model 'mlp'" in capfd.readouterr().err
    sess.run(None, MODELS["mlp"][1](np.random.default_rng(5)))
    path = sess.end_profiling()
    assert path.startswith(str(tmp_path / "mlp_profile_")) and path.endswith(".json")
    assert json.load(open(path))["traceEvents"]
    assert sess.end_profiling() == ""                    # as onnxruntime: nothing recording
    so.graph_optimization_level = 5
    with pytest.raises(aircc.errors.ConfigError, match="graph_optimization_level=5: expected "
                                                       "one of ORT_DISABLE_ALL"):
        aircc.InferenceSession(models["mlp"], so)
