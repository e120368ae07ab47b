"""Compressor options from Python keywords: the C++ option table (the one `gradscope train` takes
its --stages, --bits, --variance-alpha, ... from) names them and parses them, so the names here
are the table's keys (stages, bits, variance_alpha, fft_chunk, backend, seed, ...)."""

from . import _gradscope

_ROWS = {row["key"]: row for row in _gradscope.compressor_options()}


def option_texts(options):
    """{key: text} for the C++ table, from keyword values (numbers, strings, lists of ints)."""
    texts = {}
    for key, value in options.items():
        row = _ROWS.get(key)
        if row is None:
            raise TypeError(f"unknown compressor option {key!r}: the options are {', '.join(_ROWS)}")
        if row["list"]:
            values = [value] if isinstance(value, int) else list(value)
            texts[key] = ",".join(str(int(v)) for v in values)
        elif isinstance(value, bool):
            texts[key] = "1" if value else "0"
        else:
            texts[key] = repr(value) if isinstance(value, float) else str(value)
    return texts


def compressor_rows():
    """The registry rows ({name, summary, exchange, density_based, sparse_selection, available})."""
    return _gradscope.compressors()


def sparse_selection_names():
    return [r["name"] for r in compressor_rows() if r["sparse_selection"] and r["available"]]


def compressor_names():
    return [r["name"] for r in compressor_rows() if r["available"]]
