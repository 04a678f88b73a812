"""One registry for every plug-in kind: names, origins, argument models, entry points, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import BaseModel

from core.registry import KINDS, Registry, registry


def test_every_kind_lists_its_builtins():
    assert set(KINDS) == {"extractor", "family", "check", "sandbox"}
    assert {"git", "jira_json", "slack_export", "mbox"} <= set(registry("extractor").all())
    assert {"ticket_triage", "commit_link"} <= set(registry("family").all())
    assert {"field_equals", "set_overlap", "sha_equals"} <= set(registry("check").all())
    assert {"docker", "local"} <= set(registry("sandbox").all())
    assert all(r.origin.startswith("builtin:") for k in KINDS for r in registry(k).all().values())
    with pytest.raises(KeyError, match="the kinds are"):
        registry("widget")


def test_names_are_taken_once_and_unknown_names_say_what_exists():
    class Args(BaseModel):
        n: int

    def first():
        return 1

    def second():
        return 2

    reg = Registry("thing", "things", ())
    one = reg.register("one", args=Args)(first)
    assert reg.get("one").obj is one and reg.get("one").args is Args
    with pytest.raises(ValueError, match="taken"):
        reg.add("one", second, "builtin:elsewhere")
    with pytest.raises(KeyError, match=r"no thing named 'two'; known: one \(see `taskmine things list`\)"):
        reg.get("two")
    assert reg.validate_args("one", {"n": "3"}) == {"n": 3}
    with pytest.raises(ValueError, match="thing 'one': argument n"):
        reg.validate_args("one", {"n": "x"})


def test_a_package_outside_the_repo_adds_a_family_and_a_check(tmp_path):
    """Entry points of another distribution register plug-ins by name (groups taskmine.families, .checks)."""
    pkg = tmp_path / "site" / "acme_plugins"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from pydantic import BaseModel\n"
        "from graders.rubric import CheckResult\n"
        "from task_builders.families import Family\n"
        "class Nothing(BaseModel):\n    pass\n"
        "class Tickets(Family):\n    '''Tickets of a helpdesk.'''\n    kinds = ('ticket',)\n"
        "    def build(self, ctx):\n        return iter(())\n"
        "def always(actions, args, ctx):\n    return CheckResult(1.0, 'always')\n"
        "always.args_model = Nothing\n")
    dist = tmp_path / "site" / "acme_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[taskmine.families]\nhelpdesk = acme_plugins:Tickets\n\n"
                                           "[taskmine.checks]\nalways = acme_plugins:always\n")
    code = ("from core.registry import registry\n"
            "f, c = registry('family').get('helpdesk'), registry('check').get('always')\n"
            "print(f.origin, f.obj.kinds, c.origin, c.args.__name__)\n")
    env = {"PYTHONPATH": f"{tmp_path / 'site'}:{':'.join(sys.path)}", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["entry-point:acme-plugins", "('ticket',)", "entry-point:acme-plugins", "Nothing"]


@pytest.mark.parametrize("plural, needle", [("families", "ticket_triage"), ("checks", "key, field, expected"),
                                            ("sandboxes", "docker")])
def test_the_cli_lists_each_kind(plural, needle, tmp_path):
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "--home", str(tmp_path), plural, "list"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and needle in r.stdout, r.stderr


def test_a_thread_asking_while_another_loads_the_builtins_waits_for_all_of_them(tmp_path, monkeypatch):
    # the first builtin module, while it is imported, lets another thread ask for a plug-in the second module
    # registers (code_change builds its candidates in a thread pool; the first grade of each loads the checks)

    reg = Registry("thing", "things", ("tm_reg_first", "tm_reg_second"))
    asked: dict = {}
    monkeypatch.setitem(sys.modules, "tm_reg_registry", reg)
    (tmp_path / "tm_reg_first.py").write_text(
        "import sys, threading, time\nreg = sys.modules['tm_reg_registry']\nresult = sys.modules['tm_reg_asked']\n"
        "def ask():\n    try:\n        result['obj'] = reg.get('late').obj\n    except KeyError as exc:\n"
        "        result['error'] = str(exc)\n"
        "t = threading.Thread(target=ask)\nt.start()\nresult['thread'] = t\ntime.sleep(0.3)\n")
    (tmp_path / "tm_reg_second.py").write_text(
        "import sys\nsys.modules['tm_reg_registry'].add('late', 'here', 'builtin:tm_reg_second')\n")
    monkeypatch.setitem(sys.modules, "tm_reg_asked", asked)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("tm_reg_first", "tm_reg_second"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert reg.get("late").obj == "here"
    asked["thread"].join(10)
    assert asked.get("obj") == "here", asked.get("error")
