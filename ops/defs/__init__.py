"""Shape rules of the ops, by family: each module defines its ops with :func:`aircc.ops.define`."""
