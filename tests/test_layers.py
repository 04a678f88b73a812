"""The layers of the house are enforced (DESIGN.md, convention 22): import-linter's contracts (pyproject.toml,
[tool.importlinter]) hold, they cover every package the project ships, and an import inside a function says why
it is late (a heavy or optional dependency, a process of its own, a declared cycle)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())

# Modules whose every import is late by design, and why: each runs in a process of its own where what is
# imported, and when, is the point.
LATE_BY_DESIGN = {
    "graders/sealed_child.py": "the sealed test process: its imports are the steps of the seal (module docstring)",
    "environments/supervise.py": "the in-container supervisor: standard library only, in the agent's image",
    "environments/company_tool.py": "the `company` CLI inside the image: standard library only",
    "task_builders/verifier_probes.py": "attack programs run as the agent in the sandbox",
}


def _packages() -> list[str]:
    return CONFIG["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]


def test_the_import_contracts_hold():
    """`lint-imports` (what CI runs through this test): the layers, dagster only in pipelines, no cycle between the
    modules of a package."""
    exe = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_every_package_is_in_the_layers():
    """A new package joins a layer (and the contracts) or the contract would not see what it imports."""
    linter = CONFIG["tool"]["importlinter"]
    layered = {name.strip() for layer in next(c for c in linter["contracts"] if c["type"] == "layers")["layers"]
               for name in layer.split("|")}
    assert set(_packages()) == set(linter["root_packages"]) == layered


def _late_imports(path: Path) -> list[tuple[int, str]]:
    """(line, statement) of every import inside a function with no comment on its lines or on the comment lines
    just above its block of imports."""
    src = path.read_text()
    lines = src.splitlines()
    out, seen = [], set()
    for fn in ast.walk(ast.parse(src)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                continue
            seen.add(node.lineno)
            first = node.lineno - 1
            while first > 0 and (lines[first - 1].strip().startswith(("import ", "from ")) or (
                    not lines[first - 1].strip() and first > 1
                    and lines[first - 2].strip().startswith(("import ", "from ")))):
                first -= 1          # the top of this block of imports (its groups apart by a blank line)
            block = lines[first:node.end_lineno]
            above = lines[first - 1].strip() if first > 0 else ""
            if not (above.startswith("#") or any("#" in line for line in block)):
                out.append((node.lineno, ast.unparse(node)))
    return out


def test_an_import_inside_a_function_says_why():
    missing = []
    for pkg in _packages():
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in LATE_BY_DESIGN:
                continue
            missing += [f"{rel}:{line}: {stmt}" for line, stmt in _late_imports(path)]
    assert not missing, ("imports inside functions without a comment that says why (move them to the top of "
                         "the module, or say why they are late):\n" + "\n".join(missing))


def test_the_architecture_document_draws_the_layers_of_the_contract():
    doc = (ROOT / "docs" / "architecture.md").read_text().split("## Layers", 1)[1]
    drawn = doc.split("```", 2)[1].strip().splitlines()
    layers = next(c for c in CONFIG["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    assert [" | ".join(line.split("  ")[0].split(" | ")).strip() for line in drawn] == layers
