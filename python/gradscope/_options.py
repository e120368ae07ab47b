"""Compressor options from Python keywords: the C++ option table (the one `gradscope train` takes
its --stages, --bits, --variance-alpha, ... from) names them and parses them, so the names here
are the table's keys (stages, bits, variance_alpha, fft_chunk, backend, seed, ...)."""

from . import _gradscope
from ._tensors import check_density

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
    row = next(r for r in compressor_rows() if r["name"] == method)
    if row["density_based"]:
        return check_density(default if ratio is None else ratio)
    if ratio is not None and check_density(ratio) != 1.0:
        raise ValueError(f"ratio {ratio!r} does nothing for compressor {method!r}: it is not "
                         "density-based (what it sends does not depend on a density); leave ratio out")
    return 1.0


def sparse_selection_names():
    return [r["name"] for r in compressor_rows() if r["sparse_selection"] and r["available"]]


def compressor_names():
    return [r["name"] for r in compressor_rows() if r["available"]]
