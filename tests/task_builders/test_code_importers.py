"""PASS_TO_PASS covers the test modules that import what a fix changes, not only the fix's own test modules."""

from __future__ import annotations

import subprocess
from pathlib import Path

from task_builders.families.code_change import importing_tests, module_names

ENV = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@corp.example",
       "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@corp.example"}


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=ENV)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True, env=ENV)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_module_names_walk_up_the_packages():
    files = {"src/pkg/__init__.py", "src/pkg/sub/__init__.py", "src/pkg/sub/mod.py", "tool.py"}
    assert module_names("src/pkg/sub/mod.py", files) == ["pkg.sub.mod", "pkg.sub", "pkg"]
    assert module_names("src/pkg/sub/__init__.py", files) == ["pkg.sub", "pkg"]
    assert module_names("tool.py", files) == ["tool"]


def test_test_modules_importing_the_changed_code_join_the_run(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    parent = commit(repo, {
        "pkg/__init__.py": "from pkg.core import f\n", "pkg/core.py": "def f():\n    return 1\n",
        "pkg/other.py": "X = 1\n",
        "tests/test_core.py": "from pkg.core import f\n\ndef test_f():\n    assert f() == 1\n",
        "tests/test_package.py": "import pkg\n\ndef test_pkg():\n    assert pkg.f\n",
        "tests/test_other.py": "from pkg import other\n\ndef test_x():\n    assert other.X\n",
        "tests/test_unrelated.py": "import json\n\ndef test_j():\n    assert json\n",
        "tests/helpers.py": "import pkg.core\n"}, "start")
    fix = commit(repo, {"pkg/core.py": "def f():\n    return 2\n",
                        "tests/test_core.py": "from pkg.core import f\n\ndef test_f():\n    assert f() == 2\n"}, "fix")
    got = importing_tests(repo, parent, fix, ["pkg/core.py"])
    # the module itself first, then the package above it; `from pkg import other` imports the package too;
    # a helper that is not a test module and a test importing nothing of it stay out
    assert got[0] == "tests/test_core.py" and set(got) == {"tests/test_core.py", "tests/test_package.py",
                                                           "tests/test_other.py"}
    assert importing_tests(repo, parent, fix, ["pkg/core.py"], limit=1) == ["tests/test_core.py"]
    assert importing_tests(repo, parent, fix, ["README.md"]) == []
