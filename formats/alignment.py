"""Sizes and offsets rounded up to an alignment, the one way every layer rounds them.

The .om places its sections, weights and tensors at aligned offsets, the compiler's memory
plan and the device's allocators hand out aligned blocks, the kernels carve aligned
workspaces: all through :func:`align_up`.
"""
from __future__ import annotations

#: Device memory's alignment (blocks, weights, tensors, workspace sections): a cache line,
#: and one AVX-512 vector.
ALIGNMENT = 64


def align_up(n: int, a: int = ALIGNMENT) -> int:
    """``n`` rounded up to a multiple of ``a``."""
    return (int(n) + a - 1) // a * a


class RegionLayout:
    """Tensors packed into one region in the order they are placed, each at an aligned
    offset: the weights region of a static plan, of a gear model, of a dynamic model."""

    def __init__(self, alignment: int = ALIGNMENT):
        self.alignment = alignment
        self.offsets: dict[str, int] = {}
        self.end = 0
        """The region's size so far."""

    def place(self, name: str, nbytes: int) -> int:
        """``name``'s offset: the end of the region so far, which it then extends."""
        self.offsets[name] = offset = self.end
        self.end += align_up(nbytes, self.alignment)
        return offset
