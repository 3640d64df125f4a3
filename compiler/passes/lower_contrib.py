"""Pass ``lower-contrib``: onnxruntime's contrib ops as the ops aircc already runs fast.

onnxruntime's transformer optimizer fuses what aircc's own passes would fuse too, into
ops of its domain ``com.microsoft`` that would otherwise run on their numpy kernels.
This pass takes those that are compositions of ops aircc has apart again, so that the
later fusions see ordinary ops and the target's kernels (oneDNN's) run them:

- FusedMatMul -> Transpose (``transA`` / ``transBatchA``, B alike), MatMul, Mul
  (``alpha``): ``fuse-matmul-transpose`` and the scale passes take them back in;
- FusedGemm -> Gemm and its activation; GemmFastGelu -> MatMul, Add, Gelu (tanh);
- FusedConv -> Conv, Add (Z), its activation (``fuse-epilogues`` makes them one Conv);
  NhwcConv -> Transpose, Conv, Transpose (channels-last weights permuted, then folded);
- Gelu, BiasGelu, FastGelu -> [Add,] Gelu (exact, or tanh); QuickGelu -> Mul, Sigmoid,
  Mul; BiasAdd -> Add, Add;
- SkipLayerNormalization -> Add (bias), Add (skip), LayerNormalization (the residual Add
  ``fuse-add-layernorm`` takes in); SkipSimplifiedLayerNormalization likewise with
  SimplifiedLayerNormalization; LayerNormalization of opsets before 17 (onnxruntime's)
  -> opset 17's;
- Attention with constant weights (no past, present or rotary; Q, K and V as wide) ->
  ``aircc.AttentionMask`` (its mask_index forms as an additive mask, made once for the
  layers that share the mask and the input's type; plus the attention_bias) and
  ``aircc.Attention`` with the scale (and log2 e: ``base2``) in Q's weights, then a
  Reshape to [B, S, H D].

A node whose use does not fit its rule (an unknown rank, weights known only at run
time, an output the rewrite does not make) stays, on its own kernel.  Counted as
``lowered_contrib_ops``.  Runs right after the first ``infer-shapes``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from aircc.errors import AirccError
from aircc.formats.kinds import Impl
from aircc.ops.defs.contrib_common import MS_DOMAIN
from aircc.ops.defs.contrib_matmul import fused_matmul_perms

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .infer_shapes import infer_node

#: The default domain's opset the rewritten nodes are looked up at (Gelu's is 20).
OPSET = 17
GELU_OPSET = 20
LAYERNORM_OPSET = 17


class _Rewrite:
    """The nodes replacing one contrib node: fresh values, typed as they are made."""

    def __init__(self, graph: Graph, node: Node, taken: set[str], made: dict):
        self.graph, self.node, self.nodes, self.taken = graph, node, [], taken
        self.types_before: dict[str, Optional[TensorType]] = {}
        self.made = made
        """Values earlier rewrites made that a later one may read (a mask), by what they are."""
        self.making: dict = {}
        """This rewrite's, added to ``made`` when it succeeds."""

    def fresh(self, hint: str) -> str:
        """A value or node name not used in the graph yet (``taken`` holds every one)."""
        base = f"{self.node.name}/{hint}"
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def _type(self, name: str, t: TensorType) -> None:
        self.types_before.setdefault(name, self.graph.types.get(name))
        self.graph.types[name] = t

    def undo(self) -> None:
        """Take back every constant and type this rewrite added."""
        for name, t in self.types_before.items():
            self.graph.constants.pop(name, None)
            if t is None:
                self.graph.types.pop(name, None)
            else:
                self.graph.types[name] = t

    def const(self, array: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self._type(name, TensorType.of(array))
        self.graph.constants[name] = array
        return name

    def scalar(self, value: float, like: str, hint: str) -> str:
        return self.const(np.array(value, self.graph.types[like].dtype), hint)

    def op(self, op: str, inputs: list[str], attrs: Optional[dict] = None, out: Optional[list[str]] = None,
           domain: str = "", version: int = OPSET) -> str:
        """Add a node (outputs ``out``, else one fresh value), typed; its first output."""
        outs = out or [self.fresh(op.lower())]
        node = Node(op, list(inputs), outs, dict(attrs or {}), name=self.fresh(op), domain=domain,
                    version=version)
        for name, t in zip(outs, infer_node(self.graph, node)):
            if name:
                self._type(name, t)
        self.nodes.append(node)
        return outs[0]

    def rank(self, value: str) -> Optional[int]:
        t = self.graph.types.get(value)
        return None if t is None or t.shape is None else len(t.shape)


def _ins(node: Node, n: int) -> list[str]:
    return (list(node.inputs) + [""] * n)[:n]


def _activation(r: _Rewrite, x: str, op: str, params: list, out: str) -> None:
    """``out`` = op(x), one of FusedConv's / FusedGemm's activations, as default-domain ops."""
    if not op:
        r.op("Identity", [x], out=[out])
    elif op == "Clip":
        r.op("Clip", [x, r.scalar(params[0], x, "min"), r.scalar(params[1], x, "max")], out=[out])
    elif op == "LeakyRelu":
        r.op("LeakyRelu", [x], {"alpha": float(params[0])}, out=[out])
    elif op == "HardSigmoid":
        r.op("HardSigmoid", [x], {"alpha": float(params[0]), "beta": float(params[1])}, out=[out])
    else:
        r.op(op, [x], out=[out])


def _fused_matmul(r: _Rewrite) -> bool:
    a, b = r.node.inputs[:2]
    ra, rb = r.rank(a), r.rank(b)
    if ra is None or rb is None:
        return False
    pa, pb = fused_matmul_perms(r.node.attrs, (ra, rb))
    if pa:
        a = r.op("Transpose", [a], {"perm": pa})
    if pb:
        b = r.op("Transpose", [b], {"perm": pb})
    alpha = float(r.node.attrs.get("alpha", 1.0))
    y = r.node.outputs[0]
    if alpha == 1.0:
        r.op("MatMul", [a, b], out=[y])
    else:
        product = r.op("MatMul", [a, b])
        r.op("Mul", [product, r.scalar(alpha, product, "alpha")], out=[y])
    return True


def _fused_gemm(r: _Rewrite) -> bool:
    attrs = {k: v for k, v in r.node.attrs.items() if k in ("alpha", "beta", "transA", "transB")}
    op = r.node.attrs.get("activation", "")
    alpha, beta = r.node.attrs.get("activation_alpha"), r.node.attrs.get("activation_beta")
    params = {"LeakyRelu": [0.01 if alpha is None else alpha],
              "HardSigmoid": [0.2 if alpha is None else alpha, 0.5 if beta is None else beta]}
    _activation(r, r.op("Gemm", list(r.node.inputs), attrs), op, params.get(op, []), r.node.outputs[0])
    return True


def _gemm_fast_gelu(r: _Rewrite) -> bool:
    x, w, bias = _ins(r.node, 3)
    y = r.op("MatMul", [x, w])
    if bias:
        y = r.op("Add", [y, bias])
    r.op("Gelu", [y], {"approximate": "tanh"}, out=[r.node.outputs[0]], version=GELU_OPSET)
    return True


def _fused_conv(r: _Rewrite) -> bool:
    x, w, b, z = _ins(r.node, 4)
    attrs = {k: v for k, v in r.node.attrs.items() if k not in ("activation", "activation_params")}
    y = r.op("Conv", [x, w] + ([b] if b else []), attrs, version=11)
    if z:
        y = r.op("Add", [y, z])
    op = r.node.attrs.get("activation", "")
    _activation(r, y, op, list(r.node.attrs.get("activation_params") or []), r.node.outputs[0])
    return True


def _nhwc_conv(r: _Rewrite) -> bool:
    x, w, b = _ins(r.node, 3)
    rank = r.rank(x)
    if rank is None or r.rank(w) != rank:
        return False
    first = [0, rank - 1] + list(range(1, rank - 1))
    y = r.op("Conv", [r.op("Transpose", [x], {"perm": first}), r.op("Transpose", [w], {"perm": first})]
             + ([b] if b else []), dict(r.node.attrs), version=11)
    r.op("Transpose", [y], {"perm": [0] + list(range(2, rank)) + [1]}, out=[r.node.outputs[0]])
    return True


def _gelu(approximate: str, bias_input: Optional[int]) -> Callable[[_Rewrite], bool]:
    def rule(r: _Rewrite) -> bool:
        x = r.node.inputs[0]
        if bias_input is not None and bias_input < len(r.node.inputs) and r.node.inputs[bias_input]:
            x = r.op("Add", [x, r.node.inputs[bias_input]])
        r.op("Gelu", [x], {"approximate": approximate}, out=[r.node.outputs[0]], version=GELU_OPSET)
        return True
    return rule


def _quick_gelu(r: _Rewrite) -> bool:
    x = r.node.inputs[0]
    alpha = float(r.node.attrs.get("alpha", 1.702))
    scaled = x if alpha == 1.0 else r.op("Mul", [x, r.scalar(alpha, x, "alpha")])
    r.op("Mul", [x, r.op("Sigmoid", [scaled])], out=[r.node.outputs[0]])
    return True


def _bias_add(r: _Rewrite) -> bool:
    x, bias, skip = r.node.inputs[:3]
    r.op("Add", [r.op("Add", [x, bias]), skip], out=[r.node.outputs[0]])
    return True


def _skip_norm(rms: bool) -> Callable[[_Rewrite], bool]:
    """Skip(Simplified)LayerNormalization: (input + bias) + skip, then the normalisation."""
    def rule(r: _Rewrite) -> bool:
        used = [bool(o) for o in r.node.outputs] + [False] * 4
        if rms and used[1]:
            return False                       # the mean output (zeros) has no counterpart
        if rms:
            x, skip, gamma, bias = _ins(r.node, 4)
            beta = ""
        else:
            x, skip, gamma, beta, bias = _ins(r.node, 5)
        outs = (list(r.node.outputs) + [""] * 4)[:4]
        if bias:
            x = r.op("Add", [x, bias])
        s = r.op("Add", [x, skip], out=[outs[3]] if used[3] else None)
        eps = float(r.node.attrs.get("epsilon", 1e-12))
        if rms:
            norm_outs = [outs[0]] + ([outs[2]] if used[2] else [])
            r.op("SimplifiedLayerNormalization", [s, gamma], {"axis": -1, "epsilon": eps}, out=norm_outs,
                 version=1)
        else:
            norm_outs = outs[:3] if used[1] or used[2] else outs[:1]
            r.op("LayerNormalization", [s, gamma] + ([beta] if beta else []), {"axis": -1, "epsilon": eps},
                 out=norm_outs, version=LAYERNORM_OPSET)
        return True
    return rule


def _old_layernorm(r: _Rewrite) -> bool:
    if r.node.version >= LAYERNORM_OPSET:
        return False
    r.nodes.append(dataclasses.replace(r.node, version=LAYERNORM_OPSET, meta=dict(r.node.meta)))
    return True


def _attention(r: _Rewrite) -> bool:
    """Attention -> AttentionMask, aircc.Attention, Reshape (see the module doc)."""
    node, g = r.node, r.graph
    x, w, bias, mask, past, attn_bias, past_len = _ins(node, 7)
    w_arr = g.constants.get(w)
    b_arr = g.constants.get(bias) if bias else None
    t = g.types.get(x)
    if w_arr is None or (bias and b_arr is None) or past or past_len or any(node.outputs[1:]) \
            or t is None or t.dtype != "float32" or w_arr.dtype != np.float32 or r.rank(x) != 3 \
            or int(node.attrs.get("do_rotary", 0)) or int(node.attrs.get("past_present_share_buffer", 0)):
        return False
    sizes = node.attrs.get("qkv_hidden_sizes")
    if sizes and len(set(int(n) for n in sizes)) != 1:
        return False
    if mask and r.rank(mask) not in (1, 2, 3):
        return False
    heads = int(node.attrs["num_heads"])
    hd = w_arr.shape[1] // 3
    scale = float(node.attrs.get("scale", 0.0)) or 1.0 / float(np.sqrt(hd // heads))
    weights = w_arr.astype(np.float64)
    b64 = np.zeros(3 * hd) if b_arr is None else b_arr.astype(np.float64)
    factor = np.log2(np.e) * scale
    weights[:, :hd] *= factor
    b64[:hd] *= factor
    inputs = [x, r.const(weights.astype(np.float32), "qkv.weight"), r.const(b64.astype(np.float32), "qkv.bias")]
    additive = ""
    if mask or int(node.attrs.get("unidirectional", 0)):
        attrs = {k: node.attrs[k] for k in ("unidirectional", "mask_filter_value") if k in node.attrs}
        key = ("AttentionMask", mask, t, tuple(sorted(attrs.items())))     # one for every layer it serves
        additive = r.made.get(key) or r.op("AttentionMask", [mask, x], attrs, domain="aircc", version=1)
        r.making[key] = additive
    if attn_bias:
        additive = r.op("Add", [additive, attn_bias]) if additive else attn_bias
    context = r.op("Attention", inputs + ([additive] if additive else []), {"heads": heads, "base2": 1},
                   domain="aircc", version=1)
    r.op("Reshape", [context, r.const(np.array([0, 0, hd], np.int64), "shape")], out=[node.outputs[0]])
    return True


#: (domain, op) -> the rule that rewrites a node of it (False: the node stays).
RULES: dict[tuple[str, str], Callable[[_Rewrite], bool]] = {
    (MS_DOMAIN, "FusedMatMul"): _fused_matmul,
    (MS_DOMAIN, "FusedGemm"): _fused_gemm,
    (MS_DOMAIN, "GemmFastGelu"): _gemm_fast_gelu,
    (MS_DOMAIN, "FusedConv"): _fused_conv,
    (MS_DOMAIN, "NhwcConv"): _nhwc_conv,
    (MS_DOMAIN, "Gelu"): _gelu("none", None),
    (MS_DOMAIN, "BiasGelu"): _gelu("none", 1),
    (MS_DOMAIN, "FastGelu"): _gelu("tanh", 1),
    (MS_DOMAIN, "QuickGelu"): _quick_gelu,
    (MS_DOMAIN, "BiasAdd"): _bias_add,
    (MS_DOMAIN, "SkipLayerNormalization"): _skip_norm(rms=False),
    (MS_DOMAIN, "SkipSimplifiedLayerNormalization"): _skip_norm(rms=True),
    ("", "LayerNormalization"): _old_layernorm,
    (MS_DOMAIN, "Attention"): _attention,
}


@compile_pass("lower-contrib", stats=("lowered_contrib_ops",))
def lower_contrib(graph: Graph, ctx: CompileContext) -> Graph:
    out: list[Node] = []
    lowered = 0
    taken = set(graph.types) | set(graph.constants) | {n.name for n in graph.nodes}
    made: dict = {}
    for node in graph.nodes:
        rule = RULES.get((node.domain, node.op))
        if rule is None or node.impl is Impl.FALLBACK:
            out.append(node)
            continue
        r = _Rewrite(graph, node, taken, made)
        try:
            done = rule(r)
        except AirccError:          # a use the rewritten ops refuse: the node's own kernel runs it
            done = False
        if done:
            out.extend(r.nodes)
            made.update(r.making)
            lowered += 1
        else:
            r.undo()
            out.append(node)
    graph.nodes = out
    ctx.count("lowered_contrib_ops", lowered)
    return graph
