"""``aircc``: compile ONNX to .om, inspect an .om, list ops."""
from __future__ import annotations

import contextlib
import json
import sys

import click

from aircc import log
from aircc.errors import CommandLineError

from .errors import EXIT_CODES_HELP, OneLineErrorGroup
from .paths import check_output_path, write_atomically
from .shapes import parse_input_shapes


@contextlib.contextmanager
def compile_progress(show: bool):
    """A progress bar over the stages the compile runs (on stderr) when ``show``; yields the
    callback for :func:`~aircc.compiler.driver.compile_model` (None when not shown), which
    tells the bar its length as the compile knows it."""
    if not show:
        yield None
        return
    with click.progressbar(length=1, label="compiling", file=sys.stderr,
                           item_show_func=lambda s: s) as bar:
        def step(stage: str, planned: int) -> None:
            bar.length = planned
            bar.update(1, stage)
        yield step


def dump_json(model: str, json_path: str | None, input_shapes: tuple[str, ...],
              target: str | None) -> None:
    """ATC's ``--mode 1``: the model as JSON (an .om's summary, or an ONNX model's
    compiled summary) to ``json_path`` or stdout."""
    from aircc.compiler.driver import CompileOptions, compile_model
    from aircc.formats import load_om
    from aircc.formats.om import MAGIC
    from aircc.formats.summary import summarize

    with open(model, "rb") as f:
        is_om = f.read(len(MAGIC)) == MAGIC
    om = load_om(model) if is_om else compile_model(
        model, CompileOptions(input_shapes=parse_input_shapes(input_shapes), target=target)).om
    text = json.dumps(summarize(om), indent=2)
    if json_path:
        check_output_path(json_path)
        write_atomically(json_path, lambda f: f.write(text.encode() + b"\n"), "--json")
    else:
        click.echo(text)


def parse_stream_priorities(specs: tuple[str, ...]) -> dict[int, int]:
    """``("1=5", "2=-3")`` -> {1: 5, 2: -3}."""
    out: dict[int, int] = {}
    for spec in specs:
        stream, sep, prio = spec.partition("=")
        try:
            out[int(stream)] = int(prio)
        except ValueError:
            raise CommandLineError(f"--stream-priority: '{spec}' is not STREAM=P, e.g. 1=5") from None
        if not sep:
            raise CommandLineError(f"--stream-priority: '{spec}' is not STREAM=P, e.g. 1=5")
    return out


