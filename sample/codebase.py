"""The tiny Python project inside the sample repository, as a model that renders its files.

Invariants:
- Every tracked file is rendered from the model's state, so a commit is a list of state changes and its
  diff is exactly the files whose rendering changed.
- Each issue's function is born buggy; its fix makes the regression test the fix adds pass, and that
  test fails on the buggy version (tests/sample checks every template both ways). So a fixing commit
  that touches tests fails before and passes after, as the code-change task family needs.
- The generated tests are `unittest.TestCase` methods with plain asserts: they run under both
  `python -m unittest discover -s tests -t .` and pytest, with no third-party package.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from string import Template
from textwrap import indent


@dataclass(frozen=True)
class Bug:
    """One kind of defect: buggy and fixed bodies, the test that tells them apart, and how people describe it."""

    name: str
    kind: str  # issue type after triage: Bug | Improvement
    sig: str
    doc: str
    buggy: str
    fixed: str
    test: str
    call: str
    expected: str
    actual: str
    summaries: tuple[str, ...]
    fixes: tuple[str, ...]
    fixed_sig: str = ""


BUGS = (
    Bug("clamp_$noun", "Bug", "(value)", "Clamp a $noun value into [$lo, $hi].",
        "return max($hi, min(value, $lo))", "return max($lo, min(value, $hi))",
        "assert $fn($mid) == $mid\nassert $fn($over) == $hi\nassert $fn($under) == $lo",
        "$fn($mid)", "$mid", "$hi",
        ("$fn ignores the $noun limits", "$noun values are not clamped to [$lo, $hi]"),
        ("fix bound order in $fn", "clamp $noun values to the configured range")),
    Bug("mean_$noun", "Bug", "(values)", "Average $noun over a list of samples.",
        "return sum(values) / len(values)", "if not values:\n    return 0.0\nreturn sum(values) / len(values)",
        "assert $fn([]) == 0.0\nassert $fn([2, 4]) == 3",
        "$fn([])", "0.0", "ZeroDivisionError: division by zero",
        ("ZeroDivisionError in $fn with no $noun samples", "$fn crashes on an empty list"),
        ("handle empty input in $fn", "return 0.0 from $fn when there are no samples")),
    Bug("normalize_$noun", "Bug", "(value)", "Canonical form of a $noun name.",
        "return value.strip().lower()", 'if value is None:\n    return ""\nreturn value.strip().lower()',
        'assert $fn(None) == ""\nassert $fn("  Mixed Case ") == "mixed case"',
        "$fn(None)", '""', "AttributeError: 'NoneType' object has no attribute 'strip'",
        ("AttributeError in $fn when the $noun is missing", "$fn fails on None"),
        ("add null check to $fn", "accept None in $fn")),
    Bug("split_$noun", "Bug", "(value)", "Split a comma-separated list of $noun names.",
        'return value.split(",")', 'return [part.strip() for part in value.split(",") if part.strip()]',
        'assert $fn("a, b,,c ") == ["a", "b", "c"]',
        '$fn("a, b,,c ")', '["a", "b", "c"]', "['a', ' b', '', 'c ']",
        ("$fn keeps blanks and spaces in $noun lists", "Whitespace around $noun names breaks $fn"),
        ("strip blanks in $fn", "ignore empty items in $fn")),
    Bug("${noun}_range", "Bug", "(first, last)", "All $noun numbers from first to last, inclusive.",
        "return list(range(first, last))", "return list(range(first, last + 1))",
        "assert $fn(1, 3) == [1, 2, 3]\nassert $fn(5, 5) == [5]",
        "$fn(1, 3)", "[1, 2, 3]", "[1, 2]",
        ("$fn drops the last $noun of the range", "Off-by-one in $fn"),
        ("include the last item in $fn", "fix off-by-one in $fn")),
    Bug("collect_$noun", "Bug", "(item, bucket=[])", "Append a $noun to bucket and return the bucket.",
        "bucket.append(item)\nreturn bucket",
        "bucket = [] if bucket is None else bucket\nbucket.append(item)\nreturn bucket",
        '$fn("first")\nassert $fn("second") == ["second"]',
        '$fn("second")', '["second"]', "['first', 'second']",
        ("$fn leaks $noun items between calls", "Shared default list in $fn"),
        ("stop sharing the default list in $fn", "use a None default in $fn"),
        fixed_sig="(item, bucket=None)"),
    Bug("same_$noun", "Improvement", "(left, right)", "Whether two $noun names are the same.",
        "return left == right", "return left.casefold() == right.casefold()",
        'assert $fn("Alpha", "alpha")\nassert not $fn("alpha", "beta")',
        '$fn("Alpha", "alpha")', "True", "False",
        ("$fn should ignore case", "Case-sensitive $noun comparison in $fn"),
        ("compare case-insensitively in $fn", "casefold names in $fn")),
    Bug("${noun}_setting", "Bug", "(table, key)", "Look up a $noun setting, falling back to $default.",
        "return table[key]", "return table.get(key, $default)",
        'assert $fn({}, "missing") == $default\nassert $fn({"k": 1}, "k") == 1',
        '$fn({}, "missing")', "$default", "KeyError: 'missing'",
        ("KeyError in $fn for unknown $noun keys", "$fn should fall back to $default"),
        ("fall back to the default in $fn", "avoid KeyError in $fn")),
    Bug("newest_$noun", "Improvement", "(timestamps)", "$noun timestamps, newest first.",
        "return sorted(timestamps)", "return sorted(timestamps, reverse=True)",
        "assert $fn([1, 3, 2]) == [3, 2, 1]",
        "$fn([1, 3, 2])", "[3, 2, 1]", "[1, 2, 3]",
        ("$fn should list the newest $noun first", "Wrong sort order in $fn"),
        ("sort newest first in $fn", "reverse the order in $fn")),
    Bug("${noun}_cents", "Bug", "(amount)", "Convert a $noun amount to integer cents.",
        "return int(amount * 100)", "return round(amount * 100)",
        "assert $fn(0.29) == 29\nassert $fn(1.15) == 115",
        "$fn(0.29)", "29", "28",
        ("$fn is off by one cent for some amounts", "Rounding error in $fn"),
        ("round cents in $fn", "fix rounding in $fn")),
)
NOTES = ("Edge cases are covered by the unit tests.", "Callers may pass values straight from user input.",
         "Keep this pure: it is called on hot paths.", "See the regression test for the expected behaviour.")


@dataclass
class Fn:
    """One function of the project and where it stands: buggy or fixed, tested, polished."""

    name: str
    module: str
    bug: Bug
    params: dict[str, str]
    note: str
    fixed: bool = False
    polished: bool = False

    def sub(self, text: str) -> str:
        return Template(text).substitute(self.params)

    def render(self) -> str:
        doc = self.sub(self.bug.doc)
        doc = f'"""{doc}\n\n    {self.note}\n    """' if self.polished else f'"""{doc}"""'
        sig = self.bug.fixed_sig if self.fixed and self.bug.fixed_sig else self.bug.sig
        body = self.sub(self.bug.fixed if self.fixed else self.bug.buggy)
        return f"def {self.name}{sig}:\n    {doc}\n{indent(body, '    ')}\n"

    def render_test(self, pkg: str) -> str:
        body = self.sub(self.bug.test)
        return (f"    def test_{self.name}(self):\n        from {pkg}.{self.module} import {self.name}\n\n"
                f"{indent(body, ' ' * 8)}\n")


def new_fn(rng: random.Random, module: str, noun: str, taken: set[str]) -> Fn:
    """A fresh buggy function for `module` whose name is unique in the project."""
    bug = rng.choice(BUGS)
    base = Template(bug.name).substitute(noun=noun)
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    lo = rng.choice((0, 1, 5, 10))
    hi = lo + rng.choice((10, 50, 100, 300))
    params = {"fn": name, "noun": noun, "lo": str(lo), "hi": str(hi), "mid": str((lo + hi) // 2),
              "over": str(hi + 7), "under": str(lo - 3), "default": str(rng.choice((0, -1, 30, 100)))}
    return Fn(name, module, bug, params, rng.choice(NOTES))


@dataclass
class Codebase:
    """State of the project on one line of history; `apply` returns the paths whose content changed."""

    pkg: str
    title: str
    modules: dict[str, list[Fn]]  # module -> functions in order of addition
    tests: dict[str, list[Fn]] = field(default_factory=dict)  # module -> tested functions in order
    version: str = "0.1.0"
    docs: list[str] = field(default_factory=list)
    extra: dict[str, str | None] = field(default_factory=dict)  # files outside the package; None: deleted

    def paths(self) -> list[str]:
        mods = sorted(self.modules)
        return (["README.md", "pyproject.toml", ".gitignore", f"{self.pkg}/__init__.py", "tests/__init__.py"]
                + [f"{self.pkg}/{m}.py" for m in mods] + [f"tests/test_{m}.py" for m in mods])

    def apply(self, op: str, arg) -> set[str]:
        if op == "add":
            self.modules[arg.module].append(arg)
            return {f"{self.pkg}/{arg.module}.py"}
        if op in ("fix", "polish"):
            setattr(arg, "fixed" if op == "fix" else "polished", True)
            return {f"{self.pkg}/{arg.module}.py"}
        if op == "test":
            self.tests.setdefault(arg.module, []).append(arg)
            return {f"tests/test_{arg.module}.py"}
        if op == "bump":
            self.version = arg
            return {f"{self.pkg}/__init__.py", "pyproject.toml"}
        if op == "doc":
            self.docs.append(f"- `{self.pkg}.{arg.module}.{arg.name}`: {arg.sub(arg.bug.doc)}")
            return {"README.md"}
        if op == "put":  # arg: (path, content)
            self.extra[arg[0]] = str(arg[1])
            return {arg[0]}
        if op == "drop":  # arg: path
            self.extra[arg] = None
            return {arg}
        raise ValueError(f"unknown codebase op {op!r}")

    def render(self, path: str) -> str | None:
        """The file's content in this state; None for a file that was deleted."""
        pkg = self.pkg
        if path in self.extra:
            return self.extra[path]
        if path == "README.md":
            notes = "".join(f"{line}\n" for line in self.docs)
            return (f"# {pkg}\n\nInternal helpers of {self.title}.\n\nRun the tests with "
                    f"`python -m unittest discover -s tests -t .` (or `pytest`).\n\n## Helpers\n\n{notes}")
        if path == "pyproject.toml":
            return (f'[project]\nname = "{pkg}"\nversion = "{self.version}"\nrequires-python = ">=3.9"\n\n'
                    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
        if path == ".gitignore":
            return "__pycache__/\n*.pyc\n.pytest_cache/\n"
        if path == f"{pkg}/__init__.py":
            return f'"""{self.title} helpers."""\n\n__version__ = "{self.version}"\n'
        if path == "tests/__init__.py":
            return ""
        if path.startswith("tests/test_"):
            mod = path[len("tests/test_"):-3]
            cls = "".join(part.capitalize() for part in mod.split("_"))
            head = (f"import unittest\n\n\nclass Test{cls}(unittest.TestCase):\n"
                    f"    def test_module_imports(self):\n        import {pkg}.{mod}\n\n"
                    f"        assert {pkg}.{mod}.__doc__\n")
            return head + "".join("\n" + fn.render_test(pkg) for fn in self.tests.get(mod, []))
        mod = path[len(pkg) + 1:-3]
        head = f'"""{mod.replace("_", " ").capitalize()} helpers of {self.title}."""\n'
        return head + "".join("\n\n" + fn.render() for fn in self.modules[mod])


def feature_files(pkg: str, slug: str, title: str, step: int) -> dict[str, str]:
    """Files of a small feature built on a side branch: step 0 adds the module, step 1 extends it and adds tests."""
    mod = (f'"""{title.capitalize()} helpers."""\n\n\ndef format_{slug}_line(values):\n'
           f'    """One {title} line from a list of values."""\n'
           '    return ",".join(str(value) for value in values)\n')
    files = {f"{pkg}/{slug}.py": mod}
    if step >= 1:
        files[f"{pkg}/{slug}.py"] = mod + (f'\n\ndef parse_{slug}_line(line):\n'
                                           f'    """Values of one {title} line."""\n'
                                           '    return line.split(",") if line else []\n')
        cls = "".join(part.capitalize() for part in slug.split("_"))
        files[f"tests/test_{slug}.py"] = (
            f"import unittest\n\n\nclass Test{cls}(unittest.TestCase):\n    def test_round_trip(self):\n"
            f"        from {pkg}.{slug} import format_{slug}_line, parse_{slug}_line\n\n"
            f'        assert parse_{slug}_line(format_{slug}_line([1, "a"])) == ["1", "a"]\n'
            f'        assert parse_{slug}_line("") == []\n')
    return files
