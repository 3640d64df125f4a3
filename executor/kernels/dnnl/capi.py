"""The C functions of oneDNN 3.2 the binding calls, with their ctypes prototypes.

Every opaque handle (engine, stream, memory descriptor, memory, primitive
descriptor, attributes, post-ops, primitive) is a ``c_void_p``; ``dnnl_dims_t``
arguments are ``DIMS`` arrays.  Prototypes follow include/oneapi/dnnl/dnnl.h and
dnnl_common.h of oneDNN 3.2.
"""
from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_float, c_int, c_int32, c_int64, c_size_t, c_uint, c_void_p

from .enums import MAX_NDIMS

DIMS = c_int64 * MAX_NDIMS
"""``dnnl_dims_t``."""

Handle = c_void_p
Out = POINTER(c_void_p)
"""Where a create function writes the new handle."""


class ExecArg(ctypes.Structure):
    """``dnnl_exec_arg_t``: an argument id and the memory bound to it."""

    _fields_ = [("arg", c_int), ("memory", c_void_p)]


class Version(ctypes.Structure):
    """``dnnl_version_t``."""

    _fields_ = [("major", c_int), ("minor", c_int), ("patch", c_int), ("hash", c_char_p),
                ("cpu_runtime", c_uint), ("gpu_runtime", c_uint)]



class S(c_int):
    """``dnnl_status_t``: marks the functions whose result is a status to check."""


E = c_int
"""Any other C enum."""

