"""Pass tests written as IR text: parse a BEFORE text, run one registered pass, verify the
result and print it, so that a test compares the whole rewritten graph with its AFTER text.

Texts may be written as indented triple-quoted strings: :func:`ir` strips the common
indentation and the blank lines around them.
"""
from __future__ import annotations

import hashlib
import textwrap

import numpy as np

import aircc.compiler.driver  # noqa: F401  (registers every pass)
from aircc.compiler.context import CompileContext, CompileOptions
from aircc.compiler.ir.graph import Graph
from aircc.compiler.ir.parser import parse_graph
from aircc.compiler.ir.printer import print_graph
from aircc.compiler.ir.verifier import verify
from aircc.compiler.passes.base import PASSES
from graphs import run_ir


def ir(text: str) -> str:
    """``text`` without its common indentation and without leading or trailing blank lines."""
    return textwrap.dedent(text).strip("\n")


def digest(array: np.ndarray) -> str:
    """How the text form shows a constant of more than 8 elements: a digest of its bytes."""
    return f"dense<sha1:{hashlib.sha1(np.ascontiguousarray(array).tobytes()).hexdigest()[:12]}>"


def parse(text: str, resources: dict[str, np.ndarray] | None = None) -> Graph:
    """The graph of an (indented) IR text; it must print back to the same text."""
    text = ir(text)
    graph = parse_graph(text, resources)
    assert print_graph(graph) == text, "the text is not in printed form"
    return graph


def run_pass_graph(name: str, before_text: str, resources: dict[str, np.ndarray] | None = None,
                   **options) -> tuple[Graph, CompileContext]:
    """Run pass ``name`` on the graph of ``before_text`` with ``CompileOptions(**options)``;
    the verified result, and the context (its ``stats``)."""
    graph = parse(before_text, resources)
    ctx = CompileContext(CompileOptions(**options))
    result = PASSES[name].run(graph, ctx)
    verify(result)
    return result, ctx


def run_pass(name: str, before_text: str, resources: dict[str, np.ndarray] | None = None,
             **options) -> tuple[str, CompileContext]:
    """:func:`run_pass_graph`, giving the result as text."""
    result, ctx = run_pass_graph(name, before_text, resources, **options)
    return print_graph(result), ctx


def declared(ctx: CompileContext, name: str) -> dict[str, int]:
    """The statistics pass ``name`` declares, as it counted them (a pass that runs another
    inside, as fuse-attention and sink-expand run dce, also counts that one's)."""
    return {k: ctx.stats[k] for k in PASSES[name].stats}


def same_numbers(before_text: str, after: Graph | str, resources: dict[str, np.ndarray] | None = None,
                 after_resources: dict[str, np.ndarray] | None = None, dims: dict | None = None,
                 seed: int = 0, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """``run_ir`` gives the same outputs for the BEFORE graph and the AFTER graph (a graph,
    or a text with its resources) on random float inputs; ``dims`` gives the symbolic
    dims of the inputs a size."""
    g0 = parse(before_text, resources)
    g1 = after if isinstance(after, Graph) else parse(after, after_resources)
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in g0.inputs:
        shape = [(dims or {}).get(d, d) for d in g0.types[name].shape]
        assert all(isinstance(d, int) for d in shape), f"input {name} needs sizes for {shape}"
        feeds[name] = rng.standard_normal(shape).astype(g0.types[name].dtype)
    want, got = run_ir(g0, dict(feeds)), run_ir(g1, dict(feeds))
    assert list(want) == list(got)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)
