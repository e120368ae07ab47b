"""What the study scripts (frontier.py, ddp_results.py, controller.py, speedup.py,
exchange_model.py) share: a free loopback port for a run's rendezvous, a run's JSON made once and
reused, and their Markdown tables, printed and written beside the runs."""

import json
import os
import shutil
import socket


def free_port():
    """A loopback port free now (for a run's rendezvous, taken at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cached_json(path, make):
    """The JSON at path, made by make(partial_path) when absent: make writes the partial file, which
    becomes the run's only once whole (a run stopped midway is made again)."""
    if not os.path.exists(path):
        partial = path + ".partial"
        make(partial)
        os.replace(partial, path)
    with open(path) as f:
        return json.load(f)


def drop_quiet_logs(folder):
    """Removes a run's log folder when every log in it is empty (a run that printed nothing)."""
    if os.path.isdir(folder) and all(os.path.getsize(os.path.join(folder, f)) == 0 for f in os.listdir(folder)):
        shutil.rmtree(folder)


def markdown(header, rows):
    """A Markdown table: header cells and rows of cells (text)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def publish(text, path):
    """Prints a table and writes it to path."""
    print(text)
    with open(path, "w") as f:
        f.write(text + "\n")
