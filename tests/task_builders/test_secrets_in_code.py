"""Secrets in code are replaced the same way in every file and commit, so tests that compare them still pass.

A real project's history held passwords in URLs inside test fixtures (`http://user:pass@host/...`). Replaced by a
typed placeholder per place ("[SECRET:URL_PASSWORD]" in the URL, "[SECRET:PASSWORD]" in the assignment, the
literal a test compares with left as it was), the project's own tests fail on the rewritten repository. Each
secret value now has one fake, used wherever the value occurs in code (invented content below).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from privacy import audit
from task_builders.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store

PASSWORD = "Tr0ub4dor-27x"
FIXTURES = f'''DB_PASSWORD = "{PASSWORD}"
MIRROR = "https://deploy:{PASSWORD}@mirror.example.org/simple/"
'''
TESTS = f'''import unittest
from urllib.parse import urlsplit

import fixtures


class TestMirror(unittest.TestCase):
    def test_the_same_url_in_two_files(self):
        self.assertEqual(fixtures.MIRROR, "https://deploy:{PASSWORD}@mirror.example.org/simple/")

    def test_the_url_carries_the_password(self):
        self.assertEqual(urlsplit(fixtures.MIRROR).password, fixtures.DB_PASSWORD)
        self.assertEqual(urlsplit(fixtures.MIRROR).password, "{PASSWORD}")
'''
ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dana Ortiz", "-c", "user.email=dana@example.org",
                           *args], check=True, capture_output=True, text=True, env=ENV).stdout


def _unittest(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=tree, capture_output=True, text=True)


def test_a_password_in_urls_of_two_files_and_two_commits_keeps_the_tests_passing(tmp_path):
    repo = tmp_path / "exports" / "proj" / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=ENV)
    (repo / "fixtures.py").write_text(FIXTURES)
    (repo / "test_mirror.py").write_text(TESTS)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "Add mirror fixtures")
    for name in ("fixtures.py", "test_mirror.py"):     # a later commit changes the URL in both files
        path = repo / name
        path.write_text(path.read_text().replace("/simple/", "/pypi/simple/"))
    _git(repo, "commit", "-q", "-am", "Point the mirror at its index")
    assert _unittest(repo).returncode == 0

    store = Store(tmp_path / "home")
    flow.prepare(store, "proj", repo.parent, DatasetConfig(ner_model=""))
    rewritten = Path(json.loads(flow.repos_index(store, "proj").read_text())["repo"]["path"])

    history = subprocess.run(["git", "-C", str(rewritten), "log", "-p", "--all"], capture_output=True,
                             text=True).stdout
    assert PASSWORD not in history and "[SECRET" not in history
    # the URL in both files, added and then changed (-/+): one fake, the one the assignment and the literal got
    fakes = re.findall(r"https://deploy:(\w+)@", history)
    assert len(fakes) == 6 and len(set(fakes)) == 1 and fakes[0].startswith("fake")
    assert f'DB_PASSWORD = "{fakes[0]}"' in history and f'password, "{fakes[0]}")' in history
    for rev in ("main~1", "main"):
        tree = tmp_path / f"checkout-{rev.replace('~', '-')}"
        subprocess.run(["git", "clone", "-q", str(rewritten), str(tree)], check=True, env=ENV)
        _git(tree, "checkout", "-q", rev)
        result = _unittest(tree)
        assert result.returncode == 0, result.stderr
    report = audit.audit(tree, flow.audit_rules(store, "proj"))
    assert not [h for h in report.hits if h.kind.startswith("secret:")], report.summary()
