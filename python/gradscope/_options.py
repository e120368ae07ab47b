"""Options from Python keywords, read through the C++ option tables: the compressor options (the
table `gradscope train` takes its --stages, --bits, --variance-alpha, ... from) and the options of
`gradscope analyze` (--ratios, --dists, --ks-max-points, ...). The tables name them and parse them,
so the keywords are the tables' keys (the flag without "--", '-' as '_')."""

import os

from . import _gradscope

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
        single = isinstance(value, (str, bytes)) or not hasattr(value, "__iter__")
        values = [value] if single else list(value)
        return ",".join(_item(row["kind"], v) for v in values)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value) if isinstance(value, float) else str(value)


def _item(kind, v):
    if kind == "int_list":
        return str(int(v))
    if kind == "real_list":
        return repr(float(v))
    return str(v)


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
    """The registry rows ({name, summary, exchange, density_based, sparse_selection, available})."""
    return _gradscope.compressors()


def sparse_selection_names():
    return [r["name"] for r in compressor_rows() if r["sparse_selection"] and r["available"]]


def compressor_names():
    return [r["name"] for r in compressor_rows() if r["available"]]
