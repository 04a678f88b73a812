"""`taskmine extractors new NAME`: a new connector that already runs and passes the contract.

Writes two files and wires one line (three files: what a connector of an existing medium touches):
- `extractors/<name>.py`: a working connector for JSON Lines files (`*.<name>.jsonl`, one record per
  line: {"id", "ts", "author", "text"}) to edit into the real format;
- `tests/extractors/test_<name>_extractor.py`: the contract test (the kit) plus a test of a sample written by
  us, inline (a larger fixture may go in `tests/extractors/fixtures/<name>/`);
- its entry point in `pyproject.toml` (`[project.entry-points."taskmine.extractors"]`, as a third party's
  connector registers): the next `uv run` installs the project again and the connector is registered.
Nothing is overwritten: an existing file or name is an error naming it.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from core.registry import declared
from extractors.base import registry

NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")
GROUP = '[project.entry-points."taskmine.extractors"]'

MODULE = '''"""{title} connector: JSON Lines files `*.{name}.jsonl`, one record per line.

Format followed: one JSON object per line, {{"id": str, "ts": ISO 8601 with zone, "author": str, "text": str}}.
(Scaffolded by `taskmine extractors new {name}`: replace this with the real format and cite its spec.)

Invariants: streams line by line; a line that is not such an object is quarantined with its byte offset
and the next line is read.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

from extractors.base import Extractor, ExtractorConfig, Row, register_extractor


class {cls}Config(ExtractorConfig):
    max_line_bytes: int = 10 << 20


@register_extractor("{name}")
class {cls}Extractor(Extractor):
    source = "{name}"
    medium = "chat"  # what mining reads its events as: tracker, mail, chat or code (warehouse.schemas.MEDIA)
    patterns = ("*.{name}.jsonl",)
    Config = {cls}Config

    def iter_records(self, path: Path) -> Iterator[Row]:
        file = self.rel(path)
        try:
            with open(path, "rb") as f:
                offset = 0
                for line in f:
                    start, offset = offset, offset + len(line)
                    if line.strip():
                        yield self._record(line, file, start)
        except OSError as e:
            yield self.quarantine(file=file, error_class="unreadable", message=f"cannot read {{file}}: {{e}}")

    def _record(self, line: bytes, file: str, offset: int) -> Row:
        try:
            if len(line) > self.config.max_line_bytes:
                raise ValueError(f"line longer than {{self.config.max_line_bytes}} bytes")
            rec = json.loads(line)
            if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
                raise ValueError("not an object with a string 'id'")
            ts = dt.datetime.fromisoformat(str(rec["ts"]))
            if ts.tzinfo is None:
                raise ValueError("timestamp has no zone")
        except (ValueError, KeyError, RecursionError) as e:
            return self.quarantine(file=file, offset=offset, error_class="bad_record", message=str(e),
                                   excerpt=line)
        author = str(rec.get("author") or "") or None
        handle = f"{{self.source}}:{{author}}" if author else None
        people = [{{"handle": handle, "display_name": author, "email": None, "username": author, "role": "author"}}]
        return self.event(kind="message", native_id=rec["id"], thread_key=rec.get("thread") or rec["id"], ts=ts,
                          actor=handle, actor_name=author, body=str(rec.get("text") or ""),
                          attrs={{"people": people if author else []}},
                          provenance={{"file": file, "offset": offset}})
'''

TEST = '''"""Contract test of the {name} connector (scaffolded; keep it green as the connector grows)."""

import json
from pathlib import Path

from extractors.{name} import {cls}Extractor
from extractors.testing import ExtractorContract

# A sample written by us (never a real export's text): what the real format looks like, record by record.
SAMPLE = ('{{"id": "m1", "ts": "2021-03-01T10:00:00+00:00", "author": "ada", "text": "first message"}}\\n'
          '{{"id": "m2", "ts": "2021-03-01T10:05:00+00:00", "author": "grace", "text": "a reply", "thread": "m1"}}\\n')


def _write(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\\n" for r in records))
    return path


def _rec(i: int) -> dict:
    return {{"id": f"m{{i}}", "ts": f"2021-03-0{{1 + i % 9}}T10:00:00+01:00", "author": f"user{{i % 2}}",
            "text": f"message {{i}}"}}


class Test{cls}Contract(ExtractorContract):
    extractor = {cls}Extractor
    record_kind = "message"

    def make_input(self, tmp_path, n_records):
        return _write(tmp_path / "export.{name}.jsonl", [_rec(i) for i in range(n_records)])

    def make_bad_input(self, tmp_path):
        return _write(tmp_path / "export.{name}.jsonl", [_rec(0), "{{not json", _rec(1)]), 2


def test_sample_ingests(tmp_path):
    path = tmp_path / "sample.{name}.jsonl"
    path.write_text(SAMPLE)
    rows = list({cls}Extractor("sample", root=tmp_path).iter_records(path))
    assert [r.native_id for r in rows] == ["m1", "m2"]
'''


class ScaffoldError(ValueError):
    pass


def scaffold(name: str, repo: Path) -> list[Path]:
    """Write the connector and its contract test under `repo` and its entry point in `repo/pyproject.toml`;
    return what was written."""
    if not NAME.match(name) or keyword.iskeyword(name):
        raise ScaffoldError(f"{name!r} is not a usable name: lower-case letters, digits and _, starting with a "
                            "letter (e.g. zendesk_json)")

    pyproject = repo / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8") if pyproject.exists() else ""
    if name in registry() or name in declared(text)["taskmine.extractors"]:
        where = registry()[name].origin if name in registry() else str(pyproject)
        raise ScaffoldError(f"an extractor named {name!r} exists already ({where})")
    if GROUP not in text:
        raise ScaffoldError(f"{pyproject} has no {GROUP} table; add it, or add the entry point by hand")
    cls = "".join(part.capitalize() for part in name.split("_"))
    files = {
        repo / "extractors" / f"{name}.py": MODULE.format(name=name, cls=cls, title=cls),
        repo / "tests" / "extractors" / f"test_{name}_extractor.py": TEST.format(name=name, cls=cls),
    }
    for path in files:
        if path.exists():
            raise ScaffoldError(f"{path} exists; pick another name or remove it")
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    pyproject.write_text(text.replace(GROUP + "\n", f'{GROUP}\n{name} = "extractors.{name}:{cls}Extractor"\n', 1),
                         encoding="utf-8")
    return [*files, pyproject]