def read_mixlist(path: str | None) -> dict:
    """The ``--modify_mixlist`` file's JSON object ({} without one); CommandLineError for a
    file that cannot be read or is not JSON (the compile checks what it says)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise CommandLineError(f"--modify_mixlist: cannot read '{path}': {e.strerror or e}") from None
    except ValueError as e:
        raise CommandLineError(f"--modify_mixlist: '{path}' is not JSON: {e}") from None


@click.group(cls=OneLineErrorGroup, epilog=EXIT_CODES_HELP)
@click.version_option(package_name="aircc")
def main():
    """aircc: an ONNX graph compiler for a virtual NPU."""


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Where to write the .om.")
@click.option("--streams", type=click.IntRange(min=1), default=None,
              help="Cap on the number of streams (1 = a single stream).")
@click.option("--min-branch-bytes", type=click.IntRange(min=0), default=None, metavar="BYTES",
              help="A parallel branch gets its own stream only if it writes at least this "
                   "many bytes (default 131072; 0 = every branch).")
@click.option("--split-matrix-branches", is_flag=True, default=False,
              help="Let branches led by a Conv or MatMul open streams of their own too, and "
                   "any branch on a backend whose kernels span every core (oneDNN); by "
                   "default they stay with a predecessor, where they would only queue for "
                   "the cores.")
@click.option("--input-shape", "--input_shape", "input_shapes", multiple=True,
              metavar="NAME:D1,D2,...",
              help="Fix an input's shape (repeatable, or ';'-separated).")
@click.option("--mode", type=click.Choice(["static", "dynamic", "auto", "0", "1"]), default="auto",
              show_default=True,
              help="static: whole graph planned at compile time; dynamic: Host Kernel graph; "
                   "auto: dynamic when an input keeps a symbolic dim.  As ATC spells it: 0 "
                   "(auto) or 1 (no model: a JSON dump of the compiled model, or of an .om "
                   "MODEL, to --json FILE or stdout).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="--mode 1: where to write the JSON dump.")
@click.option("--dynamic-batch", "--dynamic_batch_size", "dynamic_batch", default=None,
              metavar="B1,B2,...",
              help="Gears: one static plan per batch size (e.g. 1,2,4,8), all in one .om.")
@click.option("--emit", type=click.Choice(["om", "ir", "report", "dot"]), default="om",
              show_default=True,
              help="om: write the model; ir: print the optimised IR; report: print the compile "
                   "report; dot: a Graphviz picture of the compiled graph (to -o FILE.dot, or "
                   "printed): one colour per stream, events dashed.")
@click.option("--target", default=None, metavar="NAME",
              help="Compile target: native (this machine), cpu-avx2 or cpu-avx512: the kernel "
                   "backend and the vector class the tilings are tuned for, recorded in the .om "
                   "(default: $AIRCC_TARGET, else native).")
@click.option("--layout", type=click.Choice(["auto", "nhwc", "nchw"]), default="auto",
              show_default=True,
              help="Activation layout of convolution regions: auto (as the target's kernel "
                   "backend wants), nhwc (channels-last wherever possible), nchw (as ONNX).")
@click.option("--winograd", type=click.Choice(["auto", "off", "2", "4"]), default=None,
              help="The oneDNN backend's Winograd convolutions: auto (where they pay), off, or "
                   "tile 2 or 4 wherever a conv qualifies (default: $AIRCC_WINOGRAD, else auto).")
@click.option("--precision_mode", "--precision-mode", "precision_mode",
              type=click.Choice(["must_keep_origin_dtype", "force_fp32", "allow_mix_precision_bf16",
                                 "force_bf16"]),
              default="must_keep_origin_dtype", show_default=True,
              help="The types the model computes in, as the offline compiler names them: "
                   "must_keep_origin_dtype (the graph's own), force_fp32 (float16 and "
                   "bfloat16 computed in float32; the inputs and outputs keep their types), "
                   "allow_mix_precision_bf16 (convolutions in bfloat16 as the mixlist allows) "
                   "or force_bf16. Recorded in the .om.")
@click.option("--modify_mixlist", "--modify-mixlist", "modify_mixlist", default=None,
              type=click.Path(dir_okay=False), metavar="FILE.json",
              help="Changes to the op lists of allow_mix_precision_bf16, in the offline "
                   "compiler's format: {\"black-list\": {\"to-add\": [\"Conv\"]}, ...}.")
@click.option("--stream-priority", "stream_priorities", multiple=True, metavar="STREAM=P",
              help="Give stream STREAM (an index, as the compile report counts them) priority "
                   "P in -7..7 (repeatable; higher is served first on shared compute units).")
@click.option("--log", "log_level", type=click.Choice(["debug", "info", "warning", "error"]),
              default=None, help="Print aircc's log at this level on stderr (default $AIR_LOG).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--verify", "then_verify", is_flag=True,
              help="After writing the .om, run it and onnxruntime on generated inputs and "
                   "compare (as `aircc verify` does, for the mode compiled); exit 1 on a "
                   "mismatch (the .om is still written).")
@log.levelled
def compile(model, output, streams, min_branch_bytes, split_matrix_branches, input_shapes, mode,
            json_path, dynamic_batch, emit, target, layout, winograd, precision_mode,
            modify_mixlist, stream_priorities, log_level, quiet, then_verify):
    """Compile an ONNX MODEL into an offline .om model."""
    from aircc.compiler.driver import CompileOptions, compile_model, emit_ir

    if mode in ("0", "1"):
        if mode == "1":
            return dump_json(model, json_path, input_shapes, target)
        mode = "auto"
    if json_path:
        raise CommandLineError("--json goes with --mode 1 (a JSON dump)")
    if then_verify and emit != "om":
        raise CommandLineError("--verify checks the .om written: it goes with -o (--emit om)")

    gears = None
    if dynamic_batch:
        try:
            gears = [int(b) for b in dynamic_batch.split(",") if b.strip()]
        except ValueError:
            raise CommandLineError(f"--dynamic-batch: '{dynamic_batch}' is not a list of batch "
                                   f"sizes (e.g. 1,2,4,8)") from None
    options = CompileOptions(streams=streams, input_shapes=parse_input_shapes(input_shapes),
                             mode=mode, dynamic_batch=gears, min_branch_bytes=min_branch_bytes,
                             split_matrix_branches=split_matrix_branches, target=target,
                             channels_last={"auto": None, "nhwc": True, "nchw": False}[layout],
                             stream_priorities=parse_stream_priorities(stream_priorities),
                             precision_mode=precision_mode,
                             modify_mixlist=read_mixlist(modify_mixlist),
                             **({"winograd": winograd} if winograd else {}))
    if emit == "om":
        if not output:
            raise CommandLineError("missing -o/--output (or use --emit ir, report or dot)")
        check_output_path(output)
    if emit == "dot" and output:
        check_output_path(output)
    if emit == "ir":
        click.echo(emit_ir(model, options))
        return
    with compile_progress(not quiet and sys.stdout.isatty()) as progress:
        compiled = compile_model(model, options, progress)
    if emit == "report":
        click.echo(json.dumps(compiled.om.sections["model"]["compile_report"], indent=2))
        return
    if emit == "dot":
        from aircc.formats.dot import to_dot

        _emit_text(to_dot(compiled.om.parsed()), output)
        return
    try:
        size = compiled.save(output)
    except OSError as e:
        raise CommandLineError(f"cannot write --output {output!r}: {e.strerror or e}") from None
    r = compiled.report
    if r.host is not None:
        memory = f"{r.host.host_kernels} host kernels, {r.host.host_ops} host-placed ops"
    else:
        memory = (f"arena {r.memory.arena_bytes} bytes (lower bound {r.memory.lower_bound_bytes}, "
                  f"no reuse {r.memory.no_reuse_bytes})")
        if r.gears:
            memory += f", gears {r.gears}"
    click.echo(f"compiled {model} -> {output} ({size} bytes, {r.mode} mode): {r.kernels} "
               f"kernels on {r.streams} stream(s), {r.events} events, {memory}, "
               f"{r.total_seconds:.2f} s")
    slow = r.fallback_nodes
    if slow:
        ops = sorted({n.op for n in slow})
        click.echo(f"fallback kernels (onnx reference implementation): {len(slow)} node(s), "
                   f"ops {', '.join(ops)}: "
                   f"{', '.join(n.node for n in slow[:8])}{', ...' if len(slow) > 8 else ''}")
    if then_verify:
        from .verify_cmd import verify_compiled

        return verify_compiled(model, compiled, options.input_shapes)


def _emit_text(text: str, output: str | None) -> None:
    """``text`` to the file ``output`` (written whole or not at all), else to stdout."""
    if output:
        write_atomically(output, lambda f: f.write(text.encode()))
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--dot", "as_dot", is_flag=True,
              help="Print a Graphviz picture of the compiled graph instead (render it with "
                   "`dot -Tsvg`): one colour per stream, events as dashed edges, fused, "
                   "host-placed and fallback nodes marked.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the summary (or the --dot picture) to this file instead of stdout.")
def inspect(model, as_json, as_dot, output):
    """Summarise an .om model: mode, target, streams, events, tasks, gears, kernels (their
    backends, fusions, fallbacks), layouts and memory plan."""
    from aircc.formats import load_om
    from aircc.formats.dot import to_dot
    from aircc.formats.summary import format_summary, summarize
    from aircc.ops.catalog import kernel_sources

    if as_json and as_dot:
        raise CommandLineError("--json and --dot: give one of them")
    if output:
        check_output_path(output)
    om = load_om(model)
    if as_dot:
        _emit_text(to_dot(om.parsed()), output)
        return
    summary = summarize(om, kernel_sources(om.parsed().model.target.backend))
    _emit_text((json.dumps(summary, indent=2) if as_json else format_summary(summary)) + "\n",
               output)


@main.command()
@click.option("--target", default=None, metavar="NAME",
              help="Whose kernel backend says native or fallback (default: $AIRCC_TARGET or native).")
@click.option("--domain", default=None, metavar="DOMAIN",
              help="Only the ops of this domain (ai.onnx, ai.onnx.ml, com.microsoft, ...).")
def ops(target, domain):
    """List every supported op with its opset range and how it runs: native (a kernel of the
    target's backend), control (an op with bodies) or fallback (onnx's reference
    implementation, run in the device path)."""
    from aircc.ops import kernel_backend, resolve_target
    from aircc.ops.catalog import op_table

    rows = [r for r in op_table(kernel_backend(resolve_target(target).backend))
            if domain is None or (r.domain or "ai.onnx") == domain]
    if not rows:
        raise CommandLineError(f"--domain {domain}: aircc runs no op of that domain (domains: "
                               f"ai.onnx, ai.onnx.ml, ai.onnx.preview.training, com.microsoft)")
    width = max(len(r.domain or "ai.onnx") for r in rows), max(len(r.op) for r in rows)
    for row in rows:
        click.echo(f"{(row.domain or 'ai.onnx'):<{width[0]}}  {row.op:<{width[1]}}  "
                   f"opset {row.span():<8} {row.kind}")


from .verify_cmd import verify  # noqa: E402  (the command, registered in the group)

main.add_command(verify)
