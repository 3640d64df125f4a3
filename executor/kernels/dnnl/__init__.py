"""oneDNN 3.2 through its C API (ctypes): the binding the oneDNN kernel backend stands on.

- :mod:`.library`: loading libdnnl, errors, the engine, per-thread streams, OpenMP threads;
- :mod:`.enums`: the C enums (generated from the 3.2 headers by ``tools/gen_dnnl_enums.py``);
- :mod:`.capi`: the C prototypes;
- :mod:`.memory`: memory descriptors and memory objects over numpy arrays and raw pointers;
- :mod:`.attr`: post-ops and primitive attributes (user scratchpad);
- :mod:`.ops`: primitive-descriptor constructors (convolution, matmul, pooling, ...);
- :mod:`.primitive`: primitive descriptors' queries and :class:`~.primitive.Bound`
  executables.

Importing these modules does not load the library; the first call that needs it does
(:func:`.library.available` says whether it can).
"""
