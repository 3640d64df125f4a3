"""Feature preparation ops of ``ai.onnx.ml`` that skl2onnx writes: Imputer
(SimpleImputer, PowerTransformer), OneHotEncoder (OneHotEncoder, KBinsDiscretizer) and
FeatureVectorizer (a scaler, normalizer or imputer fed by several inputs).

Their outputs are typed from the input shapes and attributes alone, so models using them
compile in static mode.  The semantics are onnxruntime's; string inputs (cats_strings)
run on the fallback.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.types import TensorType

from .ml import FEATURE_TYPES, ML, feature_dims

FLOATS = ("float32", "float64")


def imputed_values(attrs: dict, dtype: str) -> tuple[list, float | int]:
    """(values put in, value replaced) an Imputer applies to an input of ``dtype``."""
    if dtype in FLOATS:
        return list(attrs.get("imputed_value_floats") or []), attrs.get("replaced_value_float", 0.0)
    return list(attrs.get("imputed_value_int64s") or []), attrs.get("replaced_value_int64", 0)


@define("Imputer", 1, ML)
def imputer(ctx: InferContext) -> list[TensorType]:
    """Y = X with every element equal to the replaced value (NaN matches NaN) set to the
    imputed value of its feature (one value: of every feature); floats for float inputs,
    int64s for integer ones."""
    x = ctx.input_type(0)
    _, c = feature_dims(ctx)
    floats, ints = ctx.attrs.get("imputed_value_floats"), ctx.attrs.get("imputed_value_int64s")
    if bool(floats) == bool(ints):
        ctx.fail("exactly one of imputed_value_floats and imputed_value_int64s must be given")
    values, _ = imputed_values(ctx.attrs, x.dtype)
    if not values:
        ctx.unsupported(f"imputed_value_{'floats' if floats else 'int64s'} for a {x.dtype} input")
    if isinstance(c, int) and len(values) not in (1, c):
        ctx.fail(f"{len(values)} imputed values for {c} features: give one, or one per feature")
    return [x]


@define("OneHotEncoder", 1, ML)
def one_hot_encoder(ctx: InferContext) -> list[TensorType]:
    """Y[..., k] = 1.0 where X (as int64, truncated) is the k-th of ``cats_int64s``, else 0;
    a value of no category is all zeros (an error with ``zeros`` 0)."""
    x = ctx.input_type(0)
    shape = ctx.input_shape(0)
    if x.dtype == "object" or not ctx.attrs.get("cats_int64s"):
        ctx.unsupported("string categories")
    if x.dtype not in FEATURE_TYPES:
        ctx.fail(f"input 0 must be float, double, int64 or int32, got {x.dtype}")
    if len(shape) > 2:
        ctx.fail(f"input 0 has rank {len(shape)}, at most 2 expected")
    return [TensorType("float32", (*shape, len(ctx.attrs["cats_int64s"])))]


@define("FeatureVectorizer", 1, ML)
def feature_vectorizer(ctx: InferContext) -> list[TensorType]:
    """Y[N, sum(inputdimensions)]: each input's rows ([C] is one row; more dims flattened)
    as float, cut or zero-padded to its ``inputdimensions`` entry, side by side."""
    dims = list(ctx.attrs.get("inputdimensions") or [])
    if len(dims) != ctx.num_inputs:
        ctx.fail(f"inputdimensions has {len(dims)} values for {ctx.num_inputs} inputs")
    for i in range(ctx.num_inputs):
        if ctx.input_type(i).dtype not in FEATURE_TYPES:
            ctx.fail(f"input {i} must be float, double, int64 or int32, got {ctx.input_type(i).dtype}")
    shape = ctx.input_shape(0)
    n = 1 if len(shape) == 1 else shape[0]
    return [TensorType("float32", (n, sum(int(d) for d in dims)))]
