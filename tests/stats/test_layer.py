"""raglab.stats is a leaf: numpy, scipy and threadpoolctl (lazily) and the standard library only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import raglab.stats

PACKAGE = Path(raglab.stats.__file__).parent


def test_imports_only_numpy_scipy_stdlib_and_itself():
    allowed = set(sys.stdlib_module_names) | {"numpy", "scipy", "threadpoolctl", "raglab"}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, (path.name, name)
                if name.startswith("raglab"):
                    assert name.startswith("raglab.stats"), (path.name, name)


def test_scipy_imported_lazily():
    code = "import sys, raglab.stats; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
