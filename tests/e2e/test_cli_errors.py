"""Misuses of ``aircc`` and ``airrun``: each fails with exactly one ``error: [code] ...`` line
on stderr and the exit code documented for what went wrong (the command line or the
environment 2, the model 3, the input data 4, the run 5, a bug 70)."""
from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

import aircc
from aircc import config
from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.cli.airrun_cmd import main as airrun
from aircc.cli.paths import write_atomically
from aircc.errors import (EXIT_INPUT, EXIT_INTERNAL, EXIT_MODEL, EXIT_RUNTIME, EXIT_USAGE,
                          CommandLineError, CompileOptionError, ConfigError,
                          DeviceOutOfMemoryError, InputError, ModelFormatError,
                          ModelImportError, ShapeInferenceError)
from graphs import const, model, tensor
from testdata import SAMPLES

CLI, CFG, OPT = CommandLineError.code, ConfigError.code, CompileOptionError.code
IMPORT, SHAPE, FORMAT = ModelImportError.code, ShapeInferenceError.code, ModelFormatError.code
INPUT, OOM = InputError.code, DeviceOutOfMemoryError.code
NEWEST = onnx.defs.onnx_opset_version()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """The compiled MLP sample, broken models and broken input files, by name."""
    d = tmp_path_factory.mktemp("misuse")
    om = d / "mlp.om"
    aircc.compile(f"{SAMPLES}/mlp.onnx", str(om), input_shapes={"input": [4, 784]})
    data = om.read_bytes()
    (d / "garbage.om").write_bytes(b"garbage" * 20)
    (d / "truncated.om").write_bytes(data[:len(data) // 2])
    (d / "garbage.onnx").write_bytes(b"\x00not an onnx model")
    relu = ([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])])
    onnx.save(model(*relu, opset=99), str(d / "opset99.onnx"))
    onnx.save(helper.make_model(helper.make_graph([], "g", [], []), ir_version=8,
                                opset_imports=[helper.make_opsetid("", 17)]),
              str(d / "no_outputs.onnx"))
    gather = model([helper.make_node("Gather", ["data", "idx"], ["g"], axis=0, name="pick"),
                    helper.make_node("Add", ["x", "g"], ["y"], name="add")],
                   [tensor("x", [1, 3])], [tensor("y", [1, 3])],
                   [const("data", np.zeros((2, 3), np.float32)), const("idx", np.array([5]))])
    onnx.save(gather, str(d / "gather.onnx"))
    x = np.load(f"{SAMPLES}/mlp_input.npy")
    np.save(d / "x64.npy", x.astype(np.float64))
    np.save(d / "x2.npy", x[:2])
    (d / "corrupt.npy").write_bytes(b"\x93NUMPY\x01\x00" + b"\x00" * 20)
    (d / "text.npy").write_text("1 2 3\n")
    np.save(d / "object.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (d / "pickle.npy").write_bytes(pickle.dumps(x))
    np.savez(d / "unknown.npz", nope=x)
    (d / "corrupt.npz").write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    (d / "afile").write_text("")
    paths = {p.name.replace(".", "_"): str(p) for p in d.iterdir()}
    return {**paths, "om": str(om), "dir": str(d), "onnx": f"{SAMPLES}/mlp.onnx",
            "x": f"{SAMPLES}/mlp_input.npy"}


def check(exit_code: int, stderr: str, code: int, expected_exit: int, words: str = "") -> None:
    """One ``error: [code]`` line on stderr, naming ``words``, and the expected exit code."""
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert lines[0].startswith(f"error: [{code}] "), lines[0]
    assert words in lines[0]
    assert exit_code == expected_exit, (exit_code, lines[0])


COMPILE = ["compile", "{onnx}", "-o", "{dir}/out.om"]
RUN = ["{om}", "--input", "{x}", "--quiet"]

#: (id, tool, arguments, error code, exit code, words the message must contain)
MISUSES = [
    # aircc: the command line
    ("aircc-no-command", aircc_cli, [], CLI, EXIT_USAGE, "missing command"),
    ("aircc-unknown-command", aircc_cli, ["bogus"], CLI, EXIT_USAGE, "bogus"),
    ("compile-unknown-option", aircc_cli, [*COMPILE, "--bogus"], CLI, EXIT_USAGE, "--bogus"),
    ("compile-missing-model", aircc_cli, ["compile", "{dir}/missing.onnx", "-o", "{dir}/o.om"],
     CLI, EXIT_USAGE, "missing.onnx"),
    ("compile-no-output", aircc_cli, ["compile", "{onnx}"], CLI, EXIT_USAGE, "-o/--output"),
    ("compile-output-folder-missing", aircc_cli, ["compile", "{onnx}", "-o", "{dir}/no/x.om"],
     CLI, EXIT_USAGE, "does not exist"),
    ("compile-output-under-a-file", aircc_cli, ["compile", "{onnx}", "-o", "{afile}/x.om"],
     CLI, EXIT_USAGE, "not a folder"),
    ("compile-unknown-target", aircc_cli, [*COMPILE, "--target", "tpu"], OPT, EXIT_USAGE,
     "known targets"),
    ("compile-bad-input-shape", aircc_cli, [*COMPILE, "--input-shape", "nonsense"], CLI,
     EXIT_USAGE, "NAME:D1,D2"),
    ("compile-input-shape-unknown-name", aircc_cli, [*COMPILE, "--input-shape", "nope:4,784"],
     OPT, EXIT_USAGE, "nope"),
    ("compile-bad-dynamic-batch", aircc_cli, [*COMPILE, "--dynamic-batch", "1,x"], CLI,
     EXIT_USAGE, "batch sizes"),
    ("compile-zero-dynamic-batch", aircc_cli, [*COMPILE, "--dynamic-batch", "0"], OPT,
     EXIT_USAGE, "--dynamic-batch"),
    ("compile-streams-0", aircc_cli, [*COMPILE, "--streams", "0"], CLI, EXIT_USAGE, "--streams"),
    ("compile-emit-bogus", aircc_cli, [*COMPILE, "--emit", "bogus"], CLI, EXIT_USAGE, "bogus"),
    ("compile-static-without-shapes", aircc_cli, [*COMPILE, "--mode", "static"], OPT,
     EXIT_USAGE, "--input-shape"),
    ("ops-unknown-target", aircc_cli, ["ops", "--target", "tpu"], OPT, EXIT_USAGE, "tpu"),
    # aircc: the model
    ("compile-garbage-onnx", aircc_cli, ["compile", "{garbage_onnx}", "-o", "{dir}/o.om"], IMPORT,
     EXIT_MODEL, "garbage.onnx"),
    ("compile-no-outputs", aircc_cli, ["compile", "{no_outputs_onnx}", "-o", "{dir}/o.om"], IMPORT,
     EXIT_MODEL, "no outputs"),
    ("compile-opset-99", aircc_cli, ["compile", "{opset99_onnx}", "-o", "{dir}/o.om"], IMPORT,
     EXIT_MODEL, f"opset 99 of the default domain is newer than aircc supports (1 to {NEWEST}"),
    ("compile-gather-out-of-range", aircc_cli, ["compile", "{gather_onnx}", "-o", "{dir}/o.om"],
     SHAPE, EXIT_MODEL, "node 'pick' (Gather): constant folding failed"),
    ("compile-input-shape-mismatch", aircc_cli, [*COMPILE, "--input-shape", "input:4,5"], SHAPE,
     EXIT_MODEL, "MatMul"),
    ("inspect-garbage-om", aircc_cli, ["inspect", "{garbage_om}"], FORMAT, EXIT_MODEL,
     "bad magic"),
    ("inspect-truncated-om", aircc_cli, ["inspect", "{truncated_om}"], FORMAT, EXIT_MODEL,
     "truncated"),
    # airrun: the command line
    ("airrun-no-arguments", airrun, [], CLI, EXIT_USAGE, "MODEL"),
    ("airrun-missing-model", airrun, ["{dir}/missing.om", "--random", "0"], CLI, EXIT_USAGE,
     "missing.om"),
    ("airrun-no-input", airrun, ["{om}"], CLI, EXIT_USAGE, "--input"),
    ("airrun-repeat-0", airrun, [*RUN, "--repeat", "0"], CLI, EXIT_USAGE, "--repeat"),
    ("airrun-runtime-cores-2", airrun, [*RUN, "--runtime-cores", "2"], CLI, EXIT_USAGE,
     "--runtime-cores"),
    ("airrun-device-memory-1X", airrun, [*RUN, "--device-memory", "1X"], CLI, EXIT_USAGE,
     "--device-memory: '1X' is not a size"),
    ("airrun-device-cpus-bad", airrun, [*RUN, "--device-cpus", "bad"], CLI, EXIT_USAGE,
     "--device-cpus"),
    ("airrun-output-folder-missing", airrun, [*RUN, "-o", "{dir}/no/y.npz"], CLI, EXIT_USAGE,
     "does not exist"),
    ("airrun-output-under-a-file", airrun, [*RUN, "-o", "{afile}/y.npz"], CLI, EXIT_USAGE,
     "not a folder"),
    ("airrun-output-is-a-folder", airrun, [*RUN, "-o", "{dir}"], CLI, EXIT_USAGE, "directory"),
    # airrun: the model
    ("airrun-garbage-om", airrun, ["{garbage_om}", "--random", "0"], FORMAT, EXIT_MODEL,
     "bad magic"),
    ("airrun-truncated-om", airrun, ["{truncated_om}", "--random", "0"], FORMAT, EXIT_MODEL,
     "truncated"),
    # airrun: the input data
    ("airrun-missing-npy", airrun, ["{om}", "--input", "{dir}/missing.npy"], INPUT, EXIT_INPUT,
     "missing.npy' does not exist"),
    ("airrun-corrupt-npy", airrun, ["{om}", "--input", "{corrupt_npy}"], INPUT, EXIT_INPUT,
     "corrupt.npy' cannot be loaded"),
    ("airrun-text-as-npy", airrun, ["{om}", "--input", "{text_npy}"], INPUT, EXIT_INPUT,
     "text.npy' is not a .npy or .npz file"),
    ("airrun-object-npy", airrun, ["{om}", "--input", "{object_npy}"], INPUT, EXIT_INPUT,
     "allow_pickle=False"),
    ("airrun-pickle-as-npy", airrun, ["{om}", "--input", "{pickle_npy}"], INPUT, EXIT_INPUT,
     "pickle.npy' is not a .npy or .npz file"),
    ("airrun-corrupt-npz", airrun, ["{om}", "--input", "{corrupt_npz}"], INPUT, EXIT_INPUT,
     "corrupt.npz' cannot be loaded"),
    ("airrun-npz-unknown-name", airrun, ["{om}", "--input", "{unknown_npz}"], INPUT, EXIT_INPUT,
     "unknown.npz' holds ['nope']"),
    ("airrun-unknown-input-name", airrun, ["{om}", "--input", "nope={x}"], INPUT, EXIT_INPUT,
     "no input 'nope'"),
    ("airrun-more-files-than-inputs", airrun, ["{om}", "--input", "{x}", "--input", "{x}"],
     INPUT, EXIT_INPUT, "more input files"),
    ("airrun-wrong-dtype", airrun, ["{om}", "--input", "{x64_npy}"], INPUT, EXIT_INPUT,
     "must be float32, got float64"),
    ("airrun-wrong-shape", airrun, ["{om}", "--input", "{x2_npy}"], INPUT, EXIT_INPUT,
     "must have shape [4, 784], got [2, 784]"),
    # airrun: the run
    ("airrun-device-too-small", airrun, [*RUN, "--device-memory", "1K"], OOM, EXIT_RUNTIME,
     "device out of memory"),
]


@pytest.mark.parametrize("tool,args,code,exit_code,words", [m[1:] for m in MISUSES],
                         ids=[m[0] for m in MISUSES])
def test_a_misuse_is_one_error_line_and_its_exit_code(files, tool, args, code, exit_code, words):
    r = CliRunner().invoke(tool, [a.format(**files) for a in args])
    check(r.exit_code, r.stderr, code, exit_code, words)


def test_no_work_is_done_and_nothing_is_written_for_an_unwritable_output(files, tmp_path):
    r = CliRunner().invoke(airrun, [files["om"], "--input", files["x"], "-o", f"{tmp_path}/no/y"])
    check(r.exit_code, r.stderr, CLI, EXIT_USAGE, "no/y.npz")
    assert r.stdout == ""                          # refused before the model ran
    r = CliRunner().invoke(aircc_cli, ["compile", files["onnx"], "-o", f"{tmp_path}/no/m.om"])
    assert r.exit_code == EXIT_USAGE and r.stdout == ""
    with pytest.raises(CommandLineError, match="cannot write --output"):
        write_atomically(str(tmp_path / "y.npz"), lambda f: (f.write(b"part"), open("/nonexistent/x")))
    with pytest.raises(ZeroDivisionError):
        write_atomically(str(tmp_path / "y.npz"), lambda f: (f.write(b"part"), 1 / 0))
    assert os.listdir(tmp_path) == []              # no partial file, no temporary left


def test_a_folder_no_file_can_be_made_in_is_refused_before_the_run(files, tmp_path):
    # /proc refuses new files even to root, whose permission bits say yes to anything
    r = CliRunner().invoke(airrun, [files["om"], "--random", "0", "-o", "/proc/y.npz"])
    check(r.exit_code, r.stderr, CLI, EXIT_USAGE, "folder '/proc' is not writable")
    assert r.stdout == ""                          # refused before the model ran
    r = CliRunner().invoke(aircc_cli, ["compile", files["onnx"], "-o", "/proc/m.om"])
    check(r.exit_code, r.stderr, CLI, EXIT_USAGE, "folder '/proc' is not writable")
    tmp_path.chmod(0o500)                          # and a read-only folder, for any user
    try:                                           # the bits do not stop
        r = CliRunner().invoke(airrun, [files["om"], "--random", "0", "-o", f"{tmp_path}/y.npz"])
        assert r.exit_code == (0 if os.geteuid() == 0 else EXIT_USAGE)
        assert os.path.exists(tmp_path / "y.npz") == (os.geteuid() == 0)
    finally:
        tmp_path.chmod(0o700)
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []   # no probe left


@pytest.mark.parametrize("name,value,words", [
    ("AIRCC_TARGET", "tpu", "AIRCC_TARGET='tpu' is not a target; known targets: native"),
    ("AIRCC_BLAS", "fast", "AIRCC_BLAS='fast': expected numpy or cblas"),
    ("AIRCC_VECTOR_CLASS", "sse", "AIRCC_VECTOR_CLASS='sse' is not a vector class; expected avx2"),
    ("AIR_DEVICE_CPUS", "x-1", "AIR_DEVICE_CPUS='x-1' is not a CPU list"),
])
def test_a_bad_environment_variable_is_a_usage_error_naming_it(files, monkeypatch, name, value,
                                                               words):
    monkeypatch.setenv(name, value)
    try:
        try:
            config.reload()
        except ConfigError as e:
            assert words in str(e)
        r = CliRunner().invoke(aircc_cli, ["compile", files["onnx"], "--emit", "report"])
        check(r.exit_code, r.stderr, CFG, EXIT_USAGE, words)
    finally:
        monkeypatch.undo()
        config.reload()


def entry_point(name: str) -> str:
    """The installed console script ``name`` (next to this Python, else on PATH)."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    found = here if os.path.exists(here) else shutil.which(name)
    if not found:
        pytest.skip(f"the {name} console script is not installed")
    return found


@pytest.mark.parametrize("tool,args,env,code,exit_code,words", [
    ("airrun", ["{om}", "--random", "0"], {"AIR_DEVICE_MEMORY": "lots"}, CFG, EXIT_USAGE,
     "AIR_DEVICE_MEMORY: 'lots' is not a size"),
    ("airrun", ["{om}", "--random", "0"], {"AIR_RUNTIME_CORE_NUMBER": "2"}, CFG, EXIT_USAGE,
     "AIR_RUNTIME_CORE_NUMBER='2': must be 1 (sequential) or 3 (pipelined)"),
    ("aircc", ["compile", "{onnx}", "-o", "{dir}/no/x.om"], {}, CLI, EXIT_USAGE,
     "does not exist"),
    ("airrun", ["{om}", "--random", "0", "--timeout", "0.3"],
     {"AIRCC_FAULTS": "hang@node=fc1,seconds=5"}, 507047, EXIT_RUNTIME,
     "the run passed its deadline of 0.3 s in stream 0, task 2 (kernel of node 'fc1', op MatMul)"),
    ("airrun", ["{om}", "--random", "0", "--recovery", "retries=0"],
     {"AIRCC_FAULTS": "kernel_error@node=fc2"}, 507015, EXIT_RUNTIME,
     "injected kernel error in node 'fc2'"),
    ("airrun", ["{om}", "--random", "0"], {"AIRCC_FAULTS": "melt@node=fc1"}, CFG, EXIT_USAGE,
     "unknown fault kind 'melt'"),
    ("airrun", ["{om}", "--random", "0", "--recovery", "retries=-1"], {}, CFG, EXIT_USAGE,
     "retries must be an int >= 0"),
], ids=["AIR_DEVICE_MEMORY", "AIR_RUNTIME_CORE_NUMBER", "compile-output-folder-missing",
        "hung-kernel-timeout", "injected-kernel-error", "AIRCC_FAULTS", "recovery-policy"])
def test_the_installed_commands_print_one_line_on_stderr(files, tool, args, env, code, exit_code,
                                                         words):
    p = subprocess.run([entry_point(tool), *(a.format(**files) for a in args)],
                       env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    check(p.returncode, p.stderr, code, exit_code, words)
    assert p.stdout == ""


def test_a_bug_is_one_line_and_exit_70(monkeypatch):
    def broken(backend):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("aircc.ops.catalog.op_table", broken)
    r = CliRunner().invoke(aircc_cli, ["ops"])
    assert r.exit_code == EXIT_INTERNAL == 70
    assert r.stderr == "error: internal error: RuntimeError: boom | second line (please report)\n"


def test_help_and_version_still_work_and_list_the_exit_codes():
    for tool, args in ((aircc_cli, ["--help"]), (aircc_cli, ["compile", "--help"]),
                       (airrun, ["--help"])):
        r = CliRunner().invoke(tool, args)
        assert r.exit_code == 0 and r.stdout.startswith("Usage:") and r.stderr == ""
    assert "Exit codes" in CliRunner().invoke(airrun, ["--help"]).stdout
    r = CliRunner().invoke(aircc_cli, ["--version"])
    assert r.exit_code == 0 and "version" in r.stdout
    assert (EXIT_USAGE, EXIT_MODEL, EXIT_INPUT, EXIT_RUNTIME, EXIT_INTERNAL) == (2, 3, 4, 5, 70)
