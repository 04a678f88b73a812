"""Environments of code-change tasks: ecosystem detection, the dependency state that names an environment,
the host install (offline here: a local wheel), and the dataset settings that change them."""

import json
import subprocess
import zipfile

import pytest

from environments import codeenv
from environments.codeenv import EnvSpec, detect
from core.config import ConfigError, DatasetConfig, load_config


def repo(files: dict[str, str]):
    data = {p: t.encode() for p, t in files.items()}
    return list(data), data.get


def test_python_from_pyproject_with_its_test_extras_only():
    paths, read = repo({"pyproject.toml": """
[project]
name = "p"
version = "1.2"
dependencies = ["requests>=2", "attrs"]
[project.optional-dependencies]
test = ["hypothesis"]
docs = ["sphinx"]
[dependency-groups]
tests = ["pytest-mock"]
""", "p/__init__.py": "", "tests/test_p.py": ""})
    d = detect(paths, read)
    assert d.ecosystem == "python" and d.markers == ("pyproject.toml",)
    assert d.requirements == ("attrs", "hypothesis", "pytest-mock", "requests>=2")   # no sphinx: docs only


def test_python_from_setup_cfg_setup_py_requirements_and_tox():
    paths, read = repo({
        "setup.cfg": "[options]\ninstall_requires =\n    six\n[options.extras_require]\ntesting =\n    mock\n",
        "setup.py": "from setuptools import setup\nsetup(name='x', tests_require=['nose'], install_requires=VAR)\n",
        "requirements-test.txt": "-r requirements/base.txt\nfreezegun==1.2  # time\n-e .\n--index-url https://x\n",
        "requirements/base.txt": "# base\ncolorama\n",
        "tox.ini": "[tox]\nenvlist = py311\n[testenv]\ndeps =\n    py311: toml\n    {posargs}\ncommands = pytest\n",
    })
    d = detect(paths, read)
    assert d.ecosystem == "python"
    assert d.requirements == ("colorama", "freezegun==1.2", "mock", "nose", "six", "toml")
    assert set(d.sources) == {"setup.cfg", "setup.py", "requirements-test.txt", "tox.ini"}


def test_only_the_declared_files_of_a_repository_count():
    paths, read = repo({"requirements/dev.txt": "black\n", "setup.py": "setup()\n",
                        "requirements/special.txt": "lxml\n"})
    assert detect(paths, read).requirements == ()
    assert detect(paths, read, requirement_files=["requirements/special.txt"]).requirements == ("lxml",)


def test_node_and_the_tie_break_by_what_the_change_touched():
    paths, read = repo({"package.json": json.dumps({"devDependencies": {"jest": "^29"}}),
                        "package-lock.json": "{}", "setup.py": "setup()\n"})
    assert detect(paths, read).ecosystem == "python"
    node = detect(paths, read, prefer="node")
    assert node.ecosystem == "node" and node.sources == ("package.json", "package-lock.json")
    only, r = repo({"package.json": "{}", "src/a.js": ""})
    assert detect(only, r).ecosystem == "node"


def test_nothing_to_detect_says_why():
    paths, read = repo({"README.md": "hi", "src/main.c": ""})
    d = detect(paths, read)
    assert d.ecosystem is None and "package.json" in d.reason


def test_unreadable_declarations_are_one_line_errors():
    for files in ({"pyproject.toml": "[project\n"}, {"package.json": "{nope"}):
        paths, read = repo(files)
        with pytest.raises(codeenv.EnvError) as e:
            detect(paths, read)
        assert "\n" not in str(e.value)


def test_the_environment_is_named_by_its_dependencies():
    a = EnvSpec("python", ("attrs",))
    assert a.key() == EnvSpec("python", ("attrs",)).key()          # another commit, same dependencies
    assert a.key() != EnvSpec("python", ("attrs", "six")).key()
    assert a.key() != EnvSpec("python", ("attrs",), install=("hypothesis",)).key()
    assert EnvSpec.from_json(a.to_json()) == a
    assert a.tag("sha256:1", {"taskmine.home": "h"}) != a.tag("sha256:1", {"taskmine.home": "other"})


