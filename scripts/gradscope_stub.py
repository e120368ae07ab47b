"""Writes python/gradscope/_gradscope.pyi, the type stub of the _gradscope extension, from the
signatures pybind11 gives each function, method and property in its docstring, so that type
checkers (mypy, Pyright) and IDEs see what the extension takes and returns. The stub is made, not
written by hand: tests/python/test_api.py checks that the committed one is what this script makes
from the built module.

    PYTHONPATH=build/python python3 scripts/gradscope_stub.py [--out python/gradscope/_gradscope.pyi]
"""

import argparse
import inspect
import re
import sys

MODULE = "gradscope._gradscope"
HEADER = '''"""Type stub of gradscope's C++ extension, made by scripts/gradscope_stub.py from the built
module's pybind11 signatures (do not edit: run the script)."""

from typing import Any, Dict, List, Optional, Tuple

import numpy

'''
# pybind11's names for what a stub must spell otherwise
_TYPES = [(re.compile(r"numpy\.ndarray\[[^\]]*\]"), "numpy.ndarray"), (re.compile(MODULE + r"\."), "")]
_SIGNATURE = re.compile(r"^(\w+)\((.*)\) -> (.+)$")


def _clean(text):
    for pattern, plain in _TYPES:
        text = pattern.sub(plain, text)
    return text


def _split_arguments(text):
    """The arguments of a signature, split at the commas outside brackets and quotes."""
    out, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "[({":
            depth += 1
        elif c in "])}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _argument(text, first_is_self):
    """One argument as the stub writes it: defaults become `...` (the stub says that there is one)."""
    name, _, rest = text.partition(":")
    annotation, has_default, _ = rest.partition("=")
    name = "self" if first_is_self else name.strip()
    if first_is_self:
        return name
    return f"{name}: {_clean(annotation.strip())}" + (" = ..." if has_default else "")


def _signatures(obj, name):
    """The (arguments, result) pairs of a pybind11 function's docstring (several when overloaded)."""
    found = []
    for line in (inspect.getdoc(obj) or "").splitlines():
        line = re.sub(r"^\d+\. ", "", line.strip())
        m = _SIGNATURE.match(line)
        if m and m.group(1) == name:
            found.append((m.group(2), m.group(3)))
    return found


def _function(obj, name, indent, method):
    lines = []
    signatures = _signatures(obj, name)
    if not signatures:
        raise SystemExit(f"gradscope_stub: no signature in the docstring of {name}")
    for arguments, result in signatures:
        args = _split_arguments(arguments)
        written = [_argument(a, method and i == 0) for i, a in enumerate(args)]
        if len(signatures) > 1:
            lines.append(f"{indent}@overload")
        lines.append(f"{indent}def {name}({', '.join(written)}) -> {_clean(result)}: ...")
    return lines


def _property(prop, name, indent):
    doc = (prop.fget.__doc__ or "").strip().splitlines()
    m = re.match(r"^\(.*\) -> (.+)$", doc[0]) if doc else None
    kind = _clean(m.group(1)) if m else "Any"
    return [f"{indent}@property", f"{indent}def {name}(self) -> {kind}: ..."]


def _class(cls):
    lines = [f"class {cls.__name__}:"]
    for name, obj in cls.__dict__.items():
        if name.startswith("__") and name != "__init__":
            continue
        if isinstance(obj, property):
            lines += _property(obj, name, "    ")
        elif isinstance(obj, staticmethod):
            lines.append("    @staticmethod")
            lines += _function(obj.__func__, name, "    ", method=False)
        elif callable(obj):
            lines += _function(obj, name, "    ", method=True)
    if len(lines) == 1:
        lines.append("    ...")
    return lines


def stub(module):
    """The stub's text for the module."""
    lines = [f"{name}: str" for name in ("__version__",) if isinstance(getattr(module, name, None), str)]
    lines += [""] if lines else []
    names = sorted(n for n in dir(module) if not n.startswith("__"))
    for name in names:
        obj = getattr(module, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            base = obj.__mro__[1].__name__
            lines += [f"class {name}({base}): ...", ""]
        elif isinstance(obj, type):
            lines += _class(obj) + [""]
        elif callable(obj):
            lines += _function(obj, name, "", method=False) + [""]
        else:
            lines += [f"{name}: Any", ""]
    text = HEADER + "\n".join(lines).rstrip() + "\n"
    if "@overload" in text:
        text = text.replace("from typing import Any,", "from typing import Any, overload,")
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="python/gradscope/_gradscope.pyi")
    opts = p.parse_args()
    import gradscope._gradscope as module

    text = stub(module)
    with open(opts.out, "w") as f:
        f.write(text)
    print(f"gradscope_stub: {opts.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
