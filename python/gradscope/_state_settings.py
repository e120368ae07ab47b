"""gradscope.ddp.State's keywords as one table (SETTINGS). Each row names a keyword and says how its
value is checked and kept, its default, where the state_dict keeps it and whether load_state_dict
insists on it, how the C++ core gets it, whether every rank must share it, and what it means. The
State's signature and help, its state_dict, load_state_dict's comparison, pickling and the
settings the ranks compare at the first bucket are all made from the rows: a new keyword is one
row (and, where the core takes it, its setter in python/src/ddp.cpp)."""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import textwrap
from typing import Any, Callable

import torch.distributed as dist

from . import _gradscope
from ._options import check_options_read, compressor_names, density_for, option_texts, typed_option

FORMAT = "gradscope.ddp.State/3"
_P = inspect.Parameter


class _Typed:
    """A row's conversion by type: the value as `to` makes it when `accepts` it, else a TypeError
    naming the row and what it takes (`kind`). A bool is no number here, and text is no number
    either."""

    def __init__(self, accepts, kind, to=lambda value: value):
        self.accepts, self.kind, self.to = accepts, kind, to

    def __call__(self, value, name):
        if not self.accepts(value):
            raise TypeError(f"{name} must be {self.kind}, got {type(value).__name__} {value!r}")
        return self.to(value)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One keyword of gradscope.ddp.State."""

    name: str
    default: Any = None
    convert: Callable | None = None  # the value as given -> as the State keeps it (None: as given; _Typed: by type)
    check: Callable | None = None  # raises for a bad value as given (its message names the value given)
    saved: str | bool = True  # its state_dict key (True: its name; False: not saved); rows sharing a key save one tuple
    match: bool = True  # load_state_dict refuses a state_dict saved with another value
    older: Any = None  # its value in the state_dicts saved before the row existed
    core: str | None = None  # "new": an argument of BucketCompressor(...), else the setter it goes to (in row order)
    shared: bool = False  # compared across the ranks at the first bucket (as text: a float's repr, else str)
    pickled: bool = False  # pickled as given beside the state_dict (what the state_dict does not hold)
    attr: str | None = None  # the State's public attribute holding it
    kind: Any = (
        _P.KEYWORD_ONLY
    )  # POSITIONAL_OR_KEYWORD: method, ratio; VAR_KEYWORD: the **options; None: read from them
    doc: str = ""  # its paragraph of State's help

    @property
    def key(self):
        return self.name if self.saved is True else self.saved

    def converted(self, value):
        """The value as the State keeps it."""
        if self.convert is None:
            return value
        if isinstance(self.convert, _Typed):
            return self.convert(value, self.name)
        return self.convert(value)


def _check_method(method):
    names = compressor_names()
    if method not in names:
        raise ValueError(f"unknown compressor {method!r}: use one of {', '.join(names)}")


def _check_timeout(timeout):
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be a number of seconds, got {type(timeout).__name__} {timeout!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")


def _check_history(history):
    if isinstance(history, numbers.Integral) and history < 1:  # not a whole number: the conversion says so
        raise ValueError(f"history must be >= 1 (steps kept in state.steps), got {history!r}")


def _number(value, kind):
    return isinstance(value, kind) and not isinstance(value, bool)


_REAL = _Typed(lambda v: _number(v, numbers.Real), "a real number", float)
_WHOLE = _Typed(lambda v: _number(v, numbers.Integral), "a whole number", int)
_TEXT = _Typed(lambda v: isinstance(v, str), "a string")
_SWITCH = _Typed(lambda v: isinstance(v, bool), "True or False")


def _option_texts(options):
    """The compressor options as the C++ table reads them; backend "auto" unless given."""
    return option_texts(dict({"backend": "auto"}, **options))


SETTINGS = (
    Setting(
        "method",
        "sidco-e",
        check=_check_method,
        core="new",
        shared=True,
        attr="method",
        kind=_P.POSITIONAL_OR_KEYWORD,
        doc="any name of `gradscope train --compressor` (gradscope.compressor_names()).",
    ),
    Setting(
        "ratio",
        None,
        core="new",
        shared=True,
        attr="ratio",
        kind=_P.POSITIONAL_OR_KEYWORD,  # density_for
        doc="the density, the fraction of elements to send, in (0, 1]; default None: 0.01. A method "
        "that is not density-based (none, the quantizers, variance) runs at 1 and refuses any other.",
    ),
    Setting(
        "process_group",
        saved=False,
        doc="the ranks to average over (default: the whole job). The hook's collectives run on a group "
        "of their own over the same ranks, made at the first bucket, where every worker is: making "
        "a State does no communication, so workers may make it anywhere after init_process_group, "
        "which it needs. A group is made by the whole job (torch.distributed.new_group), so with a "
        "subgroup pass hook_group=, a group you made for the hook alone.",
    ),
    Setting(
        "variance",
        saved=False,
        pickled=True,
        attr="variance",
        doc='for method "variance", a callable(bucket) returning the bucket\'s per-element sum of squared '
        "per-sample gradients / B^2 (a tensor like bucket.buffer()).",
    ),
    Setting(
        "options",
        {},
        convert=_option_texts,
        core="new",
        pickled=True,
        kind=_P.VAR_KEYWORD,
        doc="the compressor options of the C++ table (stages, sidco_as_published, sidco_estimate, bits, "
        "variance_alpha, variance_zeta, fft_exponent_bits, fft_mantissa_bits, fft_chunk, backend, seed); "
        "the seed is made per worker. "
        "An option the method does not read (bits for sidco-e; the registry's row says which it reads) "
        "is refused, as `gradscope train` refuses its flag; backend is read for every method. backend: "
        'where the selection runs, "auto" (the default: the GPU when there is a usable one), "cuda", '
        '"cpu" (a CUDA bucket is then copied to the host and its update back) or "cuda-host" (the CUDA '
        "path's code on the host, rank r's buckets on fake device r: for checking that path without a GPU).",
    ),
    Setting("seed", 1, convert=_WHOLE, shared=True, kind=None),  # one stream a worker: Settings.make_core
    Setting(
        "warmup_steps",
        0,
        convert=_WHOLE,
        saved="warmup",
        core="new",
        shared=True,
        doc='warmup_steps, warmup ("dense" | "exponential"), warmup_start_ratio: as `gradscope train '
        "--warmup-steps --warmup-schedule --warmup-start-ratio`.",
    ),
    Setting("warmup", "dense", convert=_TEXT, saved="warmup", core="new", shared=True),
    Setting("warmup_start_ratio", 0.25, convert=_REAL, saved="warmup", core="new", shared=True),
    Setting(
        "history",
        1000,
        convert=_WHOLE,
        check=_check_history,
        match=False,
        core="new",
        doc="how many recent steps state.steps keeps (summary() covers every step).",
    ),
    Setting(
        "timeout",
        None,
        convert=lambda t: None if t is None else float(t),
        check=_check_timeout,
        saved=False,
        pickled=True,
        attr="timeout",
        doc="seconds any of the hook's collectives may wait for the other workers (default: the default "
        "process group's, init_process_group(timeout=...)).",
    ),
    Setting("hook_group", saved=False),  # with process_group
    Setting(
        "device_timing",
        False,
        convert=_SWITCH,
        saved=False,
        attr="device_timing",
        doc="time each CUDA bucket's compress and exchange with CUDA events on the hook's stream " "(device_ms()).",
    ),
    Setting(
        "density_schedule",
        "constant",
        convert=_TEXT,
        saved="density_schedule",
        core="set_density_schedule",
        shared=True,
        doc='density_schedule ("constant" | "accordion"), density_high, density_interval, density_eta: as '
        "`gradscope train --density-schedule --density-high --density-interval --density-eta`: after "
        "the warm-up, Accordion's density_high in critical regimes, `ratio` otherwise.",
    ),
    Setting(
        "density_high",
        0.1,
        convert=_REAL,
        saved="density_schedule",
        core="set_density_schedule",
        shared=True,
    ),
    Setting(
        "density_interval",
        20,
        convert=_WHOLE,
        saved="density_schedule",
        core="set_density_schedule",
        shared=True,
    ),
    Setting(
        "density_eta",
        0.5,
        convert=_REAL,
        saved="density_schedule",
        core="set_density_schedule",
        shared=True,
    ),
    Setting(
        "momentum_correction",
        0.0,
        convert=_REAL,
        core="set_momentum_correction",
        shared=True,
        attr="momentum_correction",
        doc="DGC's momentum correction (as `gradscope train --momentum-correction`): the momentum each "
        "worker keeps before sparsification, per parameter (0: off). The optimizer must then have no "
        "momentum of its own: at its first bucket the State looks for the optimizers holding the "
        "bucket's parameters and refuses the step when one keeps a momentum (SGD's momentum, Adam-like "
        "betas[0]), unless optimizer_momentum_ok=True (check_optimizer says why, and what to do with Adam).",
    ),
    Setting(
        "optimizer_momentum_ok",
        False,
        convert=_SWITCH,
        saved=False,
        pickled=True,
        attr="optimizer_momentum_ok",
    ),
    Setting(
        "when",
        "always",
        convert=_TEXT,
        saved="when",
        older="always",
        core="set_compress_when",
        shared=True,
        doc='when ("always" | "auto"), when_interval: as `gradscope train --compress-when '
        '--compress-when-interval`: with "auto" a step sends dense while dense is the faster exchange '
        "(both timed, the choice the same on every rank), and looks at the other mode from time to time "
        "(every when_interval steps, times the ratio of the two times).",
    ),
    Setting(
        "when_interval",
        50,
        convert=_WHOLE,
        saved="when",
        older=50,
        core="set_compress_when",
        shared=True,
    ),
    Setting(
        "exchange",
        "allgather",
        convert=_TEXT,
        older="allgather",
        core="set_exchange",
        shared=True,
        attr="exchange_mode",
        doc='exchange ("allgather" | "shared" | "sparse-allreduce" | "auto"): as `gradscope train --exchange`: '
        "\"shared\" all-reduces every rank's values at one set of indices per bucket (a rotating leader's "
        'selection); "sparse-allreduce" has each rank sum one region of the indices (sent to it by '
        "all-to-all) and all-gathers the largest sums (up to 3k). Either keeps a rank's bytes near 2k "
        'to 4k pairs whatever the ranks, where the all-gather\'s grow with them. "auto": of the '
        "all-gather and the sparse all-reduce, the one of fewer link bytes at this number of ranks and "
        "density.",
    ),
)

# Keywords that act only beside another keyword's value: given away from their default without it,
# they would do nothing, so they are refused. {keyword: (the other keyword, its test, the words)}.
# (The core refuses the density schedule's and the warm-up's own, as `gradscope train` does.)
COMPANIONS = {
    "when_interval": ("when", lambda v: v == "auto", 'when="auto"'),
    "optimizer_momentum_ok": ("momentum_correction", lambda v: v > 0, "momentum_correction > 0"),
}

_SAVED: dict[str, list[Setting]] = {}  # state_dict key -> its rows, in row order (one tuple where several)
for _row in SETTINGS:
    if _row.saved:
        _SAVED.setdefault(_row.key, []).append(_row)
# State's signature as the rows make it: method and ratio by position or keyword, every other row by
# keyword only (a new row changes no positional call), the compressor options last (**options).
# gradscope.ddp.State.__init__ spells it out, annotated; a test checks that the two agree.
SIGNATURE = inspect.Signature(
    [
        _P(row.name, row.kind, default=row.default)
        for kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)
        for row in SETTINGS
        if row.kind is kind
    ]
    + [_P(row.name, row.kind) for row in SETTINGS if row.kind is _P.VAR_KEYWORD]
)


def _joined(values):
    """One row's value, or a tuple of the values of rows that share a state_dict key."""
    return values[0] if len(values) == 1 else tuple(values)


