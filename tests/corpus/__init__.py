"""A corpus of real ONNX exports, made on the fly with random weights, run through aircc
against onnxruntime: Hugging Face architectures by both torch.onnx exporters, the same
after onnxruntime's transformer optimizer and its quantizers, and scikit-learn pipelines
by skl2onnx.  ``corpus.models.ENTRIES`` lists them; docs/corpus.md says what each
exercises.

    python -m pytest tests/corpus             # the fast subset (the default suite runs it)
    python -m pytest tests/corpus --corpus    # every model
    python tests/corpus/table.py [NAME ...]   # the results table, one line per model and mode
"""
