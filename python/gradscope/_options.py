"""Options from Python keywords, read through the C++ option tables: the compressor options (the
table `gradscope train` takes its --stages, --bits, --variance-alpha, ... from) and the options of
`gradscope analyze` (--ratios, --dists, --ks-max-points, ...). The tables name them and parse them,
so the keywords are the tables' keys (the flag without "--", '-' as '_')."""

import numbers
import os

from . import _gradscope
from ._tensors import real_ratio

_ROWS = {row["key"]: row for row in _gradscope.compressor_options()}


def table_texts(rows, options, what):
    """{key: text} for a C++ table ({key: row}), from keyword values (numbers, strings, paths,
    switches, lists). An unknown keyword is a TypeError listing the valid ones."""
    texts = {}
    for key, value in options.items():
        row = rows.get(key)
        if row is None:
            raise TypeError(f"unknown {what} {key!r}: the options are {', '.join(rows)}")
        texts[key] = _text(row, value)
    return texts


def _text(row, value):
    if row["list"]:
        if isinstance(value, str):  # the command line's comma list: the table parses and checks it
            return value
        single = isinstance(value, bytes) or not hasattr(value, "__iter__")
        values = [value] if single else list(value)
        return ",".join(_item(row["kind"], v) for v in values)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value) if isinstance(value, float) else str(value)


def _item(kind, v):
    # Numbers exactly as Python holds them; anything else as text, which the table refuses in a
    # message naming the option (ratios='x' is not a number).
    if kind in ("int_list", "real_list") and isinstance(v, numbers.Real) and not isinstance(v, bool):
        return str(int(v)) if kind == "int_list" else repr(float(v))
    return str(v)


def typed_option(key, text):
    """A compressor option's text (as the C++ table holds it) as a Python value: 2 for stages "2",
    True for a switch's "1"; None stays None (not given)."""
    return None if text is None else typed_default(dict(_ROWS[key], default=text))


def typed_default(row):
    """A row's default as a Python value (the tables hold it as text)."""
    text, kind = row["default"], row["kind"]
    if row["list"]:
        items = text.split(",") if text else []
        convert = {"int_list": int, "real_list": float}.get(kind, str)
        return [convert(v) for v in items]
    if kind == "flag":
        return text == "1"
    return {"integer": int, "real": float}.get(kind, str)(text)


def option_texts(options):
    """{key: text} of compressor options, for the C++ table."""
    return table_texts(_ROWS, options, "compressor option")


def compressor_rows():
    """The registry rows ({name, summary, exchange, density_based, sparse_selection, options,
    available}); options: the keys of the options the compressor reads."""
    return _gradscope.compressors()


def check_options_read(method, options, also=()):
    """gradscope.Error when `options` ({key: value}, as given by the caller) sets an option away
    from its default that `method` does not read, naming it and the ones the method reads: the C++
    rule (gs::compress::check_options_read) `gradscope train` applies to its flags. `also`: keys
    the caller reads itself whatever the method."""
    _gradscope.check_options_read(method, option_texts(options), list(also))


def density_for(method, ratio, default):
    """The density a compressor runs at, from the ratio given (None: not given). A method whose
    density sets what it sends (the registry's density_based) takes ratio in (0, 1], `default`
    when not given; any other (none, the quantizers, variance) sends what it sends whatever the
    ratio, so it runs at 1 and refuses any other ratio (it would do nothing)."""
    return _gradscope.density_for(method, None if ratio is None else real_ratio(ratio), default)


def sparse_selection_names():
    return [r["name"] for r in compressor_rows() if r["sparse_selection"] and r["available"]]


def density_based(method):
    """Whether the compressor's density sets what it sends (the registry's density_based)."""
    return any(r["name"] == method and r["density_based"] for r in compressor_rows())


def compressor_names():
    return [r["name"] for r in compressor_rows() if r["available"]]
