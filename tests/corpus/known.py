"""The corpus's known failures: (model, mode) -> the root cause, as docs/corpus.md groups
them.  Their cases are strict xfails: one that starts to pass fails the run, so that its
line here is removed."""
from __future__ import annotations

#: QuantizeLinear of NaN to int8 gives 0 where onnxruntime gives -128 (the low bound); the
#: model is onnxruntime's default quantize_static of BERT, whose attention scores' QDQ pairs
#: got an infinite scale from the mask's float32 minimum, so NaNs reach the softmax's QDQ.
QUANTIZE_NAN = ("quantize-nan: QuantizeLinear(NaN) to int8 is 0 in aircc, -128 (the low bound) in "
                "onnxruntime; onnxruntime's quantizer gave this BERT's masked scores an infinite scale")

KNOWN: dict[tuple[str, str], str] = {}
