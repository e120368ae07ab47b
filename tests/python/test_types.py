"""What a type checker sees: mypy (Debian's) is clean on the package, whose C++ extension it reads
from the stub python/gradscope/_gradscope.pyi, and on the Python examples of README.md and docs/,
each checked as it is written (the names an example takes from around it, a model or a loss, are
left to it: mypy's name-defined check is off for them)."""

import ast
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MYPY = shutil.which("mypy")
pytestmark = pytest.mark.skipif(MYPY is None, reason="mypy is not installed (scripts/setup.sh installs it)")


def examples():
    """(page, n, code) of every ```python block of the pages that parses as Python and uses
    gradscope (a block that writes a signature, `State(method=..., *, ...)`, is no example)."""
    found = []
    for page in PAGES:
        for n, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S)):
            try:
                ast.parse(code)
            except SyntaxError:
                continue
            if "gradscope" in code:
                found.append((page, n, code))
    return found


def test_the_docs_have_examples_to_check():
    pages = {page.name for page, _, _ in examples()}
    assert {"README.md", "guide.md", "python.md"} <= pages, pages


def test_mypy_is_clean_on_the_package_and_the_docs_examples(tmp_path):
    files = []
    for page, n, code in examples():
        path = tmp_path / f"{page.stem.lower().replace('-', '_')}_{n}.py"
        path.write_text("# mypy: disable-error-code=name-defined\nimport gradscope\nimport gradscope.ddp\n" + code)
        files.append(str(path))
    out = subprocess.run(
        [
            MYPY,
            "--python-executable",
            sys.executable,
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "gradscope",
            *files,
        ],
        cwd=ROOT / "python",
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
