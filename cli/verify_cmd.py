"""``aircc verify``: a model compiled by aircc against onnxruntime (or onnx's
ReferenceEvaluator), and the first node that diverges; ``aircc compile --verify``."""
from __future__ import annotations

import dataclasses
import json

import click

from aircc import log
from aircc.errors import CommandLineError

from .feeds import narrow_type_bits, read_inputs
from .paths import check_output_path, write_atomically
from .shapes import parse_input_shapes

#: Exit status of a verification that found a mismatch (errors keep their own codes).
EXIT_MISMATCH = 1


def concrete_shapes(shapes: dict[str, list], option: str = "--input-shape") -> dict[str, list[int]]:
    """``--input-shape`` for generated inputs: every dim a size."""
    for name, dims in shapes.items():
        if not all(isinstance(d, int) and d >= 0 for d in dims):
            raise CommandLineError(f"{option} {name}:{','.join(map(str, dims))}: give every dim "
                                   f"a size to generate the input with")
    return shapes


def report_verification(report, json_path: str | None) -> int:
    """Print ``report`` (a :class:`~aircc.verification.VerifyReport`), write its JSON to
    ``json_path`` if given; the exit status: 0 pass, 1 mismatch."""
    from aircc.verification import format_report

    click.echo(format_report(report))
    if json_path:
        text = json.dumps(report.to_dict(), indent=2)
        write_atomically(json_path, lambda f: f.write(text.encode() + b"\n"), "--json")
    return 0 if report.passed else EXIT_MISMATCH


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-i", "--input", "input_specs", multiple=True, metavar="[NAME=]FILE.npy|FILE.npz",
              help="Input data (repeatable), as airrun takes it: .npy files in input order, "
                   "NAME=FILE.npy, or an .npz by name. Inputs not given are generated.")
@click.option("--input-shape", "--input_shape", "input_shapes", multiple=True,
              metavar="NAME:D1,D2,...",
              help="The shape of a generated input (repeatable, or ';'-separated); default: "
                   "symbolic dims 1 when batch-like, else 8.")
@click.option("--mode", type=click.Choice(["static", "dynamic", "both"]), default="both",
              show_default=True, help="Which compile modes to verify.")
@click.option("--target", default=None, metavar="NAME",
              help="Compile target (default: $AIRCC_TARGET, else native).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the generated inputs.")
@click.option("--rtol", type=click.FloatRange(min=0), default=None,
              help="Relative tolerance of float outputs (default by dtype: float32 1e-3, "
                   "float16 1e-2, bfloat16 2e-2).")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help="Absolute tolerance of float outputs (default by dtype: float32 1e-4, "
                   "float16 1e-3, bfloat16 1e-2). Integers, bools, strings: exact.")
@click.option("--no-bisect", is_flag=True,
              help="On a mismatch, do not search for the first diverging node.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Also write the whole result as JSON to FILE.")
@click.option("--log", "log_level", type=click.Choice(["debug", "info", "warning", "error"]),
              default=None, help="Print aircc's log at this level on stderr (default $AIR_LOG).")
@log.levelled
def verify(model, input_specs, input_shapes, mode, target, seed, rtol, atol, no_bisect,
           json_path, log_level):
    """Compile MODEL (static and dynamic), run it and onnxruntime on the same inputs, compare
    every output; on a mismatch name the first node that diverges. Exit status 0: every
    output agrees, 1: a mismatch."""
    from aircc.compiler.frontend.onnx_import import load_onnx
    from aircc.verification import verify as run_verify
    from aircc.verification.inputs import model_inputs

    if json_path:
        check_output_path(json_path, "--json")
    proto = load_onnx(model)
    specs = model_inputs(proto)
    feeds = narrow_type_bits(read_inputs(input_specs, specs), specs) if input_specs else {}
    report = run_verify(proto, feeds, input_shapes=concrete_shapes(parse_input_shapes(input_shapes)),
                        modes=("static", "dynamic") if mode == "both" else (mode,),
                        target=target, rtol=rtol, atol=atol, bisect=not no_bisect, seed=seed)
    return report_verification(dataclasses.replace(report, model=model), json_path)


def verify_compiled(model: str, compiled, input_shapes: dict[str, list]) -> int:
    """``aircc compile --verify``: the model just compiled against the reference, on
    generated inputs (seed 0) shaped as the compile's ``--input-shape`` says."""
    from aircc.verification import verify as run_verify

    sized = {k: v for k, v in input_shapes.items() if all(isinstance(d, int) for d in v)}
    report = run_verify(model, compiled=compiled, input_shapes=sized)
    return report_verification(report, None)