def help_text(width=100):
    """The keywords' paragraphs of State's help, from the rows (a paragraph that names its
    keywords itself, as one on several rows does, is taken as it is)."""
    texts = (row.doc if row.doc.startswith(row.name) else f"{row.name}: {row.doc}" for row in SETTINGS if row.doc)
    return "".join(
        textwrap.fill(
            text,
            width,
            initial_indent="    ",
            subsequent_indent="        ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        + "\n"
        for text in texts
    )


class Settings:
    """A State's settings: each row's value as given (`given`) and as kept (`values`, also the
    attributes of the rows' names), and what the State makes of them."""

    def __init__(self, *args, **kwargs):
        bound = SIGNATURE.bind(*args, **kwargs)  # Python's own TypeError for a call State would refuse
        bound.apply_defaults()
        given = dict(bound.arguments)
        for row in SETTINGS:  # each value alone; no process group is needed to refuse one
            if row.check is not None:
                row.check(given[row.name])
        check_options_read(given["method"], given["options"], also=("backend",))  # backend: where buckets stay
        given["options"] = options = dict(given["options"])
        for row in SETTINGS:
            if row.kind is None:
                given[row.name] = options.pop(row.name, row.default)
        values = {row.name: row.converted(given[row.name]) for row in SETTINGS}
        defaults = {row.name: row.converted(row.default) for row in SETTINGS}
        for name, (other, acts, words) in COMPANIONS.items():
            if values[name] != defaults[name] and not acts(values[other]):
                raise ValueError(
                    f"{name}={given[name]!r} does nothing with {other}={values[other]!r}: give "
                    f"{words} too, or leave {name} out"
                )
        ratio = density_for(given["method"], given["ratio"], default=0.01)
        if not dist.is_initialized():
            raise _gradscope.Error(
                "gradscope.ddp.State needs torch.distributed: call " "torch.distributed.init_process_group first"
            )
        self.given = given
        self.values = values
        self.values["ratio"] = ratio

    def __getattr__(self, name):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def public(self):
        """{attribute: value} of the State's public attributes."""
        return {row.attr: self.values[row.name] for row in SETTINGS if row.attr}

    def make_core(self, rank):
        """The C++ core with these settings, its seed this rank's own (one sampling stream a worker)."""
        values = dict(self.values, options=dict(self.options, seed=str(_gradscope.worker_seed(self.seed, rank))))
        calls = {}
        for row in SETTINGS:
            if row.core:
                calls.setdefault(row.core, []).append(values[row.name])
        core = _gradscope.BucketCompressor(*calls.pop("new"))
        for setter, arguments in calls.items():
            getattr(core, setter)(*arguments)
        return core

    def saved(self):
        """The settings as the state_dict holds them: {key: value}, a tuple where rows share a key."""
        values = {name: dict(v) if isinstance(v, dict) else v for name, v in self.values.items()}  # options: a copy
        return {key: _joined([values[row.name] for row in rows]) for key, rows in _SAVED.items()}

    def check_saved(self, d, mine):
        """gradscope.Error unless state_dict d was saved with these settings (the rows that must
        match) and with `mine` ({key: value}: the rank and world size)."""
        for key, value in dict(self.saved(), **mine).items():
            rows = _SAVED.get(key, [])
            if rows and not rows[0].match:
                continue
            theirs = d.get(key, _joined([row.older for row in rows]) if rows else None)
            theirs = tuple(theirs) if len(rows) > 1 else theirs
            if theirs == value:
                continue
            if key == "options" and isinstance(theirs, dict):  # the option that differs, as Python writes it
                for option in sorted(set(theirs) | set(value)):
                    a, b = theirs.get(option), value.get(option)
                    if a != b:
                        key, theirs, value = option, typed_option(option, a), typed_option(option, b)
                        break
            raise _gradscope.Error(
                f"the state_dict was saved with {key}={theirs!r}, this State has "
                f"{key}={value!r}: load each rank's own state into a State made "
                "with the same settings"
            )

    def pickled(self):
        """What pickles beside the state_dict: the rows it does not hold, as given."""
        return {row.name: self.given[row.name] for row in SETTINGS if row.pickled}

    @staticmethod
    def keywords(saved, pickled):
        """State's keywords from a state_dict and the pickled rows (what a pickle of an older
        gradscope lacks takes the row's older value, or its default)."""
        keywords = {}
        for row in SETTINGS:
            if row.pickled:
                value = pickled.get(row.name, row.default)
            elif row.saved:
                rows = _SAVED[row.key]
                if row.key not in saved:
                    value = row.older
                else:
                    value = saved[row.key] if len(rows) == 1 else saved[row.key][rows.index(row)]
            else:
                continue
            if row.kind is _P.VAR_KEYWORD:
                keywords.update(value)
            else:
                keywords[row.name] = value
        return keywords

    def shared(self, optimizer_momentum):
        """What every rank's State must share, as (keyword, value) texts, compared across the ranks
        by the core at the first bucket and after load_state_dict. The compressor options but the
        backend (ranks may differ in it) and the seed (compared as given, before each rank's own is
        made from it); then the optimizer's momentum (a text)."""
        out = []
        for row in SETTINGS:
            if row.kind is _P.VAR_KEYWORD:
                out += [
                    (o["key"], repr(typed_option(o["key"], self.options.get(o["key"], o["default"]))))
                    for o in _gradscope.compressor_options()
                    if o["key"] not in ("backend", "seed")
                ]
            elif row.shared:
                value = self.values[row.name]
                out.append((row.name, repr(value) if isinstance(value, float) else str(value)))
        return out + [("the optimizer's momentum", optimizer_momentum)]
