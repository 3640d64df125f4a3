"""GEMM that accumulates: ``c = alpha * a @ b + beta * c``, on numpy's own BLAS.

``numpy.matmul`` always overwrites its output, so a kernel that wants to add
a product into an existing result (a convolution summed over kernel taps, a
bias or a residual written first) would need a temporary and an extra pass
over memory.  BLAS's GEMM has the ``beta`` term for exactly this, and reads
operands with any leading dimension, so a row-strided view (one kernel tap's
run of a padded image) goes in without a copy.

numpy links a CBLAS (OpenBLAS in the PyPI wheels).  Its ``cblas_?gemm`` is
looked up through numpy's own extension module, so it is the same library,
the same build and the same thread pool numpy's matmul uses.  When it cannot
be found (another numpy build) or ``AIRCC_BLAS=numpy`` is set, :func:`gemm`
computes the same result with numpy; :data:`NATIVE` says which one runs.
"""
from __future__ import annotations

import ctypes

import numpy as np

from aircc.config import settings

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
#: Symbol names of cblas_sgemm / cblas_dgemm in the BLAS builds numpy ships with,
#: with the width of their integer arguments.
_SYMBOLS = (("scipy_cblas_{}gemm64_", ctypes.c_int64), ("cblas_{}gemm64_", ctypes.c_int64),
            ("scipy_cblas_{}gemm", ctypes.c_int), ("cblas_{}gemm", ctypes.c_int))


def numpy_blas_handle():
    """numpy's extension module as a library handle: its BLAS's symbols resolve through it."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    return ctypes.CDLL(umath.__file__)


def _bind(handle, letter: str, real):
    for pattern, int_t in _SYMBOLS:
        try:
            fn = getattr(handle, pattern.format(letter))
        except AttributeError:
            continue
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t, real,
                       ctypes.c_void_p, int_t, ctypes.c_void_p, int_t, real, ctypes.c_void_p, int_t]
        return fn
    return None


def _find() -> dict:
    if settings().blas == "numpy":
        return {}
    try:
        handle = numpy_blas_handle()
    except (OSError, ImportError):
        return {}
    found = {}
    for dtype, letter, real in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double)):
        fn = _bind(handle, letter, real)
        if fn is not None and _works(fn, dtype):
            found[np.dtype(dtype)] = fn
    return found


def _works(fn, dtype) -> bool:
    """One small product with a strided operand and beta, checked against numpy."""
    a = np.arange(6, dtype=dtype).reshape(2, 3)
    b = np.arange(12, dtype=dtype).reshape(3, 4)[:, :2]
    c = np.ones((2, 2), dtype=dtype)
    fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, 2, 2, 3, 2.0, a.ctypes.data, 3, b.ctypes.data, 4,
       1.0, c.ctypes.data, 2)
    return bool(np.array_equal(c, 2 * (a @ b) + 1))


_GEMM = _find()


def _operand(x: np.ndarray):
    """(transposed?, leading dimension) of a 2-D BLAS operand, or None if it needs a copy."""
    item = x.itemsize
    s0, s1 = x.strides
    rows, cols = x.shape
    if s1 == item and s0 % item == 0 and s0 // item >= max(cols, 1):
        return _NO_TRANS, s0 // item
    if s0 == item and s1 % item == 0 and s1 // item >= max(rows, 1):
        return _TRANS, s1 // item
    return None


def _native(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float) -> bool:
    fn = _GEMM.get(c.dtype)
    if fn is None or a.dtype != c.dtype or b.dtype != c.dtype or c.ndim != 2 or not c.size:
        return False
    if not c.flags.writeable or c.strides[1] != c.itemsize or c.strides[0] % c.itemsize \
            or c.strides[0] // c.itemsize < c.shape[1]:
        return False
    pa, pb = _operand(a), _operand(b)
    if pa is None or pb is None:
        return False
    m, k = a.shape
    n = b.shape[1]
    if k == 0:
        return False
    fn(_ROW_MAJOR, pa[0], pb[0], m, n, k, alpha, a.ctypes.data, pa[1], b.ctypes.data, pb[1],
       beta, c.ctypes.data, c.strides[0] // c.itemsize)
    return True


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, alpha: float = 1.0, beta: float = 0.0) -> None:
    """``c[...] = alpha * a @ b + beta * c`` for 2-D ``a`` (M, K), ``b`` (K, N), ``c`` (M, N).

    Operands may be row-strided or transposed views; ``c`` must not overlap them.
    """
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2 or a.shape[1] != b.shape[0] \
            or c.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"gemm: shapes {a.shape} @ {b.shape} -> {c.shape} do not match")
    if _native(a, b, c, alpha, beta):
        return
    if beta == 0.0:
        np.matmul(a, b, out=c)
        if alpha != 1.0:
            np.multiply(c, c.dtype.type(alpha), out=c)
        return
    product = np.matmul(a, b)
    if alpha != 1.0:
        np.multiply(product, product.dtype.type(alpha), out=product)
    if beta != 1.0:
        np.multiply(c, c.dtype.type(beta), out=c)
    np.add(c, product, out=c)


NATIVE = bool(_GEMM)
"""True when :func:`gemm` calls numpy's CBLAS, False when it computes with numpy."""

#: OpenBLAS kernel sets that run 512-bit vectors (OpenBLAS picks one per CPU when it
#: loads, unless ``OPENBLAS_CORETYPE`` names one).
AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


def core_name() -> str:
    """The kernel set numpy's OpenBLAS runs, e.g. "Haswell" (AVX2) or "SkylakeX"
    (AVX-512); "unknown" for another BLAS."""
    try:
        handle = numpy_blas_handle()
    except (OSError, ImportError):
        return "unknown"
    for sym in ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"):
        fn = getattr(handle, sym, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            return fn().decode()
    return "unknown"


def vector_class(core: str) -> str:
    """"avx512" for an OpenBLAS kernel set of 512-bit vectors, else "avx2"."""
    return "avx512" if core.lower() in AVX512_CORES else "avx2"
