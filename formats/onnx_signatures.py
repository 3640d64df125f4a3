"""onnx's operator signatures (written by tools/gen_onnx_signatures.py from onnx 1.23.2; do not edit).

``SIGNATURES[(domain, op)]``: one tuple of :class:`.node_signature.Signature`'s fields per
version of the op, oldest first; ``OPSETS``: the newest opset of each domain the table
covers (a newer one is read from the installed onnx)."""
ONNX_VERSION = '1.23.2'
OPSETS = {'ai.onnx.preview.training': 1, 'ai.onnx.ml': 5, '': 28}
SIGNATURES = {
    ('', 'Abs'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Acos'): [
        (7, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Acosh'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Add'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'consumed_inputs': 'ints', 'broadcast': 'int'}, ()),
        (6, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (14, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'AffineGrid'): [
        (20, 2, 2, (0, 1), None, 1, 1, {'align_corners': 'int'}, ()),
    ],
    ('', 'And'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'ArgMax'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axis': 'int'}, ()),
        (12, 1, 1, (0,), None, 1, 1, {'select_last_index': 'int', 'keepdims': 'int', 'axis': 'int'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'select_last_index': 'int', 'keepdims': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'ArgMin'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axis': 'int'}, ()),
        (12, 1, 1, (0,), None, 1, 1, {'select_last_index': 'int', 'keepdims': 'int', 'axis': 'int'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'select_last_index': 'int', 'keepdims': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'Asin'): [
        (7, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Asinh'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Atan'): [
        (7, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Atanh'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Attention'): [
        (23, 3, 6, (0, 1, 2), None, 1, 4, {'qk_matmul_output_mode': 'int', 'softcap': 'float', 'softmax_precision': 'int', 'kv_num_heads': 'int', 'q_num_heads': 'int', 'scale': 'float', 'is_causal': 'int'}, ()),
        (24, 3, 7, (0, 1, 2), None, 1, 4, {'qk_matmul_output_mode': 'int', 'softcap': 'float', 'softmax_precision': 'int', 'kv_num_heads': 'int', 'q_num_heads': 'int', 'scale': 'float', 'is_causal': 'int'}, ()),
        (25, 3, 7, (0, 1, 2), None, 1, 4, {'right_window_size': 'int', 'left_window_size': 'int', 'qk_matmul_output_mode': 'int', 'softcap': 'float', 'softmax_precision': 'int', 'kv_num_heads': 'int', 'q_num_heads': 'int', 'scale': 'float', 'is_causal': 'int'}, ()),
    ],
    ('', 'AveragePool'): [
        (1, 1, 1, (0,), None, 1, 1, {'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (7, 1, 1, (0,), None, 1, 1, {'count_include_pad': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (10, 1, 1, (0,), None, 1, 1, {'count_include_pad': 'int', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (11, 1, 1, (0,), None, 1, 1, {'count_include_pad': 'int', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (19, 1, 1, (0,), None, 1, 1, {'count_include_pad': 'int', 'dilations': 'ints', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (22, 1, 1, (0,), None, 1, 1, {'count_include_pad': 'int', 'dilations': 'ints', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
    ],
    ('', 'BatchNormalization'): [
        (1, 5, 5, (0, 1, 2, 3, 4), None, 1, 5, {'consumed_inputs': 'ints', 'momentum': 'float', 'epsilon': 'float', 'is_test': 'int', 'spatial': 'int'}, ('consumed_inputs',)),
        (6, 5, 5, (0, 1, 2, 3, 4), None, 1, 5, {'momentum': 'float', 'epsilon': 'float', 'is_test': 'int', 'spatial': 'int'}, ()),
        (7, 5, 5, (0, 1, 2, 3, 4), None, 1, 5, {'momentum': 'float', 'epsilon': 'float', 'spatial': 'int'}, ()),
        (9, 5, 5, (0, 1, 2, 3, 4), None, 1, 5, {'momentum': 'float', 'epsilon': 'float'}, ()),
        (14, 5, 5, (0, 1, 2, 3, 4), None, 1, 3, {'training_mode': 'int', 'momentum': 'float', 'epsilon': 'float'}, ()),
        (15, 5, 5, (0, 1, 2, 3, 4), None, 1, 3, {'training_mode': 'int', 'momentum': 'float', 'epsilon': 'float'}, ()),
    ],
    ('', 'Bernoulli'): [
        (15, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float'}, ()),
    ],
    ('', 'BitCast'): [
        (26, 1, 1, (0,), None, 1, 1, {'to': 'int'}, ('to',)),
    ],
    ('', 'BitShift'): [
        (11, 2, 2, (0, 1), None, 1, 1, {'direction': 'str'}, ('direction',)),
        (28, 2, 2, (0, 1), None, 1, 1, {'direction': 'str'}, ('direction',)),
    ],
    ('', 'BitwiseAnd'): [
        (18, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'BitwiseNot'): [
        (18, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'BitwiseOr'): [
        (18, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'BitwiseXor'): [
        (18, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'BlackmanWindow'): [
        (17, 1, 1, (0,), None, 1, 1, {'periodic': 'int', 'output_datatype': 'int'}, ()),
    ],
    ('', 'Cast'): [
        (1, 1, 1, (0,), None, 1, 1, {'to': 'str'}, ('to',)),
        (6, 1, 1, (0,), None, 1, 1, {'to': 'int'}, ('to',)),
        (9, 1, 1, (0,), None, 1, 1, {'to': 'int'}, ('to',)),
        (13, 1, 1, (0,), None, 1, 1, {'to': 'int'}, ('to',)),
        (19, 1, 1, (0,), None, 1, 1, {'saturate': 'int', 'to': 'int'}, ('to',)),
        (21, 1, 1, (0,), None, 1, 1, {'saturate': 'int', 'to': 'int'}, ('to',)),
        (23, 1, 1, (0,), None, 1, 1, {'saturate': 'int', 'to': 'int'}, ('to',)),
        (24, 1, 1, (0,), None, 1, 1, {'round_mode': 'str', 'saturate': 'int', 'to': 'int'}, ('to',)),
        (25, 1, 1, (0,), None, 1, 1, {'round_mode': 'str', 'saturate': 'int', 'to': 'int'}, ('to',)),
        (28, 1, 1, (0,), None, 1, 1, {'round_mode': 'str', 'saturate': 'int', 'to': 'int'}, ('to',)),
    ],
    ('', 'CastLike'): [
        (15, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (19, 2, 2, (0, 1), None, 1, 1, {'saturate': 'int'}, ()),
        (21, 2, 2, (0, 1), None, 1, 1, {'saturate': 'int'}, ()),
        (23, 2, 2, (0, 1), None, 1, 1, {'saturate': 'int'}, ()),
        (24, 2, 2, (0, 1), None, 1, 1, {'round_mode': 'str', 'saturate': 'int'}, ()),
        (25, 2, 2, (0, 1), None, 1, 1, {'round_mode': 'str', 'saturate': 'int'}, ()),
    ],
    ('', 'CausalConvWithState'): [
        (27, 2, 4, (0, 1), None, 2, 2, {'activation': 'str'}, ()),
    ],
    ('', 'Ceil'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Celu'): [
        (12, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
        (28, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
    ],
    ('', 'CenterCropPad'): [
        (18, 2, 2, (0, 1), None, 1, 1, {'axes': 'ints'}, ()),
    ],
    ('', 'Clip'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints', 'max': 'float', 'min': 'float'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {'max': 'float', 'min': 'float'}, ()),
        (11, 1, 3, (0,), None, 1, 1, {}, ()),
        (12, 1, 3, (0,), None, 1, 1, {}, ()),
        (13, 1, 3, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Col2Im'): [
        (18, 3, 3, (0, 1, 2), None, 1, 1, {'strides': 'ints', 'pads': 'ints', 'dilations': 'ints'}, ()),
    ],
    ('', 'Compress'): [
        (9, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (11, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (28, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'Concat'): [
        (1, 1, 2147483647, (), 0, 1, 1, {'axis': 'int'}, ()),
        (4, 1, 2147483647, (), 0, 1, 1, {'axis': 'int'}, ('axis',)),
        (11, 1, 2147483647, (), 0, 1, 1, {'axis': 'int'}, ('axis',)),
        (13, 1, 2147483647, (), 0, 1, 1, {'axis': 'int'}, ('axis',)),
    ],
    ('', 'ConcatFromSequence'): [
        (11, 1, 1, (0,), None, 1, 1, {'new_axis': 'int', 'axis': 'int'}, ('axis',)),
    ],
    ('', 'Constant'): [
        (1, 0, 0, (), None, 1, 1, {'value': 'tensor'}, ('value',)),
        (9, 0, 0, (), None, 1, 1, {'value': 'tensor'}, ('value',)),
        (11, 0, 0, (), None, 1, 1, {'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (12, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (13, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (19, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (21, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (23, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (24, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
        (25, 0, 0, (), None, 1, 1, {'value_strings': 'strs', 'value_string': 'str', 'value_floats': 'floats', 'value_float': 'float', 'value_ints': 'ints', 'value_int': 'int', 'sparse_value': 'plain', 'value': 'tensor'}, ()),
    ],
    ('', 'ConstantOfShape'): [
        (9, 1, 1, (0,), None, 1, 1, {'value': 'tensor'}, ()),
        (20, 1, 1, (0,), None, 1, 1, {'value': 'tensor'}, ()),
        (21, 1, 1, (0,), None, 1, 1, {'value': 'tensor'}, ()),
        (23, 1, 1, (0,), None, 1, 1, {'value': 'tensor'}, ()),
        (24, 1, 1, (0,), None, 1, 1, {'value': 'tensor'}, ()),
        (25, 1, 1, (0,), None, 1, 1, {'value': 'tensor'}, ()),
    ],
    ('', 'Conv'): [
        (1, 2, 3, (0, 1), None, 1, 1, {'group': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'dilations': 'ints', 'kernel_shape': 'ints'}, ()),
        (11, 2, 3, (0, 1), None, 1, 1, {'group': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'dilations': 'ints', 'kernel_shape': 'ints'}, ()),
        (22, 2, 3, (0, 1), None, 1, 1, {'group': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'dilations': 'ints', 'kernel_shape': 'ints'}, ()),
    ],
    ('', 'ConvInteger'): [
        (10, 2, 4, (0, 1), None, 1, 1, {'group': 'int', 'pads': 'ints', 'strides': 'ints', 'dilations': 'ints', 'kernel_shape': 'ints', 'auto_pad': 'str'}, ()),
    ],
    ('', 'ConvTranspose'): [
        (1, 2, 3, (0, 1), None, 1, 1, {'group': 'int', 'auto_pad': 'str', 'strides': 'ints', 'pads': 'ints', 'output_padding': 'ints', 'dilations': 'ints', 'output_shape': 'ints', 'kernel_shape': 'ints'}, ()),
        (11, 2, 3, (0, 1), None, 1, 1, {'group': 'int', 'auto_pad': 'str', 'strides': 'ints', 'pads': 'ints', 'output_padding': 'ints', 'dilations': 'ints', 'output_shape': 'ints', 'kernel_shape': 'ints'}, ()),
        (22, 2, 3, (0, 1), None, 1, 1, {'group': 'int', 'auto_pad': 'str', 'strides': 'ints', 'pads': 'ints', 'output_padding': 'ints', 'dilations': 'ints', 'output_shape': 'ints', 'kernel_shape': 'ints'}, ()),
    ],
    ('', 'Cos'): [
        (7, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Cosh'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'CumProd'): [
        (26, 2, 2, (0, 1), None, 1, 1, {'reverse': 'int', 'exclusive': 'int'}, ()),
    ],
    ('', 'CumSum'): [
        (11, 2, 2, (0, 1), None, 1, 1, {'reverse': 'int', 'exclusive': 'int'}, ()),
        (14, 2, 2, (0, 1), None, 1, 1, {'reverse': 'int', 'exclusive': 'int'}, ()),
    ],
    ('', 'DFT'): [
        (17, 1, 2, (0,), None, 1, 1, {'inverse': 'int', 'axis': 'int', 'onesided': 'int'}, ()),
        (20, 1, 3, (0,), None, 1, 1, {'inverse': 'int', 'onesided': 'int'}, ()),
    ],
    ('', 'DeformConv'): [
        (19, 3, 5, (0, 1, 2), None, 1, 1, {'strides': 'ints', 'pads': 'ints', 'offset_group': 'int', 'kernel_shape': 'ints', 'group': 'int', 'dilations': 'ints'}, ()),
        (22, 3, 5, (0, 1, 2), None, 1, 1, {'strides': 'ints', 'pads': 'ints', 'offset_group': 'int', 'kernel_shape': 'ints', 'group': 'int', 'dilations': 'ints'}, ()),
    ],
    ('', 'DepthToSpace'): [
        (1, 1, 1, (0,), None, 1, 1, {'blocksize': 'int'}, ('blocksize',)),
        (11, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'blocksize': 'int'}, ('blocksize',)),
        (13, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'blocksize': 'int'}, ('blocksize',)),
        (28, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'blocksize': 'int'}, ('blocksize',)),
    ],
    ('', 'DequantizeLinear'): [
        (10, 2, 3, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 3, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (19, 2, 3, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (21, 2, 3, (0, 1), None, 1, 1, {'block_size': 'int', 'axis': 'int'}, ()),
        (23, 2, 3, (0, 1), None, 1, 1, {'output_dtype': 'int', 'block_size': 'int', 'axis': 'int'}, ()),
        (24, 2, 3, (0, 1), None, 1, 1, {'output_dtype': 'int', 'block_size': 'int', 'axis': 'int'}, ()),
        (25, 2, 3, (0, 1), None, 1, 1, {'output_dtype': 'int', 'block_size': 'int', 'axis': 'int'}, ()),
        (28, 2, 3, (0, 1), None, 1, 1, {'output_dtype': 'int', 'block_size': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'Det'): [
        (11, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Div'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'consumed_inputs': 'ints', 'broadcast': 'int'}, ()),
        (6, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (14, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Dropout'): [
        (1, 1, 1, (0,), None, 1, 2, {'is_test': 'int', 'consumed_inputs': 'ints', 'ratio': 'float'}, ()),
        (6, 1, 1, (0,), None, 1, 2, {'is_test': 'int', 'ratio': 'float'}, ()),
        (7, 1, 1, (0,), None, 1, 2, {'ratio': 'float'}, ()),
        (10, 1, 1, (0,), None, 1, 2, {'ratio': 'float'}, ()),
        (12, 1, 3, (0,), None, 1, 2, {'seed': 'int'}, ()),
        (13, 1, 3, (0,), None, 1, 2, {'seed': 'int'}, ()),
        (22, 1, 3, (0,), None, 1, 2, {'seed': 'int'}, ()),
    ],
    ('', 'DynamicQuantizeLinear'): [
        (11, 1, 1, (0,), None, 3, 3, {}, ()),
    ],
    ('', 'Einsum'): [
        (12, 1, 2147483647, (), 0, 1, 1, {'equation': 'str'}, ('equation',)),
        (28, 1, 2147483647, (), 0, 1, 1, {'equation': 'str'}, ('equation',)),
    ],
    ('', 'Elu'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints', 'alpha': 'float'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
    ],
    ('', 'Equal'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (11, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (19, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Erf'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Exp'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Expand'): [
        (8, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'EyeLike'): [
        (9, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'k': 'int'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'k': 'int'}, ()),
    ],
    ('', 'Flatten'): [
        (1, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (9, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (21, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (23, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (24, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (25, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'Floor'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'GRU'): [
        (1, 3, 6, (0, 1, 2), None, 2, 2, {'clip': 'float', 'activation_beta': 'floats', 'output_sequence': 'int', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'activations': 'strs'}, ()),
        (3, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'output_sequence': 'int', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'linear_before_reset': 'int', 'activations': 'strs'}, ()),
        (7, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'linear_before_reset': 'int', 'activations': 'strs'}, ()),
        (14, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'layout': 'int', 'direction': 'str', 'linear_before_reset': 'int', 'activations': 'strs'}, ()),
        (22, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'layout': 'int', 'direction': 'str', 'linear_before_reset': 'int', 'activations': 'strs'}, ()),
    ],
    ('', 'Gather'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (11, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'GatherElements'): [
        (11, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'GatherND'): [
        (11, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (12, 2, 2, (0, 1), None, 1, 1, {'batch_dims': 'int'}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {'batch_dims': 'int'}, ()),
    ],
    ('', 'Gelu'): [
        (20, 1, 1, (0,), None, 1, 1, {'approximate': 'str'}, ()),
    ],
    ('', 'Gemm'): [
        (1, 3, 3, (0, 1, 2), None, 1, 1, {'beta': 'float', 'broadcast': 'int', 'transB': 'int', 'alpha': 'float', 'transA': 'int'}, ()),
        (6, 3, 3, (0, 1, 2), None, 1, 1, {'beta': 'float', 'broadcast': 'int', 'transB': 'int', 'alpha': 'float', 'transA': 'int'}, ()),
        (7, 3, 3, (0, 1, 2), None, 1, 1, {'beta': 'float', 'transB': 'int', 'alpha': 'float', 'transA': 'int'}, ()),
        (9, 3, 3, (0, 1, 2), None, 1, 1, {'beta': 'float', 'transB': 'int', 'alpha': 'float', 'transA': 'int'}, ()),
        (11, 2, 3, (0, 1), None, 1, 1, {'beta': 'float', 'transB': 'int', 'alpha': 'float', 'transA': 'int'}, ()),
        (13, 2, 3, (0, 1), None, 1, 1, {'beta': 'float', 'transB': 'int', 'alpha': 'float', 'transA': 'int'}, ()),
    ],
    ('', 'GlobalAveragePool'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'GlobalLpPool'): [
        (1, 1, 1, (0,), None, 1, 1, {'p': 'float'}, ()),
        (2, 1, 1, (0,), None, 1, 1, {'p': 'int'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'p': 'int'}, ()),
    ],
    ('', 'GlobalMaxPool'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Greater'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (9, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'GreaterOrEqual'): [
        (12, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (16, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'GridSample'): [
        (16, 2, 2, (0, 1), None, 1, 1, {'align_corners': 'int', 'padding_mode': 'str', 'mode': 'str'}, ()),
        (20, 2, 2, (0, 1), None, 1, 1, {'align_corners': 'int', 'padding_mode': 'str', 'mode': 'str'}, ()),
        (22, 2, 2, (0, 1), None, 1, 1, {'align_corners': 'int', 'padding_mode': 'str', 'mode': 'str'}, ()),
    ],
    ('', 'GroupNormalization'): [
        (18, 3, 3, (0, 1, 2), None, 1, 1, {'num_groups': 'int', 'epsilon': 'float'}, ('num_groups',)),
        (21, 3, 3, (0, 1, 2), None, 1, 1, {'stash_type': 'int', 'num_groups': 'int', 'epsilon': 'float'}, ('num_groups',)),
    ],
    ('', 'HammingWindow'): [
        (17, 1, 1, (0,), None, 1, 1, {'periodic': 'int', 'output_datatype': 'int'}, ()),
    ],
    ('', 'HannWindow'): [
        (17, 1, 1, (0,), None, 1, 1, {'periodic': 'int', 'output_datatype': 'int'}, ()),
    ],
    ('', 'HardSigmoid'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints', 'beta': 'float', 'alpha': 'float'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {'beta': 'float', 'alpha': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'beta': 'float', 'alpha': 'float'}, ()),
    ],
    ('', 'HardSwish'): [
        (14, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Hardmax'): [
        (1, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'Identity'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
        (14, 1, 1, (0,), None, 1, 1, {}, ()),
        (16, 1, 1, (0,), None, 1, 1, {}, ()),
        (19, 1, 1, (0,), None, 1, 1, {}, ()),
        (21, 1, 1, (0,), None, 1, 1, {}, ()),
        (23, 1, 1, (0,), None, 1, 1, {}, ()),
        (24, 1, 1, (0,), None, 1, 1, {}, ()),
        (25, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'If'): [
        (1, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (11, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (13, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (16, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (19, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (21, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (23, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (24, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
        (25, 1, 1, (0,), None, 1, 2147483647, {'else_branch': 'graph', 'then_branch': 'graph'}, ()),
    ],
    ('', 'ImageDecoder'): [
        (20, 1, 1, (0,), None, 1, 1, {'pixel_format': 'str'}, ()),
    ],
    ('', 'InstanceNormalization'): [
        (1, 3, 3, (0, 1, 2), None, 1, 1, {'epsilon': 'float', 'consumed_inputs': 'ints'}, ()),
        (6, 3, 3, (0, 1, 2), None, 1, 1, {'epsilon': 'float'}, ()),
        (22, 3, 3, (0, 1, 2), None, 1, 1, {'epsilon': 'float'}, ()),
    ],
    ('', 'IsInf'): [
        (10, 1, 1, (0,), None, 1, 1, {'detect_negative': 'int', 'detect_positive': 'int'}, ()),
        (20, 1, 1, (0,), None, 1, 1, {'detect_negative': 'int', 'detect_positive': 'int'}, ()),
    ],
    ('', 'IsNaN'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
        (20, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'LRN'): [
        (1, 1, 1, (0,), None, 1, 1, {'bias': 'float', 'beta': 'float', 'alpha': 'float', 'size': 'int'}, ('size',)),
        (13, 1, 1, (0,), None, 1, 1, {'bias': 'float', 'beta': 'float', 'alpha': 'float', 'size': 'int'}, ('size',)),
    ],
    ('', 'LSTM'): [
        (1, 3, 8, (0, 1, 2), None, 0, 3, {'clip': 'float', 'activation_beta': 'floats', 'output_sequence': 'int', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'input_forget': 'int', 'activations': 'strs'}, ()),
        (7, 3, 8, (0, 1, 2), None, 0, 3, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'input_forget': 'int', 'activations': 'strs'}, ()),
        (14, 3, 8, (0, 1, 2), None, 0, 3, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'input_forget': 'int', 'layout': 'int', 'activations': 'strs'}, ()),
        (22, 3, 8, (0, 1, 2), None, 0, 3, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'input_forget': 'int', 'layout': 'int', 'activations': 'strs'}, ()),
    ],
    ('', 'LayerNormalization'): [
        (17, 2, 3, (0, 1), None, 1, 3, {'stash_type': 'int', 'epsilon': 'float', 'axis': 'int'}, ()),
    ],
    ('', 'LeakyRelu'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints', 'alpha': 'float'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
        (16, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
    ],
    ('', 'Less'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (9, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'LessOrEqual'): [
        (12, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (16, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'LinearAttention'): [
        (27, 3, 6, (0, 1, 2), None, 2, 2, {'chunk_size': 'int', 'kv_num_heads': 'int', 'q_num_heads': 'int', 'scale': 'float', 'update_rule': 'str'}, ('kv_num_heads', 'q_num_heads')),
    ],
    ('', 'Log'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'LogSoftmax'): [
        (1, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'Loop'): [
        (1, 3, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (11, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (13, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (16, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (19, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (21, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (23, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (24, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
        (25, 2, 2147483647, (), 2, 1, 2147483647, {'body': 'graph'}, ()),
    ],
    ('', 'LpNormalization'): [
        (1, 1, 1, (0,), None, 1, 1, {'p': 'int', 'axis': 'int'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'p': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'LpPool'): [
        (1, 1, 1, (0,), None, 1, 1, {'p': 'float', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ()),
        (2, 1, 1, (0,), None, 1, 1, {'p': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (11, 1, 1, (0,), None, 1, 1, {'p': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (18, 1, 1, (0,), None, 1, 1, {'p': 'int', 'pads': 'ints', 'auto_pad': 'str', 'ceil_mode': 'int', 'dilations': 'ints', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (22, 1, 1, (0,), None, 1, 1, {'p': 'int', 'pads': 'ints', 'auto_pad': 'str', 'ceil_mode': 'int', 'dilations': 'ints', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
    ],
    ('', 'MatMul'): [
        (1, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (9, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'MatMulInteger'): [
        (10, 2, 4, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Max'): [
        (1, 1, 2147483647, (), 0, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (8, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (12, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (13, 1, 2147483647, (), 0, 1, 1, {}, ()),
    ],
    ('', 'MaxPool'): [
        (1, 1, 1, (0,), None, 1, 1, {'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (8, 1, 1, (0,), None, 1, 2, {'storage_order': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (10, 1, 1, (0,), None, 1, 2, {'storage_order': 'int', 'dilations': 'ints', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (11, 1, 1, (0,), None, 1, 2, {'storage_order': 'int', 'dilations': 'ints', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (12, 1, 1, (0,), None, 1, 2, {'storage_order': 'int', 'dilations': 'ints', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (22, 1, 1, (0,), None, 1, 2, {'storage_order': 'int', 'dilations': 'ints', 'ceil_mode': 'int', 'pads': 'ints', 'auto_pad': 'str', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
    ],
    ('', 'MaxRoiPool'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'spatial_scale': 'float', 'pooled_shape': 'ints'}, ('pooled_shape',)),
        (22, 2, 2, (0, 1), None, 1, 1, {'spatial_scale': 'float', 'pooled_shape': 'ints'}, ('pooled_shape',)),
    ],
    ('', 'MaxUnpool'): [
        (9, 2, 3, (0, 1), None, 1, 1, {'pads': 'ints', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (11, 2, 3, (0, 1), None, 1, 1, {'pads': 'ints', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
        (22, 2, 3, (0, 1), None, 1, 1, {'pads': 'ints', 'strides': 'ints', 'kernel_shape': 'ints'}, ('kernel_shape',)),
    ],
    ('', 'Mean'): [
        (1, 1, 2147483647, (), 0, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (8, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (13, 1, 2147483647, (), 0, 1, 1, {}, ()),
    ],
    ('', 'MeanVarianceNormalization'): [
        (9, 1, 1, (0,), None, 1, 1, {'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints'}, ()),
    ],
    ('', 'MelWeightMatrix'): [
        (17, 5, 5, (0, 1, 2, 3, 4), None, 1, 1, {'output_datatype': 'int'}, ()),
    ],
    ('', 'Min'): [
        (1, 1, 2147483647, (), 0, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (8, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (12, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (13, 1, 2147483647, (), 0, 1, 1, {}, ()),
    ],
    ('', 'Mish'): [
        (18, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Mod'): [
        (10, 2, 2, (0, 1), None, 1, 1, {'fmod': 'int'}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {'fmod': 'int'}, ()),
        (28, 2, 2, (0, 1), None, 1, 1, {'fmod': 'int'}, ()),
    ],
    ('', 'Mul'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'consumed_inputs': 'ints', 'broadcast': 'int'}, ()),
        (6, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (14, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Multinomial'): [
        (7, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float', 'sample_size': 'int'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float', 'sample_size': 'int'}, ()),
    ],
    ('', 'Neg'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'NegativeLogLikelihoodLoss'): [
        (12, 2, 3, (0, 1), None, 1, 1, {'ignore_index': 'int', 'reduction': 'str'}, ()),
        (13, 2, 3, (0, 1), None, 1, 1, {'ignore_index': 'int', 'reduction': 'str'}, ()),
        (22, 2, 3, (0, 1), None, 1, 1, {'ignore_index': 'int', 'reduction': 'str'}, ()),
    ],
    ('', 'NonMaxSuppression'): [
        (10, 2, 5, (0, 1), None, 1, 1, {'center_point_box': 'int'}, ()),
        (11, 2, 5, (0, 1), None, 1, 1, {'center_point_box': 'int'}, ()),
    ],
    ('', 'NonZero'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Not'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'OneHot'): [
        (9, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
        (11, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
        (28, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'Optional'): [
        (15, 0, 1, (), None, 1, 1, {'type': 'str'}, ()),
        (28, 0, 1, (), None, 1, 1, {'type': 'str'}, ()),
    ],
    ('', 'OptionalGetElement'): [
        (15, 1, 1, (0,), None, 1, 1, {}, ()),
        (18, 1, 1, (0,), None, 1, 1, {}, ()),
        (28, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'OptionalHasElement'): [
        (15, 1, 1, (0,), None, 1, 1, {}, ()),
        (18, 0, 1, (), None, 1, 1, {}, ()),
        (28, 0, 1, (), None, 1, 1, {}, ()),
    ],
    ('', 'Or'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'PRelu'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (9, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (16, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Pad'): [
        (1, 1, 1, (0,), None, 1, 1, {'value': 'float', 'mode': 'str', 'paddings': 'ints'}, ('paddings',)),
        (2, 1, 1, (0,), None, 1, 1, {'value': 'float', 'mode': 'str', 'pads': 'ints'}, ('pads',)),
        (11, 2, 3, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (13, 2, 3, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (18, 2, 4, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (19, 2, 4, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (21, 2, 4, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (23, 2, 4, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (24, 2, 4, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (25, 2, 4, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
    ],
    ('', 'Pow'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (12, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (15, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'QLinearConv'): [
        (10, 8, 9, (0, 1, 2, 3, 4, 5, 6, 7), None, 1, 1, {'group': 'int', 'pads': 'ints', 'strides': 'ints', 'dilations': 'ints', 'kernel_shape': 'ints', 'auto_pad': 'str'}, ()),
    ],
    ('', 'QLinearMatMul'): [
        (10, 8, 8, (0, 1, 2, 3, 4, 5, 6, 7), None, 1, 1, {}, ()),
        (21, 8, 8, (0, 1, 2, 3, 4, 5, 6, 7), None, 1, 1, {}, ()),
    ],
    ('', 'QuantizeLinear'): [
        (10, 2, 3, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 3, (0, 1), None, 1, 1, {'axis': 'int'}, ()),
        (19, 2, 3, (0, 1), None, 1, 1, {'saturate': 'int', 'axis': 'int'}, ()),
        (21, 2, 3, (0, 1), None, 1, 1, {'output_dtype': 'int', 'block_size': 'int', 'saturate': 'int', 'axis': 'int'}, ()),
        (23, 2, 3, (0, 1), None, 1, 1, {'precision': 'int', 'output_dtype': 'int', 'block_size': 'int', 'saturate': 'int', 'axis': 'int'}, ()),
        (24, 2, 3, (0, 1), None, 1, 1, {'precision': 'int', 'output_dtype': 'int', 'block_size': 'int', 'saturate': 'int', 'axis': 'int'}, ()),
        (25, 2, 3, (0, 1), None, 1, 1, {'precision': 'int', 'output_dtype': 'int', 'block_size': 'int', 'saturate': 'int', 'axis': 'int'}, ()),
        (28, 2, 3, (0, 1), None, 1, 1, {'precision': 'int', 'output_dtype': 'int', 'block_size': 'int', 'saturate': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'RMSNormalization'): [
        (23, 2, 2, (0, 1), None, 1, 1, {'stash_type': 'int', 'epsilon': 'float', 'axis': 'int'}, ()),
    ],
    ('', 'RNN'): [
        (1, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'output_sequence': 'int', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'activations': 'strs'}, ()),
        (7, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'direction': 'str', 'activations': 'strs'}, ()),
        (14, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'layout': 'int', 'direction': 'str', 'activations': 'strs'}, ()),
        (22, 3, 6, (0, 1, 2), None, 0, 2, {'clip': 'float', 'activation_beta': 'floats', 'activation_alpha': 'floats', 'hidden_size': 'int', 'layout': 'int', 'direction': 'str', 'activations': 'strs'}, ()),
    ],
    ('', 'RandomNormal'): [
        (1, 0, 0, (), None, 1, 1, {'shape': 'ints', 'dtype': 'int', 'seed': 'float', 'scale': 'float', 'mean': 'float'}, ('shape',)),
        (22, 0, 0, (), None, 1, 1, {'shape': 'ints', 'dtype': 'int', 'seed': 'float', 'scale': 'float', 'mean': 'float'}, ('shape',)),
    ],
    ('', 'RandomNormalLike'): [
        (1, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float', 'scale': 'float', 'mean': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float', 'scale': 'float', 'mean': 'float'}, ()),
    ],
    ('', 'RandomUniform'): [
        (1, 0, 0, (), None, 1, 1, {'shape': 'ints', 'dtype': 'int', 'seed': 'float', 'high': 'float', 'low': 'float'}, ('shape',)),
        (22, 0, 0, (), None, 1, 1, {'shape': 'ints', 'dtype': 'int', 'seed': 'float', 'high': 'float', 'low': 'float'}, ('shape',)),
    ],
    ('', 'RandomUniformLike'): [
        (1, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float', 'high': 'float', 'low': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'dtype': 'int', 'seed': 'float', 'high': 'float', 'low': 'float'}, ()),
    ],
    ('', 'Range'): [
        (11, 3, 3, (0, 1, 2), None, 1, 1, {}, ()),
        (27, 3, 3, (0, 1, 2), None, 1, 1, {'stash_type': 'int'}, ()),
    ],
    ('', 'Reciprocal'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'ReduceL1'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceL2'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceLogSum'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
        (28, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceLogSumExp'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
        (28, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceMax'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (12, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
        (20, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceMean'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceMin'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (12, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
        (20, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceProd'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceSum'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'ReduceSumSquare'): [
        (1, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'keepdims': 'int', 'axes': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axes': 'ints', 'keepdims': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 1, {'noop_with_empty_axes': 'int', 'keepdims': 'int'}, ()),
    ],
    ('', 'RegexFullMatch'): [
        (20, 1, 1, (0,), None, 1, 1, {'pattern': 'str'}, ()),
    ],
    ('', 'Relu'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
        (14, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Reshape'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints', 'shape': 'ints'}, ()),
        (5, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (14, 2, 2, (0, 1), None, 1, 1, {'allowzero': 'int'}, ()),
        (19, 2, 2, (0, 1), None, 1, 1, {'allowzero': 'int'}, ()),
        (21, 2, 2, (0, 1), None, 1, 1, {'allowzero': 'int'}, ()),
        (23, 2, 2, (0, 1), None, 1, 1, {'allowzero': 'int'}, ()),
        (24, 2, 2, (0, 1), None, 1, 1, {'allowzero': 'int'}, ()),
        (25, 2, 2, (0, 1), None, 1, 1, {'allowzero': 'int'}, ()),
    ],
    ('', 'Resize'): [
        (10, 2, 2, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (11, 3, 4, (0, 1, 2), None, 1, 1, {'extrapolation_value': 'float', 'exclude_outside': 'int', 'nearest_mode': 'str', 'coordinate_transformation_mode': 'str', 'cubic_coeff_a': 'float', 'mode': 'str'}, ()),
        (13, 1, 4, (0,), None, 1, 1, {'extrapolation_value': 'float', 'exclude_outside': 'int', 'nearest_mode': 'str', 'coordinate_transformation_mode': 'str', 'cubic_coeff_a': 'float', 'mode': 'str'}, ()),
        (18, 1, 4, (0,), None, 1, 1, {'keep_aspect_ratio_policy': 'str', 'axes': 'ints', 'antialias': 'int', 'extrapolation_value': 'float', 'exclude_outside': 'int', 'nearest_mode': 'str', 'coordinate_transformation_mode': 'str', 'cubic_coeff_a': 'float', 'mode': 'str'}, ()),
        (19, 1, 4, (0,), None, 1, 1, {'keep_aspect_ratio_policy': 'str', 'axes': 'ints', 'antialias': 'int', 'extrapolation_value': 'float', 'exclude_outside': 'int', 'nearest_mode': 'str', 'coordinate_transformation_mode': 'str', 'cubic_coeff_a': 'float', 'mode': 'str'}, ()),
    ],
    ('', 'ReverseSequence'): [
        (10, 2, 2, (0, 1), None, 1, 1, {'batch_axis': 'int', 'time_axis': 'int'}, ()),
        (28, 2, 2, (0, 1), None, 1, 1, {'batch_axis': 'int', 'time_axis': 'int'}, ()),
    ],
    ('', 'RoiAlign'): [
        (10, 3, 3, (0, 1, 2), None, 1, 1, {'mode': 'str', 'output_height': 'int', 'sampling_ratio': 'int', 'output_width': 'int', 'spatial_scale': 'float'}, ()),
        (16, 3, 3, (0, 1, 2), None, 1, 1, {'coordinate_transformation_mode': 'str', 'mode': 'str', 'output_height': 'int', 'sampling_ratio': 'int', 'output_width': 'int', 'spatial_scale': 'float'}, ()),
        (22, 3, 3, (0, 1, 2), None, 1, 1, {'coordinate_transformation_mode': 'str', 'mode': 'str', 'output_height': 'int', 'sampling_ratio': 'int', 'output_width': 'int', 'spatial_scale': 'float'}, ()),
    ],
    ('', 'RotaryEmbedding'): [
        (23, 3, 4, (0, 1, 2), None, 1, 1, {'num_heads': 'int', 'rotary_embedding_dim': 'int', 'interleaved': 'int'}, ()),
    ],
    ('', 'Round'): [
        (11, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'STFT'): [
        (17, 2, 4, (0, 1), None, 1, 1, {'onesided': 'int'}, ()),
    ],
    ('', 'Scan'): [
        (8, 2, 2147483647, (), 1, 1, 2147483647, {'directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (9, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (11, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (16, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (19, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (21, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (23, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (24, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
        (25, 1, 2147483647, (), 0, 1, 2147483647, {'scan_input_axes': 'ints', 'scan_output_axes': 'ints', 'scan_output_directions': 'ints', 'scan_input_directions': 'ints', 'num_scan_inputs': 'int', 'body': 'graph'}, ('num_scan_inputs',)),
    ],
    ('', 'Scatter'): [
        (9, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
        (11, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'ScatterElements'): [
        (11, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
        (13, 3, 3, (0, 1, 2), None, 1, 1, {'axis': 'int'}, ()),
        (16, 3, 3, (0, 1, 2), None, 1, 1, {'reduction': 'str', 'axis': 'int'}, ()),
        (18, 3, 3, (0, 1, 2), None, 1, 1, {'reduction': 'str', 'axis': 'int'}, ()),
    ],
    ('', 'ScatterND'): [
        (11, 3, 3, (0, 1, 2), None, 1, 1, {}, ()),
        (13, 3, 3, (0, 1, 2), None, 1, 1, {}, ()),
        (16, 3, 3, (0, 1, 2), None, 1, 1, {'reduction': 'str'}, ()),
        (18, 3, 3, (0, 1, 2), None, 1, 1, {'reduction': 'str'}, ()),
    ],
    ('', 'Selu'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints', 'gamma': 'float', 'alpha': 'float'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {'gamma': 'float', 'alpha': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'gamma': 'float', 'alpha': 'float'}, ()),
    ],
    ('', 'SequenceAt'): [
        (11, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'SequenceConstruct'): [
        (11, 1, 2147483647, (), 0, 1, 1, {}, ()),
    ],
    ('', 'SequenceEmpty'): [
        (11, 0, 0, (), None, 1, 1, {'dtype': 'int'}, ()),
    ],
    ('', 'SequenceErase'): [
        (11, 1, 2, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'SequenceInsert'): [
        (11, 2, 3, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'SequenceLength'): [
        (11, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'SequenceMap'): [
        (17, 1, 2147483647, (0,), 1, 1, 2147483647, {'body': 'graph'}, ()),
    ],
    ('', 'Shape'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
        (15, 1, 1, (0,), None, 1, 1, {'end': 'int', 'start': 'int'}, ()),
        (19, 1, 1, (0,), None, 1, 1, {'end': 'int', 'start': 'int'}, ()),
        (21, 1, 1, (0,), None, 1, 1, {'end': 'int', 'start': 'int'}, ()),
        (23, 1, 1, (0,), None, 1, 1, {'end': 'int', 'start': 'int'}, ()),
        (24, 1, 1, (0,), None, 1, 1, {'end': 'int', 'start': 'int'}, ()),
        (25, 1, 1, (0,), None, 1, 1, {'end': 'int', 'start': 'int'}, ()),
    ],
    ('', 'Shrink'): [
        (9, 1, 1, (0,), None, 1, 1, {'bias': 'float', 'lambd': 'float'}, ()),
    ],
    ('', 'Sigmoid'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Sign'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Sin'): [
        (7, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Sinh'): [
        (9, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Size'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
        (19, 1, 1, (0,), None, 1, 1, {}, ()),
        (21, 1, 1, (0,), None, 1, 1, {}, ()),
        (23, 1, 1, (0,), None, 1, 1, {}, ()),
        (24, 1, 1, (0,), None, 1, 1, {}, ()),
        (25, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Slice'): [
        (1, 1, 1, (0,), None, 1, 1, {'ends': 'ints', 'starts': 'ints', 'axes': 'ints'}, ('ends', 'starts')),
        (10, 3, 5, (0, 1, 2), None, 1, 1, {}, ()),
        (11, 3, 5, (0, 1, 2), None, 1, 1, {}, ()),
        (13, 3, 5, (0, 1, 2), None, 1, 1, {}, ()),
    ],
    ('', 'Softmax'): [
        (1, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'axis': 'int'}, ()),
    ],
    ('', 'SoftmaxCrossEntropyLoss'): [
        (12, 2, 3, (0, 1), None, 1, 2, {'ignore_index': 'int', 'reduction': 'str'}, ()),
        (13, 2, 3, (0, 1), None, 1, 2, {'ignore_index': 'int', 'reduction': 'str'}, ()),
    ],
    ('', 'Softplus'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Softsign'): [
        (1, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'SpaceToDepth'): [
        (1, 1, 1, (0,), None, 1, 1, {'blocksize': 'int'}, ('blocksize',)),
        (13, 1, 1, (0,), None, 1, 1, {'blocksize': 'int'}, ('blocksize',)),
        (28, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'blocksize': 'int'}, ('blocksize',)),
    ],
    ('', 'Split'): [
        (1, 1, 2, (0,), None, 1, 2147483647, {'split': 'ints', 'axis': 'int'}, ()),
        (2, 1, 1, (0,), None, 1, 2147483647, {'split': 'ints', 'axis': 'int'}, ()),
        (11, 1, 1, (0,), None, 1, 2147483647, {'split': 'ints', 'axis': 'int'}, ()),
        (13, 1, 2, (0,), None, 1, 2147483647, {'axis': 'int'}, ()),
        (18, 1, 2, (0,), None, 1, 2147483647, {'num_outputs': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'SplitToSequence'): [
        (11, 1, 2, (0,), None, 1, 1, {'keepdims': 'int', 'axis': 'int'}, ()),
        (24, 1, 2, (0,), None, 1, 1, {'keepdims': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'Sqrt'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Squeeze'): [
        (1, 1, 1, (0,), None, 1, 1, {'axes': 'ints'}, ()),
        (11, 1, 1, (0,), None, 1, 1, {'axes': 'ints'}, ()),
        (13, 1, 2, (0,), None, 1, 1, {}, ()),
        (21, 1, 2, (0,), None, 1, 1, {}, ()),
        (23, 1, 2, (0,), None, 1, 1, {}, ()),
        (24, 1, 2, (0,), None, 1, 1, {}, ()),
        (25, 1, 2, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'StringConcat'): [
        (20, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'StringNormalizer'): [
        (10, 1, 1, (0,), None, 1, 1, {'stopwords': 'strs', 'locale': 'str', 'is_case_sensitive': 'int', 'case_change_action': 'str'}, ()),
    ],
    ('', 'StringSplit'): [
        (20, 1, 1, (0,), None, 2, 2, {'maxsplit': 'int', 'delimiter': 'str'}, ()),
    ],
    ('', 'Sub'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'consumed_inputs': 'ints', 'broadcast': 'int'}, ()),
        (6, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (14, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Sum'): [
        (1, 1, 2147483647, (), 0, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (8, 1, 2147483647, (), 0, 1, 1, {}, ()),
        (13, 1, 2147483647, (), 0, 1, 1, {}, ()),
    ],
    ('', 'SwiGLU'): [
        (28, 2, 2, (0, 1), None, 1, 1, {'alpha': 'float'}, ()),
    ],
    ('', 'Swish'): [
        (24, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
    ],
    ('', 'Tan'): [
        (7, 1, 1, (0,), None, 1, 1, {}, ()),
        (22, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'Tanh'): [
        (1, 1, 1, (0,), None, 1, 1, {'consumed_inputs': 'ints'}, ()),
        (6, 1, 1, (0,), None, 1, 1, {}, ()),
        (13, 1, 1, (0,), None, 1, 1, {}, ()),
    ],
    ('', 'TensorScatter'): [
        (24, 2, 3, (0, 1), None, 1, 1, {'mode': 'str', 'axis': 'int'}, ()),
    ],
    ('', 'TfIdfVectorizer'): [
        (9, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'ngram_indexes': 'ints', 'weights': 'floats', 'ngram_counts': 'ints', 'pool_int64s': 'ints', 'pool_strings': 'strs', 'max_skip_count': 'int', 'min_gram_length': 'int', 'max_gram_length': 'int'}, ('mode', 'ngram_indexes', 'ngram_counts', 'max_skip_count', 'min_gram_length', 'max_gram_length')),
    ],
    ('', 'ThresholdedRelu'): [
        (10, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
        (22, 1, 1, (0,), None, 1, 1, {'alpha': 'float'}, ()),
    ],
    ('', 'Tile'): [
        (1, 3, 3, (0, 1, 2), None, 1, 1, {}, ()),
        (6, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'TopK'): [
        (1, 1, 1, (0,), None, 2, 2, {'axis': 'int', 'k': 'int'}, ('k',)),
        (10, 2, 2, (0, 1), None, 2, 2, {'axis': 'int'}, ()),
        (11, 2, 2, (0, 1), None, 2, 2, {'sorted': 'int', 'largest': 'int', 'axis': 'int'}, ()),
        (24, 2, 2, (0, 1), None, 2, 2, {'sorted': 'int', 'largest': 'int', 'axis': 'int'}, ()),
    ],
    ('', 'Transpose'): [
        (1, 1, 1, (0,), None, 1, 1, {'perm': 'ints'}, ()),
        (13, 1, 1, (0,), None, 1, 1, {'perm': 'ints'}, ()),
        (21, 1, 1, (0,), None, 1, 1, {'perm': 'ints'}, ()),
        (23, 1, 1, (0,), None, 1, 1, {'perm': 'ints'}, ()),
        (24, 1, 1, (0,), None, 1, 1, {'perm': 'ints'}, ()),
        (25, 1, 1, (0,), None, 1, 1, {'perm': 'ints'}, ()),
    ],
    ('', 'Trilu'): [
        (14, 1, 2, (0,), None, 1, 1, {'upper': 'int'}, ()),
    ],
    ('', 'Unique'): [
        (11, 1, 1, (0,), None, 1, 4, {'axis': 'int', 'sorted': 'int'}, ()),
        (28, 1, 1, (0,), None, 1, 4, {'axis': 'int', 'sorted': 'int'}, ()),
    ],
    ('', 'Unsqueeze'): [
        (1, 1, 1, (0,), None, 1, 1, {'axes': 'ints'}, ('axes',)),
        (11, 1, 1, (0,), None, 1, 1, {'axes': 'ints'}, ('axes',)),
        (13, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (21, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (23, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (24, 2, 2, (0, 1), None, 1, 1, {}, ()),
        (25, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('', 'Upsample'): [
        (1, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'height_scale': 'float', 'width_scale': 'float'}, ('height_scale', 'width_scale')),
        (7, 1, 1, (0,), None, 1, 1, {'mode': 'str', 'scales': 'floats'}, ('scales',)),
        (9, 2, 2, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
        (10, 2, 2, (0, 1), None, 1, 1, {'mode': 'str'}, ()),
    ],
    ('', 'Where'): [
        (9, 3, 3, (0, 1, 2), None, 1, 1, {}, ()),
        (16, 3, 3, (0, 1, 2), None, 1, 1, {}, ()),
    ],
    ('', 'Xor'): [
        (1, 2, 2, (0, 1), None, 1, 1, {'axis': 'int', 'broadcast': 'int'}, ()),
        (7, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('ai.onnx.ml', 'ArrayFeatureExtractor'): [
        (1, 2, 2, (0, 1), None, 1, 1, {}, ()),
    ],
    ('ai.onnx.ml', 'Binarizer'): [
        (1, 1, 1, (0,), None, 1, 1, {'threshold': 'float'}, ()),
    ],
    ('ai.onnx.ml', 'CastMap'): [
        (1, 1, 1, (0,), None, 1, 1, {'max_map': 'int', 'map_form': 'str', 'cast_to': 'str'}, ()),
    ],
    ('ai.onnx.ml', 'CategoryMapper'): [
        (1, 1, 1, (0,), None, 1, 1, {'default_int64': 'int', 'default_string': 'str', 'cats_int64s': 'ints', 'cats_strings': 'strs'}, ()),
    ],
    ('ai.onnx.ml', 'DictVectorizer'): [
        (1, 1, 1, (0,), None, 1, 1, {'int64_vocabulary': 'ints', 'string_vocabulary': 'strs'}, ()),
    ],
    ('ai.onnx.ml', 'FeatureVectorizer'): [
        (1, 1, 2147483647, (), 0, 1, 1, {'inputdimensions': 'ints'}, ()),
    ],
    ('ai.onnx.ml', 'Imputer'): [
        (1, 1, 1, (0,), None, 1, 1, {'replaced_value_int64': 'int', 'imputed_value_int64s': 'ints', 'replaced_value_float': 'float', 'imputed_value_floats': 'floats'}, ()),
    ],
    ('ai.onnx.ml', 'LabelEncoder'): [
        (1, 1, 1, (0,), None, 1, 1, {'default_string': 'str', 'default_int64': 'int', 'classes_strings': 'strs'}, ()),
        (2, 1, 1, (0,), None, 1, 1, {'default_int64': 'int', 'default_float': 'float', 'default_string': 'str', 'values_int64s': 'ints', 'values_strings': 'strs', 'keys_floats': 'floats', 'values_floats': 'floats', 'keys_int64s': 'ints', 'keys_strings': 'strs'}, ()),
        (4, 1, 1, (0,), None, 1, 1, {'default_tensor': 'tensor', 'default_int64': 'int', 'default_float': 'float', 'default_string': 'str', 'values_int64s': 'ints', 'values_strings': 'strs', 'values_tensor': 'tensor', 'keys_floats': 'floats', 'keys_strings': 'strs', 'values_floats': 'floats', 'keys_int64s': 'ints', 'keys_tensor': 'tensor'}, ()),
    ],
    ('ai.onnx.ml', 'LinearClassifier'): [
        (1, 1, 1, (0,), None, 2, 2, {'post_transform': 'str', 'classlabels_ints': 'ints', 'classlabels_strings': 'strs', 'multi_class': 'int', 'intercepts': 'floats', 'coefficients': 'floats'}, ('coefficients',)),
    ],
    ('ai.onnx.ml', 'LinearRegressor'): [
        (1, 1, 1, (0,), None, 1, 1, {'targets': 'int', 'intercepts': 'floats', 'coefficients': 'floats', 'post_transform': 'str'}, ()),
    ],
    ('ai.onnx.ml', 'Normalizer'): [
        (1, 1, 1, (0,), None, 1, 1, {'norm': 'str'}, ()),
    ],
    ('ai.onnx.ml', 'OneHotEncoder'): [
        (1, 1, 1, (0,), None, 1, 1, {'zeros': 'int', 'cats_strings': 'strs', 'cats_int64s': 'ints'}, ()),
    ],
    ('ai.onnx.ml', 'SVMClassifier'): [
        (1, 1, 1, (0,), None, 2, 2, {'classlabels_ints': 'ints', 'rho': 'floats', 'prob_b': 'floats', 'coefficients': 'floats', 'classlabels_strings': 'strs', 'prob_a': 'floats', 'support_vectors': 'floats', 'vectors_per_class': 'ints', 'post_transform': 'str', 'kernel_params': 'floats', 'kernel_type': 'str'}, ()),
    ],
    ('ai.onnx.ml', 'SVMRegressor'): [
        (1, 1, 1, (0,), None, 1, 1, {'rho': 'floats', 'coefficients': 'floats', 'n_supports': 'int', 'one_class': 'int', 'support_vectors': 'floats', 'post_transform': 'str', 'kernel_params': 'floats', 'kernel_type': 'str'}, ()),
    ],
    ('ai.onnx.ml', 'Scaler'): [
        (1, 1, 1, (0,), None, 1, 1, {'scale': 'floats', 'offset': 'floats'}, ()),
    ],
    ('ai.onnx.ml', 'TreeEnsemble'): [
        (5, 1, 1, (0,), None, 1, 1, {'aggregate_function': 'int', 'post_transform': 'int', 'tree_roots': 'ints', 'nodes_hitrates': 'tensor', 'nodes_missing_value_tracks_true': 'ints', 'nodes_modes': 'tensor', 'leaf_weights': 'tensor', 'leaf_targetids': 'ints', 'nodes_falsenodeids': 'ints', 'n_targets': 'int', 'nodes_trueleafs': 'ints', 'nodes_featureids': 'ints', 'nodes_splits': 'tensor', 'nodes_falseleafs': 'ints', 'nodes_truenodeids': 'ints', 'membership_values': 'tensor'}, ('tree_roots', 'nodes_modes', 'leaf_weights', 'leaf_targetids', 'nodes_falsenodeids', 'nodes_trueleafs', 'nodes_featureids', 'nodes_splits', 'nodes_falseleafs', 'nodes_truenodeids')),
    ],
    ('ai.onnx.ml', 'TreeEnsembleClassifier'): [
        (1, 1, 1, (0,), None, 2, 2, {'post_transform': 'str', 'classlabels_int64s': 'ints', 'nodes_nodeids': 'ints', 'classlabels_strings': 'strs', 'class_ids': 'ints', 'class_weights': 'floats', 'nodes_treeids': 'ints', 'nodes_featureids': 'ints', 'nodes_values': 'floats', 'nodes_falsenodeids': 'ints', 'nodes_hitrates': 'floats', 'base_values': 'floats', 'nodes_missing_value_tracks_true': 'ints', 'nodes_modes': 'strs', 'nodes_truenodeids': 'ints', 'class_treeids': 'ints', 'class_nodeids': 'ints'}, ()),
        (3, 1, 1, (0,), None, 2, 2, {'base_values_as_tensor': 'tensor', 'post_transform': 'str', 'classlabels_int64s': 'ints', 'class_weights_as_tensor': 'tensor', 'class_weights': 'floats', 'classlabels_strings': 'strs', 'class_ids': 'ints', 'nodes_nodeids': 'ints', 'nodes_treeids': 'ints', 'nodes_featureids': 'ints', 'nodes_values_as_tensor': 'tensor', 'nodes_falsenodeids': 'ints', 'nodes_hitrates': 'floats', 'base_values': 'floats', 'nodes_missing_value_tracks_true': 'ints', 'nodes_values': 'floats', 'nodes_hitrates_as_tensor': 'tensor', 'nodes_modes': 'strs', 'nodes_truenodeids': 'ints', 'class_treeids': 'ints', 'class_nodeids': 'ints'}, ()),
        (5, 1, 1, (0,), None, 2, 2, {'base_values_as_tensor': 'tensor', 'post_transform': 'str', 'classlabels_int64s': 'ints', 'class_weights_as_tensor': 'tensor', 'class_weights': 'floats', 'classlabels_strings': 'strs', 'class_ids': 'ints', 'nodes_nodeids': 'ints', 'nodes_treeids': 'ints', 'nodes_featureids': 'ints', 'nodes_values_as_tensor': 'tensor', 'nodes_falsenodeids': 'ints', 'nodes_hitrates': 'floats', 'base_values': 'floats', 'nodes_missing_value_tracks_true': 'ints', 'nodes_values': 'floats', 'nodes_hitrates_as_tensor': 'tensor', 'nodes_modes': 'strs', 'nodes_truenodeids': 'ints', 'class_treeids': 'ints', 'class_nodeids': 'ints'}, ()),
    ],
    ('ai.onnx.ml', 'TreeEnsembleRegressor'): [
        (1, 1, 1, (0,), None, 1, 1, {'aggregate_function': 'str', 'post_transform': 'str', 'n_targets': 'int', 'nodes_nodeids': 'ints', 'target_nodeids': 'ints', 'nodes_treeids': 'ints', 'nodes_featureids': 'ints', 'nodes_values': 'floats', 'target_weights': 'floats', 'nodes_falsenodeids': 'ints', 'nodes_hitrates': 'floats', 'base_values': 'floats', 'nodes_missing_value_tracks_true': 'ints', 'nodes_modes': 'strs', 'nodes_truenodeids': 'ints', 'target_treeids': 'ints', 'target_ids': 'ints'}, ()),
        (3, 1, 1, (0,), None, 1, 1, {'base_values_as_tensor': 'tensor', 'aggregate_function': 'str', 'post_transform': 'str', 'n_targets': 'int', 'target_weights_as_tensor': 'tensor', 'target_ids': 'ints', 'nodes_nodeids': 'ints', 'nodes_treeids': 'ints', 'nodes_featureids': 'ints', 'target_nodeids': 'ints', 'nodes_values_as_tensor': 'tensor', 'target_weights': 'floats', 'nodes_falsenodeids': 'ints', 'nodes_hitrates': 'floats', 'base_values': 'floats', 'nodes_missing_value_tracks_true': 'ints', 'nodes_values': 'floats', 'nodes_hitrates_as_tensor': 'tensor', 'nodes_modes': 'strs', 'nodes_truenodeids': 'ints', 'target_treeids': 'ints'}, ()),
        (5, 1, 1, (0,), None, 1, 1, {'base_values_as_tensor': 'tensor', 'aggregate_function': 'str', 'post_transform': 'str', 'n_targets': 'int', 'target_weights_as_tensor': 'tensor', 'target_ids': 'ints', 'nodes_nodeids': 'ints', 'nodes_treeids': 'ints', 'nodes_featureids': 'ints', 'target_nodeids': 'ints', 'nodes_values_as_tensor': 'tensor', 'target_weights': 'floats', 'nodes_falsenodeids': 'ints', 'nodes_hitrates': 'floats', 'base_values': 'floats', 'nodes_missing_value_tracks_true': 'ints', 'nodes_values': 'floats', 'nodes_hitrates_as_tensor': 'tensor', 'nodes_modes': 'strs', 'nodes_truenodeids': 'ints', 'target_treeids': 'ints'}, ()),
    ],
    ('ai.onnx.ml', 'ZipMap'): [
        (1, 1, 1, (0,), None, 1, 1, {'classlabels_int64s': 'ints', 'classlabels_strings': 'strs'}, ()),
    ],
    ('ai.onnx.preview.training', 'Adagrad'): [
        (1, 3, 2147483647, (0, 1), 2, 1, 2147483647, {'norm_coefficient': 'float', 'decay_factor': 'float', 'epsilon': 'float'}, ()),
    ],
    ('ai.onnx.preview.training', 'Adam'): [
        (1, 3, 2147483647, (0, 1), 2, 1, 2147483647, {'epsilon': 'float', 'norm_coefficient_post': 'float', 'norm_coefficient': 'float', 'beta': 'float', 'alpha': 'float'}, ()),
    ],
    ('ai.onnx.preview.training', 'Gradient'): [
        (1, 1, 2147483647, (), 0, 1, 2147483647, {'y': 'str', 'zs': 'strs', 'xs': 'strs'}, ('y', 'xs')),
    ],
    ('ai.onnx.preview.training', 'Momentum'): [
        (1, 3, 2147483647, (0, 1), 2, 1, 2147483647, {'norm_coefficient': 'float', 'beta': 'float', 'mode': 'str', 'alpha': 'float'}, ('norm_coefficient', 'beta', 'mode', 'alpha')),
    ],
}
