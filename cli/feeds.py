"""airrun's input files: .npy and .npz feeds, narrow types, random inputs."""
from __future__ import annotations

import numpy as np

from aircc.errors import CommandLineError, InputError
from aircc.formats.model_section import IOSpec

from . import value_files

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def load_array_file(path: str) -> np.ndarray | np.lib.npyio.NpzFile:
    """The array of an .npy file or the NpzFile of an .npz (without pickle); InputError
    naming the file when it is missing, unreadable or not one of those."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except FileNotFoundError:
        raise InputError(f"input file {path!r} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read input file {path!r}: {e.strerror or e}") from None
    if head != NPY_MAGIC and not head.startswith(ZIP_MAGICS):
        raise InputError(f"input file {path!r} is not a .npy or .npz file")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:  # numpy's errors for a damaged file have no common base
        raise InputError(f"input file {path!r} cannot be loaded: {type(e).__name__}: {e}") from None


def read_npz(path: str, known: list[str], specs: list[IOSpec] | None = None) -> dict:
    """Every array of the .npz at ``path``, by name; each must be an input of the model
    (with ``specs``: sequences and optionals as :mod:`.value_files` says)."""
    feeds = {}
    with load_array_file(path) as z:
        unknown = [] if specs else sorted(set(z.files) - set(known))
        if unknown:
            raise InputError(f"input file {path!r} holds {unknown}, which the model does not "
                             f"have; its inputs are {known}")
        for k in z.files:
            try:
                feeds[k] = z[k]
            except Exception as e:
                raise InputError(f"input file {path!r}: array {k!r} cannot be loaded: "
                                 f"{type(e).__name__}: {e}") from None
    return feeds if specs is None else value_files.unpack(feeds, specs, path)


def read_inputs(specs: tuple[str, ...], inputs: list[IOSpec]) -> dict[str, np.ndarray]:
    """``x.npy`` (inputs in order), ``name=x.npy``, or ``feeds.npz`` (by name)."""
    feeds: dict[str, np.ndarray] = {}
    positional = [i.name for i in inputs]
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        elif name not in positional:
            raise InputError(f"--input {spec}: the model has no input {name!r}; "
                             f"its inputs are {positional}")
        loaded = load_array_file(path)
        if not isinstance(loaded, np.ndarray):
            loaded.close()
            if name:
                raise InputError(f"--input {spec}: an .npz holds inputs by name; give it "
                                 f"without NAME=")
            feeds.update(read_npz(path, positional, inputs))
            continue
        if not name:
            free = [n for n in positional if n not in feeds]
            if not free:
                raise InputError(f"--input {path}: more input files than the model has "
                                 f"inputs ({positional})")
            name = free[0]
        dtype = next(i.dtype for i in inputs if i.name == name)
        if value_files.kind(dtype) == "sequence" or dtype.startswith("optional:sequence:"):
            raise InputError(f"--input {spec}: input '{name}' is a {dtype}; give it in an .npz "
                             f"as {name}/0, {name}/1, ... ({name}/ alone when empty)")
        feeds[name] = loaded
    return value_files.empty_optionals(feeds, inputs)


def narrow_type_bits(feeds: dict[str, np.ndarray], inputs: list[IOSpec]) -> dict[str, np.ndarray]:
    """Feeds of the inputs typed bfloat16, float8, float4, int4 or int2 (ml_dtypes' dtypes)
    as ``np.save`` writes such arrays: raw bytes (``|V2`` for bfloat16, ``|V1`` for the
    others), read back as the input's dtype (the same bits)."""
    from aircc.formats.checks import ML_DTYPES

    for i in inputs:
        a, dt = feeds.get(i.name), ML_DTYPES.get(i.dtype)
        if (dt is not None and isinstance(a, np.ndarray) and a.dtype.kind == "V"
                and a.dtype.names is None and a.dtype.itemsize == dt.itemsize):
            feeds[i.name] = a.view(dt)
    return feeds


def random_inputs(inputs: list[IOSpec], seed: int, shapes: dict | None = None) -> dict[str, np.ndarray]:
    """Inputs drawn from a generator seeded with ``seed``; a symbolic dim takes its size
    from ``shapes`` (``--input-shape``)."""
    rng = np.random.default_rng(seed)
    shapes = dict(shapes or {})
    unknown = sorted(set(shapes) - {i.name for i in inputs})
    if unknown:
        raise CommandLineError(f"--input-shape: the model has no input {unknown[0]!r}; its "
                               f"inputs are {[i.name for i in inputs]}")
    feeds = {}
    for i in inputs:
        if value_files.kind(i.dtype) != "tensor":
            raise CommandLineError(f"--random: input '{i.name}' is a {i.dtype}; give "
                                   f"--input")
        shape = _shape(i, shapes.get(i.name))
        dt = np.dtype(i.dtype)
        if dt.kind == "f":
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            feeds[i.name] = rng.random(shape) < 0.5
        else:
            feeds[i.name] = rng.integers(0, 10, shape).astype(dt)
    return feeds


def _shape(spec: IOSpec, given: list | None) -> list[int]:
    """A random input's shape: the model's, with ``given`` (``--input-shape``) for its
    symbolic dims."""
    model = list(spec.shape)
    if given is None:
        if not all(isinstance(d, int) for d in model):
            raise CommandLineError(f"--random: input '{spec.name}' has a symbolic shape "
                                   f"{model}; give --input-shape {spec.name}:"
                                   f"{','.join(str(d) if isinstance(d, int) else 'N' for d in model)}")
        return model
    if len(given) != len(model) or not all(isinstance(d, int) and d >= 0 for d in given) or \
            any(isinstance(m, int) and m != g for m, g in zip(model, given)):
        raise CommandLineError(f"--input-shape {spec.name}:{','.join(map(str, given))} does "
                               f"not fit the input's shape {model}")
    return given
