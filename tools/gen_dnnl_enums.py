"""Generate ``executor/kernels/dnnl/enums.py`` from the oneDNN C headers.

The headers come from the ``onednn-devel-cpu-gomp`` wheel of the same version as the
runtime wheel the binding loads::

    pip download --no-deps onednn-devel-cpu-gomp==2023.2.0 -d /tmp/dnnl
    python tools/gen_dnnl_enums.py /tmp/dnnl/onednn_devel_cpu_gomp-2023.2.0-*.whl

The argument is the wheel or a directory holding ``oneapi/dnnl/dnnl_types.h``.  The
enumerators are evaluated the way a C compiler numbers them (implicit increments,
references to earlier enumerators, ``#ifdef`` blocks resolved with the macros
``dnnl_config.h`` defines); only the enums and members the binding needs are written.
"""
from __future__ import annotations

import argparse
import keyword
import re
import sys
import zipfile
from pathlib import Path

HEADERS = ("dnnl_config.h", "dnnl_version.h", "dnnl_common_types.h", "dnnl_types.h")
OUT = Path(__file__).resolve().parents[1] / "executor" / "kernels" / "dnnl" / "enums.py"

#: C enum -> (Python class, base, prefix stripped after ``dnnl_``, what the class holds).
ENUMS = {
    "dnnl_status_t": ("Status", "IntEnum", "", "status codes of every C call"),
    "dnnl_data_type_t": ("DataType", "IntEnum", "data_type_", "element types"),
    "dnnl_format_kind_t": ("FormatKind", "IntEnum", "format_kind_", "kinds of memory format"),
    "dnnl_format_tag_t": ("FormatTag", "IntEnum", "format_tag_",
                          "plain format tags and their named aliases (the letters name the\n"
                          "    logical dims, a the outermost, in memory order, the last one\n"
                          "    contiguous); blocked tags are left out"),
    "dnnl_prop_kind_t": ("PropKind", "IntEnum", "prop_kind_", "propagation kinds"),
    "dnnl_primitive_kind_t": ("PrimitiveKind", "IntEnum", "", "primitive kinds"),
    "dnnl_alg_kind_t": ("AlgKind", "IntEnum", "alg_kind_", "algorithms of every primitive"),
    "dnnl_normalization_flags_t": ("NormFlags", "IntFlag", "normalization_flags_",
                                   "flags of batch and layer normalization"),
    "dnnl_scratchpad_mode_t": ("ScratchpadMode", "IntEnum", "scratchpad_mode_",
                               "who allocates a primitive's scratchpad"),
    "dnnl_fpmath_mode_t": ("FpmathMode", "IntEnum", "fpmath_mode_",
                           "implicit down-conversions a primitive may do"),
    "dnnl_query_t": ("Query", "IntEnum", "query_",
                     "what primitive- and memory-descriptor queries ask for"),
    "dnnl_engine_kind_t": ("EngineKind", "IntEnum", "", "engine kinds"),
    "dnnl_stream_flags_t": ("StreamFlags", "IntFlag", "stream_", "stream flags"),
    "dnnl_cpu_isa_t": ("CpuIsa", "IntEnum", "cpu_isa_", "CPU instruction-set levels"),
    "dnnl_rnn_direction_t": ("RnnDirection", "IntEnum", "", "directions of the RNN primitives"),
}


#: Format-tag aliases named for RNN tensors (the binding names them by their plain tags:
#: ``tnc`` is ``abc``, ``ldigo`` ``abcde``).
RNN_TAGS = {"tn", "nt", "tnc", "ntc", "ldnc", "ldigo", "ldgoi", "ldio", "ldoi", "ldgo"}


def keep(c_enum: str, name: str, value: int) -> bool:
    """Whether a member (C name less ``dnnl_``) goes into the generated module."""
    if keyword.iskeyword(name):
        return False
    if value == 0x7FFF and name.endswith("_max"):           # range sentinels
        return False
    if c_enum == "dnnl_format_tag_t" and name in RNN_TAGS:
        return False
    if c_enum == "dnnl_format_tag_t":
        return name in ("format_tag_undef", "format_tag_any") or re.fullmatch("[a-z]+", name) \
            is not None and name != "format_tag_last"
    if c_enum == "dnnl_alg_kind_t":
        return not name.endswith("_use_dst_for_bwd") and not name.startswith(("vanilla_", "lbr_"))
    return True


def keep_arg(name: str) -> bool:
    """Execution-argument ids: forward ones only (no gradients; the RNN primitives' names
    of ``src_0``, ``weights_0``... are :class:`~aircc.executor.kernels.dnnl.ops.RnnArg`)."""
    rnn = ("LAYER", "ITER", "AUGRU", "PEEPHOLE", "PROJECTION")
    return not name.startswith("DIFF_") and name not in ("FROM", "TO") \
        and not any(word in name for word in rnn)


def read_headers(source: Path) -> dict[str, str]:
    """Header name -> text, from a wheel or an include directory."""
    texts = {}
    if source.is_file():
        with zipfile.ZipFile(source) as wheel:
            for member in wheel.namelist():
                if "/include/oneapi/dnnl/" in member and member.rsplit("/", 1)[1] in HEADERS:
                    texts[member.rsplit("/", 1)[1]] = wheel.read(member).decode()
    else:
        root = source / "oneapi" / "dnnl" if (source / "oneapi").is_dir() else source
        texts = {h: (root / h).read_text() for h in HEADERS if (root / h).is_file()}
    missing = [h for h in HEADERS if h not in texts]
    if missing:
        raise SystemExit(f"{source}: no {', '.join(missing)} (expected the oneDNN headers)")
    return texts


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def resolve_conditionals(text: str, defined: set[str]) -> str:
    """Drop the lines of ``#ifdef``/``#ifndef``/``#if 0`` blocks that are off."""
    out, stack = [], []
    for line in text.splitlines():
        directive = line.strip()
        if directive.startswith("#ifdef"):
            stack.append(directive.split()[1] in defined)
        elif directive.startswith("#ifndef"):
            stack.append(directive.split()[1] not in defined)
        elif directive.startswith("#if"):
            stack.append(directive.split()[1:2] != ["0"])
        elif directive.startswith("#else"):
            stack[-1] = not stack[-1]
        elif directive.startswith("#endif"):
            stack.pop()
        elif all(stack):
            out.append(line)
    return "\n".join(out)