def test_dataset_settings_are_checked_with_one_line_errors(tmp_path):
    (tmp_path / "taskmine.toml").write_text('code_python = "3.9"\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    assert "3.11" in str(e.value) and "\n" not in str(e.value)
    (tmp_path / "taskmine.toml").write_text('code_test = "npm test"\n')
    with pytest.raises(ConfigError, match="TASKMINE_JUNIT"):
        load_config(tmp_path)
    (tmp_path / "taskmine.toml").write_text('code_timeout_s = -1\n')
    with pytest.raises(ConfigError, match="code_timeout_s"):
        load_config(tmp_path)
    ok = DatasetConfig(code_python="3.11", code_install=("hypothesis",), code_test="jest --ci > $TASKMINE_JUNIT")
    assert ok.family("code_change").install == ("hypothesis",)      # the flat keys of earlier versions still read
    # the family's own table: the same checks, errors naming the table's key
    (tmp_path / "taskmine.toml").write_text('[families.code_change]\ntimeout_s = -1\n')
    with pytest.raises(ConfigError, match=r"families\.code_change\.timeout_s: Input should be greater than 0"):
        load_config(tmp_path)
    (tmp_path / "taskmine.toml").write_text('[families.code_change]\npython = "3.9"\n')
    with pytest.raises(ConfigError, match="3.11"):
        load_config(tmp_path)
    (tmp_path / "taskmine.toml").write_text('code_repeats = 2\n[families.code_change]\nrepeats = 4\n')
    with pytest.raises(ConfigError, match="code_repeats and families.code_change.repeats are both set"):
        load_config(tmp_path)
    (tmp_path / "taskmine.toml").write_text('[families]\nenabled = ["code_change"]\n[families.code_change]\n'
                                            'repeats = 4\ninstall = ["hypothesis<7"]\n')
    config = load_config(tmp_path)
    assert config.enabled() == ("code_change",) and config.family("code_change").repeats == 4
    assert DatasetConfig(**config.model_dump(mode="json")) == config   # a run's snapshot reads back the same


def _wheel(folder, name="tinydep", version="1.0"):
    """A pure-Python wheel built by hand: the registry the host install reads in this test, no network."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "VALUE = 42\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/entry_points.txt", "[pytest11]\ntinyplug = tinydep\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_host_install_for_the_image_interpreter(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels)
    spec = EnvSpec("python", ("tinydep",), install=("--no-index", "--find-links", str(wheels)))
    root = codeenv.install(spec, tmp_path / "envs")
    assert (root / "site" / "tinydep" / "__init__.py").exists()
    assert (root / "runner" / "pytest" / "__init__.py").exists() and (root / "runner" / "pluggy").is_dir()
    assert codeenv.plugins(root) == ["tinydep"]
    assert codeenv.install(spec, tmp_path / "envs") == root                    # installed once
    # Debian's interpreter (the image's) imports the runner and the dependency from these folders alone
    python = "/usr/bin/python3"
    code = (f"import sys; sys.path[1:1] = [{str(root / 'site')!r}, {str(root / 'runner')!r}]; "
            "import pytest, tinydep; print(tinydep.VALUE)")
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True)
    if out.returncode != 0 and "No such file" in out.stderr:
        pytest.skip("no /usr/bin/python3 on this machine")
    assert out.stdout.strip() == "42", out.stderr


def test_an_install_that_fails_says_why_in_one_line(tmp_path):
    from environments.docker_cli import SandboxError

    spec = EnvSpec("python", ("no-such-package-anywhere",), install=("--no-index", "--find-links", str(tmp_path)))
    with pytest.raises(SandboxError) as e:
        codeenv.install(spec, tmp_path / "envs")
    assert "no-such-package-anywhere" in str(e.value) and "\n" not in str(e.value)
    assert not codeenv.env_root(spec, tmp_path / "envs").exists()


def test_test_command_imports_the_runner_before_the_repository():
    cmd = codeenv.test_command(EnvSpec("python"), ["tests/test_a.py"], "/tmp/r.xml", plugin_names=["tinydep"])
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1" in cmd and "-p tinydep" in cmd and "python3 -I" in cmd
    assert cmd.index("import pytest") < cmd.index("sys.path.insert(0, os.getcwd())")
    custom = codeenv.test_command(EnvSpec("node", test_command="jest --outputFile=$TASKMINE_JUNIT"), ["a.test.js"],
                                  "/tmp/r.xml")
    assert "TASKMINE_JUNIT=/tmp/r.xml" in custom and "TASKMINE_TESTS=a.test.js" in custom


def test_a_test_that_never_ends_or_eats_memory_fails_alone(tmp_path):
    """The runner's guards, with Debian's interpreter (the image's) on the host: the hanging and the greedy test
    fail with TimeoutError and MemoryError, their neighbour's result still counts, the report is complete."""
    import os

    from graders.junit import parse

    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3 on this machine")
    root = codeenv.install(EnvSpec("python"), tmp_path / "envs")
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_g.py").write_text(
        "def test_hang():\n    while True:\n        pass\n\n\n"
        # bytes(n) is calloc'ed: untouched pages, so the guard is reached at once on any machine (bytearray
        # zero-fills: 13 x 64 MB took 3.5 s on a slow VM, longer than the 2 s alarm, and the test read timing)
        "def test_greedy():\n    keep = []\n    while True:\n        keep.append(bytes(64 << 20))\n\n\n"
        "def test_fine():\n    assert True\n")
    cmd = codeenv.test_command(EnvSpec("python"), ["tests/test_g.py"], str(tmp_path / "r.xml"),
                               extra_paths=[str(root / "site"), str(root / "runner")], per_test_s=2)
    subprocess.run(["sh", "-c", cmd.replace("python3 -I", "/usr/bin/python3 -I", 1)], cwd=repo, capture_output=True,
                   timeout=120)
    rep = parse((tmp_path / "r.xml").read_bytes())
    assert rep.outcomes == {"tests/test_g.py::test_hang": "failed", "tests/test_g.py::test_greedy": "failed",
                            "tests/test_g.py::test_fine": "passed"}
    assert "TimeoutError" in rep.messages["tests/test_g.py::test_hang"]
    assert "MemoryError" in rep.messages["tests/test_g.py::test_greedy"]


def test_a_test_that_starts_many_threads_fits_under_the_memory_guard(tmp_path):
    """Linux counts thread stacks in RLIMIT_DATA: at glibc's 8 MB default ~110 threads filled the guard and a
    concurrency test of more-itertools broke pytest itself (exit 3). 300 idle threads now start and pass."""
    import os

    from graders.junit import parse

    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3 on this machine")
    root = codeenv.install(EnvSpec("python"), tmp_path / "envs")
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_t.py").write_text(
        "import threading\n\n\ndef test_many_threads():\n    stop = threading.Event()\n"
        "    threads = [threading.Thread(target=stop.wait) for _ in range(300)]\n"
        "    for t in threads:\n        t.start()\n    stop.set()\n    for t in threads:\n        t.join()\n")
    cmd = codeenv.test_command(EnvSpec("python"), ["tests/test_t.py"], str(tmp_path / "r.xml"),
                               extra_paths=[str(root / "site"), str(root / "runner")])
    subprocess.run(["sh", "-c", cmd.replace("python3 -I", "/usr/bin/python3 -I", 1)], cwd=repo, capture_output=True,
                   timeout=120)
    assert parse((tmp_path / "r.xml").read_bytes()).outcomes == {"tests/test_t.py::test_many_threads": "passed"}
