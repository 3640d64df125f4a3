"""What a compile carries from stage to stage: its options, its target, its statistics
and its timings.

:class:`CompileOptions` is what a user chooses (``aircc compile``'s flags); a variant
of a compile (a gear, another target) is ``dataclasses.replace(options, ...)``.
:class:`CompileContext` is one compile in progress: every pass and stage gets it,
reads the options and the target from it, counts what it did in ``stats`` and
its time in ``seconds``.  Nothing travels through the graph's ``meta``.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from aircc.config import WINOGRAD_MODES, settings
from aircc.errors import CompileOptionError
from aircc.formats.kinds import PrecisionMode
from aircc.ops import KernelBackend, Target, kernel_backend, resolve_target
from aircc.ops.types import Dim

MODES = ("static", "dynamic", "auto")


@dataclass(frozen=True)
class CompileOptions:
    """What ``aircc compile`` lets a user choose."""

    streams: int | None = None
    """Stream cap; None = the default cap, 1 = a single stream."""
    input_shapes: Mapping[str, Sequence[Dim]] = field(default_factory=dict)
    """Shapes that fix inputs' symbolic dims, by input name."""
    mode: str = "auto"
    """``static``, ``dynamic``, or ``auto`` (dynamic when an input has a symbolic dim)."""
    min_branch_bytes: int | None = None
    """A branch opens its own stream only if it writes at least this many bytes (None: 128 KiB)."""
    split_matrix_branches: bool = False
    """Let branches led by a Conv or MatMul open streams too, and on a backend whose every
    kernel spans the cores (oneDNN) any branch (by default they stay with a predecessor:
    they would only queue for the cores)."""
    dynamic_batch: Sequence[int] | None = None
    """Gears: one static plan per batch size, in one .om."""
    passes: Sequence[str] | None = None
    """Optimisation pipeline by pass names; None = the default pipeline."""
    target: str | None = None
    """Compile target by name (``native``, ``cpu-avx2``, ...); None: ``$AIRCC_TARGET`` or native."""
    channels_last: bool | None = None
    """Plan convolution regions channels-last (``plan-layouts``): None as the target's
    backend wants, True wherever possible, False never."""
    stream_priorities: Mapping[int, int] = field(default_factory=dict)
    """Priority of a stream by its index (higher is served first when streams share the
    device's compute units); streams not named get 0."""
    winograd: str = field(default_factory=lambda: settings().winograd)
    """The oneDNN backend's Winograd convolutions: ``auto`` (where its shape rule says they
    pay), ``off``, ``2`` or ``4`` (that tile wherever a conv qualifies); by default
    ``$AIRCC_WINOGRAD``, else ``auto``."""
    precision_mode: str = PrecisionMode.MUST_KEEP_ORIGIN_DTYPE.value
    """The types the model computes in (``--precision_mode``, :class:`~aircc.formats.kinds.
    PrecisionMode`): ``must_keep_origin_dtype`` (the graph's own), ``force_fp32``,
    ``allow_mix_precision_bf16`` or ``force_bf16``."""
    modify_mixlist: Mapping = field(default_factory=dict)
    """``--modify_mixlist``: the offline compiler's changes to its op lists
    (:mod:`~aircc.compiler.passes.mix_precision`)."""

    def __post_init__(self) -> None:
        check_precision_mode(self.precision_mode)


#: The offline compiler's precision modes that need kernels aircc does not have yet.
PLANNED_PRECISION_MODES = ("allow_mix_precision_fp16", "force_fp16", "allow_fp32_to_fp16",
                           "allow_mix_precision")


def check_precision_mode(mode: str) -> None:
    """CompileOptionError naming the modes for one aircc cannot compile."""
    modes = ", ".join(m.value for m in PrecisionMode)
    if mode in PLANNED_PRECISION_MODES:
        raise CompileOptionError(f"--precision_mode {mode} is not available in this version of "
                                 f"aircc (its reduced-precision kernels are not there yet); the "
                                 f"modes it has: {modes}")
    if mode not in {m.value for m in PrecisionMode}:
        raise CompileOptionError(f"--precision_mode must be one of {modes}, got {mode!r}")


class CompileContext:
    """One compile in progress (see the module doc)."""

    def __init__(self, options: CompileOptions | None = None):
        self.options = options if options is not None else CompileOptions()
        self.stats: dict[str, int] = {}
        """What the passes did, by statistic name (``folded_nodes``, ...)."""
        self.seconds: dict[str, float] = {}
        """Time per stage and per pass."""
        self._target: Target | None = None
        self._backend: KernelBackend | None = None
        self.progress: Callable[[str, int], None] | None = None
        """Called with each stage's name when it ends and the number of stages the compile
        runs (a command line's progress bar)."""

    @property
    def target(self) -> Target:
        """The compile target (resolved once), with the options' Winograd mode for the tilings."""
        if self._target is None:
            if self.options.winograd not in WINOGRAD_MODES:
                raise CompileOptionError(f"--winograd must be one of {', '.join(WINOGRAD_MODES)}, "
                                         f"got {self.options.winograd!r}")
            self._target = dataclasses.replace(resolve_target(self.options.target),
                                               winograd=self.options.winograd)
        return self._target

    @property
    def backend(self) -> KernelBackend:
        """The target's kernel backend: tiling, weight layouts, kernels for constant folding."""
        if self._backend is None:
            self._backend = kernel_backend(self.target.backend)
        return self._backend

    def count(self, stat: str, n: int = 1) -> None:
        """Add ``n`` to statistic ``stat`` of the compile report."""
        self.stats[stat] = self.stats.get(stat, 0) + n

    def timed(self, name: str) -> "Timed":
        """A block whose wall time adds to ``seconds[name]`` (``with ctx.timed(name):``)."""
        return Timed(self.seconds, name)


class Timed:
    """Adds the wall time of a ``with`` block to ``seconds[name]``."""

    __slots__ = ("seconds", "name", "start")

    def __init__(self, seconds: dict[str, float], name: str):
        self.seconds, self.name = seconds, name

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.seconds[self.name] = self.seconds.get(self.name, 0.0) + time.perf_counter() - self.start