def evaluate(expr: str, symbols: dict[str, int]) -> int:
    expr = expr.strip().strip("()")
    if expr in symbols:
        return symbols[expr]
    literal = re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)[uU]?", expr)
    if literal is None:
        raise SystemExit(f"cannot evaluate enumerator value {expr!r}")
    return int(literal.group(1), 0)


def parse_enums(text: str, symbols: dict[str, int]) -> dict[str, list[tuple[str, int]]]:
    """typedef name -> [(enumerator, value)], in declaration order; ``symbols`` gains
    every enumerator."""
    enums = {}
    for body, typedef in re.findall(r"typedef\s+enum\s*\{(.*?)\}\s*(\w+)\s*;", text, re.DOTALL):
        members, value = [], -1
        for item in filter(None, (i.strip() for i in body.split(","))):
            name, _, expr = (p.strip() for p in item.partition("="))
            value = evaluate(expr, symbols) if expr else value + 1
            symbols[name] = value
            members.append((name, value))
        enums[typedef] = members
    return enums


def parse_args_macros(text: str) -> list[tuple[str, int]]:
    """``#define DNNL_ARG_X value`` -> [(X, value)] (function-like macros skipped)."""
    symbols: dict[str, int] = {}
    out = []
    for name, expr in re.findall(r"#define\s+DNNL_ARG_(\w+)[ \t]+([^\n\\]+)", text):
        value = evaluate(expr.strip().replace("DNNL_ARG_", ""), symbols)
        symbols[name] = value
        out.append((name, value))
    return out


def member_name(c_name: str, prefix: str) -> str:
    name = c_name[len("dnnl_"):]
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def generate(source: Path) -> str:
    texts = read_headers(source)
    config = strip_comments(texts["dnnl_config.h"])
    defined = set(re.findall(r"^\s*#define\s+(\w+)", config, re.MULTILINE))
    version = tuple(int(re.search(rf"#define\s+DNNL_VERSION_{part}\s+(\d+)",
                                  texts["dnnl_version.h"]).group(1))
                    for part in ("MAJOR", "MINOR", "PATCH"))
    commit = re.search(r'#define\s+DNNL_VERSION_HASH\s+"(\w+)"', texts["dnnl_version.h"]).group(1)
    max_ndims = int(re.search(r"#define\s+DNNL_MAX_NDIMS\s+(\d+)",
                              texts["dnnl_common_types.h"]).group(1))
    symbols: dict[str, int] = {}
    enums = {}
    for header in ("dnnl_common_types.h", "dnnl_types.h"):
        enums.update(parse_enums(resolve_conditionals(strip_comments(texts[header]), defined),
                                 symbols))
    args = parse_args_macros(strip_comments(texts["dnnl_types.h"]))
    v = ".".join(map(str, version))
    lines = [
        f'"""oneDNN {v} C enums and constants, for the ctypes binding.',
        "",
        "GENERATED by tools/gen_dnnl_enums.py from include/oneapi/dnnl/dnnl_common_types.h and",
        f"dnnl_types.h of the onednn-devel-cpu-gomp 2023.2.0 wheel (oneDNN {v}, commit",
        f"{commit[:12]}); do not edit, run it again: ``pip download --no-deps",
        "onednn-devel-cpu-gomp==2023.2.0`` then ``python tools/gen_dnnl_enums.py <the wheel>``.",
        "Member names are the C names without ``dnnl_`` and the enum's own prefix",
        "(``dnnl_format_tag_any`` -> ``FormatTag.any``, ``DNNL_ARG_WEIGHTS`` -> ``Arg.weights``).",
        '"""',
        "from __future__ import annotations",
        "",
        "from enum import IntEnum, IntFlag",
        "",
        f"VERSION = {version!r}",
        f"MAX_NDIMS = {max_ndims}",
        '"""Most dimensions a memory descriptor has (the length of ``dnnl_dims_t``)."""',
    ]
    for c_enum, (cls, base, prefix, what) in ENUMS.items():
        if c_enum not in enums:
            raise SystemExit(f"{source}: no enum {c_enum}")
        doc = f'    """{what[0].upper() + what[1:]} ({c_enum})."""'
        lines += ["", "", f"class {cls}({base}):", doc]
        lines += [f"    {member_name(n, prefix)} = {hex(val) if base == 'IntFlag' else val}"
                  for n, val in enums[c_enum] if keep(c_enum, n[len("dnnl_"):], val)]
    lines += ["", "", "class Arg(IntEnum):",
              '    """Execution-argument ids (DNNL_ARG_*); a binary post-op\'s src1 is',
              '    ``post_op_arg(index)``."""']
    lines += [f"    {n.lower()} = {val}" for n, val in args if keep_arg(n)]
    lines += ["", "", "def post_op_arg(index: int, arg: int = Arg.src_1) -> int:",
              '    """The execution-argument id of input ``arg`` of post-op ``index``."""',
              "    return Arg.attr_multiple_post_op_base * (index + 1) | arg", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="onednn-devel wheel or include directory")
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    ns = parser.parse_args(argv)
    ns.output.write_text(generate(ns.source))
    print(f"wrote {ns.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
