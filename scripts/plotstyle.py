"""One look for every figure of docs/: each method's colour and marker, the same in every figure
(the scripts that draw them import this), a line style per variant of a method, and at most
PER_PANEL series a panel.

A point's name (speedup.py's sidco-e-mc-sparse, frontier.py's sidco-e-0.01-mc, dense-lr0.01, ...)
is its method, then its variant: `style(point)` gives matplotlib keywords for it.
"""

import math

PER_PANEL = 6  # series a panel at most: split into more panels beyond it

# method: (colour, marker). Colours from matplotlib's tab10, each used once; dense is black and
# the compute-only bound grey, so that no two methods share a colour in any figure.
METHODS = {
    "dense": ("black", "s"),
    "compute": ("0.55", "x"),
    "sidco-e": ("tab:red", "o"),
    "sidco-p": ("tab:pink", "P"),
    "sidco-gp": ("tab:purple", "^"),
    "sidco-topk": ("tab:brown", "h"),
    "topk": ("tab:blue", "D"),
    "dgc": ("tab:orange", "v"),
    "powersgd-1": ("tab:olive", "<"),
    "powersgd-4": ("tab:green", ">"),
    "fp16": ("tab:cyan", "*"),
    "randomk": ("tab:gray", "p"),
}
# variant (a part of the point's name after its method): the line style of its series
VARIANTS = {"mc": "-", "sparse": "--", "shared": ":", "accordion": "-.", "auto": (0, (5, 1, 1, 1))}


def method_of(point):
    """The method a point runs: the longest METHODS key its name starts with ("sidco-e-mc" is
    sidco-e, "dense-lr0.01" dense); a name of none of them is its own."""
    found = [m for m in METHODS if point == m or point.startswith(m + "-")]
    return max(found, key=len) if found else point


def style(point):
    """matplotlib keywords (color, marker, linestyle) for a point's series."""
    method = method_of(point)
    colour, marker = METHODS.get(method, ("0.3", "."))
    rest = point[len(method) :].split("-")
    dashes = [VARIANTS[v] for v in rest if v in VARIANTS and v != "mc"]
    return {"color": colour, "marker": marker, "linestyle": dashes[-1] if dashes else "-"}


def panels(series):
    """The series split into panels of at most PER_PANEL, as evenly as they go."""
    series = list(series)
    if not series:
        return []
    count = math.ceil(len(series) / PER_PANEL)
    per = math.ceil(len(series) / count)
    return [series[i : i + per] for i in range(0, len(series), per)]
