"""An analysis store's tables (docs/analysis-format.md) for notebooks: gradscope.load_analysis reads
them through the C++ AnalysisReader, Analysis.fit_params names the fits' parameters, and
gradscope.fitted gives a fitted law's pdf, cdf and isf through the C++ distributions.

    analysis = gradscope.load_analysis("run.analysis.h5")
    th = analysis.thresholds
    th[~th.too_small].groupby(["method", "ratio"]).quality.median()   # what the summary prints
    row = analysis.fits.iloc[0]
    law = gradscope.fitted(row.dist, row)                            # its pdf, cdf, isf
"""

import importlib
import math
import os

import numpy as np

from . import _gradscope


def _pandas():
    try:
        return importlib.import_module("pandas")
    except ImportError:
        return None


def columns_as_tables(tables):
    """{name: [(column, values)]} as pandas DataFrames when pandas imports, else as dicts of NumPy
    arrays (strings as object arrays of str)."""
    columns = {
        name: {
            column: np.array(values, dtype=object) if isinstance(values, list) else values for column, values in cols
        }
        for name, cols in tables.items()
    }
    pandas = _pandas()
    if pandas is not None:
        return {name: pandas.DataFrame(cols) for name, cols in columns.items()}
    return columns


def _column(table, name):
    return table[name].to_numpy() if hasattr(table, "to_numpy") else table[name]


class Analysis:
    """An analysis store's tables (docs/analysis-format.md), by name (analysis["fits"] or
    analysis.fits): steps, vectors, fits, tails, qq, thresholds, each a pandas DataFrame, or without
    pandas a dict of NumPy arrays, with the store's column names; attrs: the store's root attributes
    (source_path, ratios, dists, param_names, ...); fit_params: the fits' parameters by name."""

    def __init__(self, path, attrs, tables):
        self.path = path
        self.attrs = attrs
        self.tables = tables

    def __getitem__(self, name):
        if name not in self.tables:
            raise KeyError(f"no table {name!r} in {self.path}: the tables are {', '.join(self.tables)}")
        return self.tables[name]

    def __getattr__(self, name):
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (tables: {', '.join(tables)})")

    def keys(self):
        return self.tables.keys()

    @property
    def param_names(self):
        """{dist: [names]} of the parameters param1, param2 hold, from the store's param_names
        attribute ("gamma:alpha,beta;..."; "-" for a parameter the law does not have)."""
        out = {}
        for item in self.attrs["param_names"].split(";"):
            dist, names = item.split(":")
            out[dist] = [n for n in names.split(",") if n != "-"]
        return out

    @property
    def fit_params(self):
        """The fits' parameters as a tidy table, one row per (step, scope, dist, parameter): step,
        scope, kind, dist, name, value, named by param_names. Failed fits are left out."""
        fits, names = self.tables["fits"], self.param_names
        columns = {c: _column(fits, c) for c in ("step", "scope", "kind", "dist", "param1", "param2", "error")}
        rows = {key: [] for key in ("step", "scope", "kind", "dist", "name", "value")}
        for i in range(len(columns["step"])):
            if columns["error"][i]:
                continue
            dist = columns["dist"][i]
            for name, value in zip(names[dist], (columns["param1"][i], columns["param2"][i])):
                for key in ("step", "scope", "kind", "dist"):
                    rows[key].append(columns[key][i])
                rows["name"].append(name)
                rows["value"].append(value)
        cols = [("step", np.asarray(rows["step"], dtype=np.int64))]
        cols += [(k, rows[k]) for k in ("scope", "kind", "dist", "name")]
        cols.append(("value", np.asarray(rows["value"], dtype=np.float64)))
        return columns_as_tables({"fit_params": cols})["fit_params"]

    def __repr__(self):
        rows = ", ".join(f"{name} ({_row_count(t)} rows)" for name, t in self.tables.items())
        return f"<gradscope.Analysis {self.path!r} of {self.attrs.get('source_path')!r}: {rows}>"


def _row_count(table):
    if isinstance(table, dict):  # columns of equal length
        return len(next(iter(table.values()), ()))
    return len(table)


def _missing_stages(columns):
    """The thresholds' stages column with NA (pandas) or NaN where the store holds 0: a method that
    counts no stages (top-k, DGC) or a row with an error."""
    for i, (name, values) in enumerate(columns):
        if name == "stages":
            pandas = _pandas()
            if pandas is not None:
                stages = pandas.array(values, dtype="Int32")
                stages[values == 0] = pandas.NA
            else:
                stages = np.where(values == 0, np.nan, values.astype(np.float64))
            columns[i] = (name, stages)


def load_analysis(path):
    """Every table of an analysis store (`gradscope analyze --out`, gradscope.analyze) with the
    store's column names and types: pandas DataFrames when pandas imports, else dicts of NumPy
    arrays (strings as object arrays of str). Only committed rows (of the steps in the steps table).
    The thresholds' stages is NA (pandas; NaN without it) where the method counts none.
    gradscope.Error names the file and the problem: not HDF5, not an analysis file; a missing file
    is a gradscope.MissingFileError, also a FileNotFoundError."""
    path = os.fspath(path)
    attrs, tables = _gradscope.read_analysis(path)
    _missing_stages(tables["thresholds"])
    return Analysis(path, attrs, columns_as_tables(tables))


class Law:
    """A law of the fits table with its parameters, evaluated by gradscope's C++ distributions
    (gs::fitting): pdf(x), cdf(x) and isf(q) (the x with P(X > x) = q), each over a number or an
    array (NumPy's shape kept)."""

    def __init__(self, dist, params):
        self.dist = dist
        self.params = dict(zip(_gradscope.parameter_names(dist), params))
        self._values = list(params)
        _gradscope.law_values(dist, self._values, "pdf", np.zeros(1))  # bad parameters fail here

    def _eval(self, what, x):
        a = np.asarray(x, dtype=np.float64)
        out = _gradscope.law_values(self.dist, self._values, what, a.ravel()).reshape(a.shape)
        return float(out) if out.ndim == 0 else out

    def pdf(self, x):
        return self._eval("pdf", x)

    def cdf(self, x):
        return self._eval("cdf", x)

    def isf(self, q):
        return self._eval("isf", q)

    def __repr__(self):
        args = ", ".join(f"{k}={v:.6g}" for k, v in self.params.items())
        return f"<gradscope.Law {self.dist}({args})>"


def fitted(dist, params):
    """The law `dist` (exponential, gamma, gpareto, normal) with `params` as the fits table holds
    them: (param1, param2) (param2 NaN for the exponential), a row of the fits table (its param1,
    param2), or by name as gradscope.fit() gives them ({"alpha": ..., "beta": ...}). Returns a Law:
    .pdf(x), .cdf(x), .isf(q). gradscope.Error for an unknown law or parameters it refuses."""
    names = _gradscope.parameter_names(dist)
    if hasattr(params, "keys"):
        keys = ["param1", "param2"] if "param1" in params.keys() else names
        missing = [k for k in keys[: len(names)] if k not in params.keys()]
        if missing:
            raise KeyError(f"fitted: {dist} needs {', '.join(names)} (or param1, param2); {', '.join(missing)} missing")
        values = [float(params[k]) for k in keys[: len(names)]]
    else:
        values = [float(v) for v in params][: len(names)]
    if len(values) < len(names) or any(math.isnan(v) for v in values):
        raise ValueError(f"fitted: {dist} needs {len(names)} parameters ({', '.join(names)}), got {params!r}")
    return Law(dist, values)
