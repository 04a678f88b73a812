"""One registry for every plug-in kind: names, origins, argument models, entry points, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from pydantic import BaseModel

from core.registry import KINDS, PLURALS, Registry, declared, registry

REPO = Path(__file__).resolve().parents[1]


def test_every_kind_lists_its_builtins():
    assert set(KINDS) == {"extractor", "family", "check", "sandbox"}
    assert {"git", "jira_json", "slack_export", "mbox"} <= set(registry("extractor").all())
    assert {"ticket_triage", "commit_link"} <= set(registry("family").all())
    assert {"field_equals", "set_overlap", "sha_equals"} <= set(registry("check").all())
    assert {"docker", "local"} <= set(registry("sandbox").all())
    assert all(r.origin.startswith("builtin:") for k in KINDS for r in registry(k).all().values())
    with pytest.raises(KeyError, match="the kinds are"):
        registry("widget")


def test_the_installed_entry_points_are_the_ones_pyproject_declares():
    """Built-ins are entry points of the project's own distribution: what is installed must be what pyproject.toml
    says (an entry point added without installing again is invisible to every interpreter)."""
    wanted = declared((REPO / "pyproject.toml").read_text())
    for group, eps in wanted.items():
        installed = {ep.name: ep.value for ep in entry_points(group=group) if ep.dist and ep.dist.name == "taskmine"}
        assert installed == eps, f"{group}: installed entry points differ from pyproject.toml; run `uv sync --inexact`"
    assert set(wanted) == {f"taskmine.{p}" for p in PLURALS.values()} and all(wanted.values())


def test_every_builtin_is_an_entry_point_and_nothing_else_registers_one():
    """No plug-in exists only because some module happened to be imported: every registered built-in comes from an
    entry point (a `module:Object` under its own name, or a module of them)."""
    wanted = declared((REPO / "pyproject.toml").read_text())
    for kind in KINDS:
        eps = wanted[f"taskmine.{PLURALS[kind]}"]
        modules = {v for v in eps.values() if ":" not in v}
        for name, r in registry(kind).all().items():
            assert name in eps or r.obj.__module__ in modules, f"{kind} {name} is not an entry point"
            if name in eps:
                module, attr = eps[name].split(":")
                assert (r.obj.__module__, r.obj.__qualname__) == (module, attr)


def _site(tmp_path: Path, dist: str, entry_points_txt: str, modules: dict[str, str]) -> Path:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    for name, code in modules.items():
        (site / f"{name}.py").write_text(code)
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points_txt)
    return site


def test_a_module_entry_point_registers_what_its_decorators_name_and_a_mismatch_is_an_error(tmp_path, monkeypatch):
    reg = Registry("thing", "things", own=None)
    monkeypatch.setitem(sys.modules, "tm_reg_things", reg)
    site = _site(tmp_path, "acme-things", "[taskmine.things]\nmany = tm_many\nsolo = tm_solo:solo\n", {
        "tm_many": "import sys\nreg = sys.modules['tm_reg_things']\n"
                   "@reg.register('one')\ndef one():\n    return 1\n@reg.register('two')\ndef two():\n    return 2\n",
        "tm_solo": "def solo():\n    return 3\n"})
    monkeypatch.syspath_prepend(str(site))
    assert {n: (r.obj(), r.origin) for n, r in reg.all().items()} == {
        "one": (1, "entry-point:acme-things"), "two": (2, "entry-point:acme-things"),
        "solo": (3, "entry-point:acme-things")}

    bad = Registry("widget", "widgets", own=None)
    monkeypatch.setitem(sys.modules, "tm_reg_widgets", bad)
    (site / "tm_named.py").write_text("import sys\nreg = sys.modules['tm_reg_widgets']\n"
                                      "@reg.register('gear')\ndef gear():\n    return 1\n")
    info = site / "acme_widgets-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-widgets\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[taskmine.widgets]\ncog = tm_named:gear\n")
    with pytest.raises(ValueError, match="entry point cog .* registered as 'gear': use one name"):
        bad.all()


def test_a_kind_without_the_projects_own_entry_points_says_to_install_it():
    reg = Registry("family", "no-such-group")
    with pytest.raises(RuntimeError, match=r"no taskmine.no-such-group entry points of the taskmine distribution: "
                                           r"install the project \(`uv sync --inexact`"):
        reg.all()


def test_names_are_taken_once_and_unknown_names_say_what_exists():
    class Args(BaseModel):
        n: int

    def first():
        return 1

    def second():
        return 2

    reg = Registry("thing", "things", own=None)
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


def test_a_thread_asking_while_another_loads_the_entry_points_waits_for_all_of_them(tmp_path, monkeypatch):
    # the first entry point's module, while it is imported, lets another thread ask for a plug-in the second one
    # registers (code_change builds its candidates in a thread pool; the first grade of each loads the checks)

    reg = Registry("thing", "things", own=None)
    asked: dict = {}
    monkeypatch.setitem(sys.modules, "tm_reg_registry", reg)
    site = _site(tmp_path, "acme-slow", "[taskmine.things]\na = tm_reg_first\nb = tm_reg_second\n", {
        "tm_reg_first": "import sys, threading, time\nreg = sys.modules['tm_reg_registry']\n"
                        "result = sys.modules['tm_reg_asked']\n"
                        "def ask():\n    try:\n        result['obj'] = reg.get('late').obj\n"
                        "    except KeyError as exc:\n"
                        "        result['error'] = str(exc)\n"
                        "t = threading.Thread(target=ask)\nt.start()\nresult['thread'] = t\ntime.sleep(0.3)\n",
        "tm_reg_second": "import sys\nsys.modules['tm_reg_registry'].add('late', 'here', 'builtin:tm_reg_second')\n"})
    monkeypatch.setitem(sys.modules, "tm_reg_asked", asked)
    monkeypatch.syspath_prepend(str(site))
    for name in ("tm_reg_first", "tm_reg_second"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert reg.get("late").obj == "here"
    asked["thread"].join(10)
    assert asked.get("obj") == "here", asked.get("error")