#: name -> (restype, argtypes); a restype of ``S`` is a status the caller checks.
PROTOTYPES: dict[str, tuple[object, list]] = {
    # engine, stream, library
    "dnnl_version": (POINTER(Version), []),
    "dnnl_engine_get_count": (c_size_t, [E]),
    "dnnl_engine_create": (S, [Out, E, c_size_t]),
    "dnnl_engine_destroy": (S, [Handle]),
    "dnnl_stream_create": (S, [Out, Handle, c_uint]),
    "dnnl_stream_wait": (S, [Handle]),
    "dnnl_stream_destroy": (S, [Handle]),
    "dnnl_get_effective_cpu_isa": (E, []),
    "dnnl_set_verbose": (S, [c_int]),
    "dnnl_get_primitive_cache_capacity": (S, [POINTER(c_int)]),
    "dnnl_set_primitive_cache_capacity": (S, [c_int]),
    # memory descriptors
    "dnnl_memory_desc_create_with_tag": (S, [Out, c_int, DIMS, E, E]),
    "dnnl_memory_desc_create_with_strides": (S, [Out, c_int, DIMS, E, DIMS]),
    "dnnl_memory_desc_create_submemory": (S, [Out, Handle, DIMS, DIMS]),
    "dnnl_memory_desc_reshape": (S, [Out, Handle, c_int, DIMS]),
    "dnnl_memory_desc_permute_axes": (S, [Out, Handle, POINTER(c_int)]),
    "dnnl_memory_desc_clone": (S, [Out, Handle]),
    "dnnl_memory_desc_destroy": (S, [Handle]),
    "dnnl_memory_desc_query": (S, [Handle, E, c_void_p]),
    "dnnl_memory_desc_equal": (c_int, [Handle, Handle]),
    "dnnl_memory_desc_get_size": (c_size_t, [Handle]),
    "dnnl_data_type_size": (c_size_t, [E]),
    # memory
    "dnnl_memory_create": (S, [Out, Handle, Handle, c_void_p]),
    "dnnl_memory_get_data_handle": (S, [Handle, Out]),
    "dnnl_memory_set_data_handle": (S, [Handle, c_void_p]),
    "dnnl_memory_destroy": (S, [Handle]),
    # attributes and post-ops
    "dnnl_primitive_attr_create": (S, [Out]),
    "dnnl_primitive_attr_destroy": (S, [Handle]),
    "dnnl_primitive_attr_set_scratchpad_mode": (S, [Handle, E]),
    "dnnl_primitive_attr_set_fpmath_mode": (S, [Handle, E]),
    "dnnl_primitive_attr_set_scales_mask": (S, [Handle, c_int, c_int]),
    "dnnl_primitive_attr_set_post_ops": (S, [Handle, Handle]),
    "dnnl_post_ops_create": (S, [Out]),
    "dnnl_post_ops_destroy": (S, [Handle]),
    "dnnl_post_ops_len": (c_int, [Handle]),
    "dnnl_post_ops_append_sum": (S, [Handle, c_float, c_int32, E]),
    "dnnl_post_ops_append_eltwise": (S, [Handle, E, c_float, c_float]),
    "dnnl_post_ops_append_binary": (S, [Handle, E, Handle]),
    # primitive descriptors and primitives
    "dnnl_primitive_desc_next_impl": (S, [Handle]),
    "dnnl_primitive_desc_clone": (S, [Out, Handle]),
    "dnnl_primitive_desc_destroy": (S, [Handle]),
    "dnnl_primitive_desc_query": (S, [Handle, E, c_int, c_void_p]),
    "dnnl_primitive_desc_query_md": (c_void_p, [Handle, E, c_int]),
    "dnnl_primitive_desc_query_s32": (c_int, [Handle, E, c_int]),
    "dnnl_primitive_create": (S, [Out, Handle]),
    "dnnl_primitive_execute": (S, [Handle, Handle, c_int, POINTER(ExecArg)]),
    "dnnl_primitive_destroy": (S, [Handle]),
    # primitive descriptor constructors
    "dnnl_reorder_primitive_desc_create": (S, [Out, Handle, Handle, Handle, Handle, Handle]),
    "dnnl_concat_primitive_desc_create": (S, [Out, Handle, Handle, c_int, c_int,
                                              POINTER(c_void_p), Handle]),
    "dnnl_sum_primitive_desc_create": (S, [Out, Handle, Handle, c_int, POINTER(c_float),
                                           POINTER(c_void_p), Handle]),
    "dnnl_binary_primitive_desc_create": (S, [Out, Handle, E, Handle, Handle, Handle, Handle]),
    "dnnl_convolution_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, Handle, Handle, DIMS, DIMS, DIMS, DIMS, Handle]),
    "dnnl_deconvolution_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, Handle, Handle, DIMS, DIMS, DIMS, DIMS, Handle]),
    "dnnl_eltwise_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, c_float, c_float, Handle]),
    "dnnl_softmax_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, c_int, Handle]),
    "dnnl_pooling_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, DIMS, DIMS, DIMS, DIMS, DIMS, Handle]),
    "dnnl_batch_normalization_forward_primitive_desc_create": (
        S, [Out, Handle, E, Handle, Handle, c_float, c_uint, Handle]),
    "dnnl_layer_normalization_forward_primitive_desc_create": (
        S, [Out, Handle, E, Handle, Handle, Handle, c_float, c_uint, Handle]),
    "dnnl_inner_product_forward_primitive_desc_create": (
        S, [Out, Handle, E, Handle, Handle, Handle, Handle, Handle]),
    "dnnl_matmul_primitive_desc_create": (S, [Out, Handle, Handle, Handle, Handle, Handle, Handle]),
    "dnnl_resampling_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, POINTER(c_float), Handle, Handle, Handle]),
    "dnnl_reduction_primitive_desc_create": (
        S, [Out, Handle, E, Handle, Handle, c_float, c_float, Handle]),
    # recurrent layers: engine, prop kind, (activation,) direction, then the descriptors
    # src_layer, src_iter(, src_iter_c), weights_layer, weights_iter(, weights_peephole,
    # weights_projection), bias, dst_layer, dst_iter(, dst_iter_c), then flags(, alpha,
    # beta), attr
    "dnnl_vanilla_rnn_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, E, Handle, Handle, Handle, Handle, Handle, Handle, Handle,
            c_uint, c_float, c_float, Handle]),
    "dnnl_lstm_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, Handle, Handle, Handle, Handle, Handle, Handle,
            Handle, Handle, Handle, c_uint, Handle]),
    "dnnl_gru_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, Handle, Handle, Handle, Handle, Handle, c_uint,
            Handle]),
    "dnnl_lbr_gru_forward_primitive_desc_create": (
        S, [Out, Handle, E, E, Handle, Handle, Handle, Handle, Handle, Handle, Handle, c_uint,
            Handle]),
}

#: Functions called on every execution: bound without the status check of the others
#: (the caller checks the returned status itself).
HOT = ("dnnl_primitive_execute", "dnnl_stream_wait", "dnnl_memory_set_data_handle")


def declare(lib: ctypes.CDLL, errcheck) -> dict[str, object]:
    """Set every prototype on ``lib`` (``errcheck`` on the status-returning ones) and
    return unchecked copies of the ``HOT`` functions."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = (c_int if restype is S else restype), argtypes
        if restype is S:
            fn.errcheck = errcheck
    hot = {}
    for name in HOT:
        hot[name] = ctypes.CFUNCTYPE(c_int, *PROTOTYPES[name][1])((name, lib))
    return hot
