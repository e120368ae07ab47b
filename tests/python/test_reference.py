"""docs/reference/ is made from the code (scripts/reference.py): every command's --help and the
Python package's signatures and docstrings. The committed pages must be what the build makes, so
that they cannot drift from it."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import reference  # noqa: E402

FIX = "run: PYTHONPATH=build/python python3 scripts/reference.py --gradscope build/cli/gradscope"


def test_the_cli_reference_is_every_commands_help(gradscope_bin):
    assert reference.cli_page(gradscope_bin) == (ROOT / "docs" / "reference" / "cli.md").read_text(), FIX


def test_the_python_reference_is_the_packages_docstrings():
    assert reference.python_page() == (ROOT / "docs" / "reference" / "python.md").read_text(), FIX
