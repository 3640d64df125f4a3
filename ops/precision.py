"""Reduced-precision compute: which ops run in bfloat16 under ``--precision_mode``, how a
node says so, and what the CPU needs for it.

A node the ``mix-precision`` pass marks carries :data:`COMPUTE_DTYPE` ``"bfloat16"``: its
kernel reads its activation and its weights in bfloat16 (the weights converted once,
when the task is bound; the activation as the kernel starts) and accumulates and writes
float32, its fused epilogue in float32.  The graph's types do not change.
"""
from __future__ import annotations

#: The node attribute naming the type a kernel computes in (absent: its operands' own).
COMPUTE_DTYPE = "compute_dtype"
#: The type a bfloat16 kernel writes (absent: float32): ``bfloat16`` where every reader of
#: its output is a bfloat16 kernel too (a chain, with no conversion between them).
OUTPUT_DTYPE = "output_dtype"
#: The types a bfloat16 kernel reads its activation in and writes its output in.
BF16_IO = ("float32", "bfloat16")

#: Ops with a bfloat16 kernel (on the oneDNN backend), when their weights are constants:
#: the offline compiler's white list, and all ``--modify_mixlist`` may add to it.
BF16_OPS = ("Conv", "MatMul", "Gemm")

#: /proc/cpuinfo flags of which a CPU needs one for bfloat16 kernels, by their ISA's name.
BF16_ISA = {"avx512_bf16": "AVX512-BF16", "amx_bf16": "AMX-BF16"}
