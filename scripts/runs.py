"""What the study scripts (frontier.py, ddp_results.py, controller.py, speedup.py,
exchange_model.py) share: a free loopback port for a run's rendezvous, a run's JSON made once and
reused (with the number of test images it was evaluated on), and their Markdown tables, printed and
written beside the runs."""

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


TEST_IMAGES = 10000  # Fashion-MNIST's test set


def add_eval_images(parser):
    """--eval-images: how many of the test images a run's accuracy is read on."""
    parser.add_argument("--eval-images", type=int, default=TEST_IMAGES,
                        help=f"the first N of the {TEST_IMAGES:,} test images give a run's accuracy (default: "
                             "all; fewer for a smoke run of the pipeline)")


def check_eval_images(parser, opts):
    if not 1 <= opts.eval_images <= TEST_IMAGES:
        parser.error(f"--eval-images {opts.eval_images}: from 1 to {TEST_IMAGES}")


def same_eval_images(result, asked, path):
    """A run reused from path must have been evaluated on as many test images as asked for."""
    made = result.get("eval_images", TEST_IMAGES)
    if made != asked:
        raise SystemExit(f"{path} was evaluated on {made} test images and this invocation asks for {asked}: "
                         f"give --eval-images {made}, or another --out")
    return result


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
