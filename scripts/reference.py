"""Writes gradscope's reference pages from the code itself, so that they cannot drift from it:
docs/reference/cli.md from every command's --help, and docs/reference/python.md from the Python
package's signatures and docstrings. tests/python/test_reference.py checks that the committed
pages are what this script makes from the build.

    PYTHONPATH=build/python python3 scripts/reference.py [--gradscope build/cli/gradscope] [--out docs/reference]
"""

import argparse
import inspect
import os
import re
import subprocess
import sys

# The commands whose --help the CLI page holds, in the order `gradscope --help` lists them.
COMMANDS = [
    [],
    ["demo"],
    ["capture"],
    ["info"],
    ["fit"],
    ["train"],
    ["analyze"],
    ["merge"],
    ["bench"],
    ["bench", "kernels"],
    ["bench", "compressors"],
]
CLI_HEADER = """# Command-line reference

Every `gradscope` command's `--help`, as the build prints it (made by scripts/reference.py; do not
edit). The walk through them with their output is docs/guide.md.
"""
PYTHON_HEADER = """# Python reference

The public names of the `gradscope` package with their signatures and docstrings, as `help()`
shows them (made by scripts/reference.py; do not edit). The guide to the package is
docs/python.md.
"""


def cli_page(gradscope):
    """The CLI page's text: each command's --help, the program's path written as `gradscope`."""
    parts = [CLI_HEADER]
    for command in COMMANDS:
        name = " ".join(["gradscope", *command])
        out = subprocess.run(
            [gradscope, *command, "--help"],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, COLUMNS="100"),
        ).stdout
        out = re.sub(r"Usage: \S*gradscope(-torch)?\b", "Usage: gradscope", out)
        parts.append(f"## `{name}`\n\n```text\n{out.rstrip()}\n```\n")
    return "\n".join(parts)


def _doc(obj):
    return inspect.getdoc(obj) or "(no docstring)"


def _signature(obj):
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _entry(qualified, obj, level="##"):
    lines = []
    if inspect.isclass(obj):
        lines.append(f"{level} class `{qualified}{_signature(obj)}`\n\n{_doc(obj)}\n")
        for name, member in sorted(vars(obj).items()):
            if name.startswith("_"):
                continue
            if isinstance(member, property):
                lines.append(f"- `{name}` (property): {_one_paragraph(member)}")
            elif inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod)):
                function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                lines.append(f"- `{name}{_signature(function)}`: {_one_paragraph(function)}")
        if lines[-1].startswith("- "):
            lines.append("")
    else:
        lines.append(f"{level} `{qualified}{_signature(obj)}`\n\n{_doc(obj)}\n")
    return "\n".join(lines)


def _one_paragraph(obj):
    doc = inspect.getdoc(obj.fget if isinstance(obj, property) else obj) or "(no docstring)"
    return " ".join(doc.split("\n\n")[0].split())


def python_page():
    """The Python page's text: gradscope's __all__ and gradscope.ddp's public names."""
    import gradscope
    import gradscope.ddp

    parts = [PYTHON_HEADER, "## Module `gradscope`\n", _doc(gradscope), ""]
    for name in sorted(gradscope.__all__):
        obj = getattr(gradscope, name)
        if inspect.ismodule(obj) or not (callable(obj) or inspect.isclass(obj)):
            continue
        parts.append(_entry(f"gradscope.{name}", obj, "###"))
    parts += ["## Module `gradscope.ddp`\n", _doc(gradscope.ddp), ""]
    for name in ("State", "hook", "check_optimizer", "StepStats"):
        parts.append(_entry(f"gradscope.ddp.{name}", getattr(gradscope.ddp, name), "###"))
    return "\n".join(parts).rstrip() + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gradscope", default="build/cli/gradscope")
    p.add_argument("--out", default="docs/reference")
    opts = p.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    for name, text in (("cli.md", cli_page(opts.gradscope)), ("python.md", python_page())):
        with open(os.path.join(opts.out, name), "w") as f:
            f.write(text)
        print(f"reference: {os.path.join(opts.out, name)}", file=sys.stderr)


if __name__ == "__main__":
    main()
