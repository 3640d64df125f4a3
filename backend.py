"""aircc as an ONNX backend (``onnx.backend.base.Backend``).

Every model goes the real way: compiled to the AIR IR, optimised, scheduled
on streams with events, memory planned, serialised to .om bytes, read back by
the strict reader and run on the virtual device.  The onnx package's own
``onnx.backend.test`` runner works against it::

    import onnx.backend.test
    import aircc.backend
    onnx.backend.test.BackendTest(aircc.backend, __name__).include("test_relu_cpu").test_cases
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from .compiler.driver import CompileOptions, compile_model
from .executor.device.device import VirtualDevice
from .executor.device.discovery import resolve_device
from .formats import dump_om, load_om


class SequenceArray(np.ndarray):
    """A sequence as the backend API returns it: a 1-D object array of its tensors, equal
    to another element by element (same dtype, shape and values)."""

    def __eq__(self, other):
        mine, theirs = np.asarray(self).reshape(-1), np.asarray(other, dtype=object).reshape(-1)
        if len(mine) != len(theirs):
            return np.zeros(self.shape, bool)
        return np.array([np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b)
                         for a, b in zip(mine, theirs)], bool).reshape(self.shape)

    def __ne__(self, other):
        return ~self.__eq__(other)


def as_array(value) -> np.ndarray:
    """A feed or result as a numpy array (TensorProto feeds are converted); a sequence (a
    list) as a :class:`SequenceArray`, an empty optional (None) as a 0-d object array."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        out = np.empty(len(value), object)
        for k, v in enumerate(value):
            out[k] = as_array(v)
        return out.view(SequenceArray)
    return np.asarray(value)


def as_feed(value):
    """A feed for :meth:`LoadedModel.run`: an array, a sequence as a list of arrays, an
    empty optional as None."""
    if value is None or isinstance(value, np.ndarray) and value.dtype == object \
            and value.ndim == 0 and value.item() is None:
        return None
    if isinstance(value, (list, tuple)) or isinstance(value, np.ndarray) and value.dtype == object \
            and value.ndim == 1 and all(isinstance(v, np.ndarray) for v in value):
        return [as_feed(v) for v in value]
    return as_array(value)


class AirccBackendRep(BackendRep):
    """A model prepared by aircc: loaded onto a virtual device, run by input order."""

    def __init__(self, model, inputs: list[str]):
        self.model = model
        self.input_names = inputs

    def run(self, inputs: Any, **kwargs) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {name: as_feed(v) for name, v in zip(self.input_names, values)}
        outputs = self.model.run(feeds)
        return tuple(v if isinstance(v, np.ndarray) else as_array(v) for v in outputs.values())


class AirccBackend(Backend):
    """Compile with aircc, run on its virtual device."""

    device: VirtualDevice | None = None

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """The virtual device is hosted by the CPU: ``CPU`` is the one device name served."""
        return Device(device).type == DeviceType.CPU

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> AirccBackendRep:
        super().prepare(model, device, **kwargs)
        options = CompileOptions(streams=kwargs.get("streams"), mode=kwargs.get("mode", "auto"),
                                 target=kwargs.get("target"))
        compiled = compile_model(model, options)
        om = load_om(dump_om(compiled.om))          # the real bytes, read back strictly
        from .executor.runtime.loader import load_model

        loaded = load_model(om, cls.device or resolve_device(None))
        inits = {i.name for i in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        return AirccBackendRep(loaded, names)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        rep = cls.prepare(model, device, **kwargs)
        try:
            return rep.run(inputs)
        finally:
            rep.model.close()

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info: Sequence[tuple] | None = None, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node: it is wrapped into a one-node model with typed inputs."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info)
        in_vis = [onnx.helper.make_tensor_value_info(
            name, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype), np.asarray(x).shape)
            for name, x in zip(node.input, inputs) if name]
        out_vis = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        graph = onnx.helper.make_graph([node], "run_node", in_vis, out_vis)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.run_model(model, [x for name, x in zip(node.input, inputs) if name], device)


prepare = AirccBackend.prepare
run_model = AirccBackend.run_model
run_node = AirccBackend.run_node
supports_device = AirccBackend.supports_device
