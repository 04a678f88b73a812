"""The contract every extractor passes: a pytest base class a connector's test inherits in three lines.

    class TestJiraContract(ExtractorContract):
        extractor = JiraJsonExtractor
        record_kind = "issue_created"              # the event kind emitted once per input record
        def make_input(self, tmp_path, n_records): ...   # a valid input with n records -> its path
        def make_bad_input(self, tmp_path): ...          # good records around one bad one -> (path, n_good)

Inputs are written under `tmp_path`, which is also the dataset folder (`root`) the extractor runs with.

What the contract means (DESIGN.md, Convention 5):
- the extractor is registered under its name and `detect` claims the input it is given;
- a valid input yields exactly one `record_kind` event per record and no quarantine row;
- every row is schema-valid (Arrow `to_table` and a `to_row`/`from_row` round trip succeed), carries the
  dataset, the extractor's source, provenance naming the input, and follows the identity conventions
  (actor and attrs.people handles are "<source>:...", the actor is among attrs.people);
- event ids are `event_id(dataset, source, native_id)`, unique within an input, and independent of
  the run id; two runs over one input give equal rows;
- a valid input with zero records yields nothing at all: no event and no explanatory quarantine row
  (an empty export is not an error; a file that is not even the format, e.g. zero bytes of JSON, is);
- a bad record becomes a `Quarantine` row naming the input file (relative to the dataset folder) with a
  reason and a unique quarantine id, and every good record around it is still yielded;
- iterating makes no network connection (socket connect/resolve raise during the run).

Imported by tests only (it imports pytest).
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from extractors.base import Extractor, Row, registry
from warehouse.ids import event_id
from warehouse.schemas import MEDIA, Event, Quarantine, to_table

ROLES = {"author", "committer", "reporter", "assignee", "creator", "commenter", "changelog_author", "from",
         "to", "cc", "bcc", "sender", "mentioned", "reviewer", "actor"}
PERSON_KEYS = {"handle", "display_name", "email", "username", "role"}


class ExtractorContract:
    """Inherit, set `extractor` and `record_kind`, write `make_input` and `make_bad_input`."""

    extractor: ClassVar[type[Extractor]]
    record_kind: ClassVar[str]
    dataset: ClassVar[str] = "contract"
    n_records: ClassVar[int] = 3

    def make_input(self, tmp_path: Path, n_records: int) -> Path:
        raise NotImplementedError

    def make_bad_input(self, tmp_path: Path) -> tuple[Path, int]:
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------------------------
    def run(self, root: Path, path: Path, run_id: str = "run-1") -> list[Row]:
        return list(self.extractor(self.dataset, None, run_id, root=root).iter_records(path))

    @staticmethod
    def split(rows: list[Row]) -> tuple[list[Event], list[Quarantine]]:
        assert all(isinstance(r, (Event, Quarantine)) for r in rows), "rows must be Event or Quarantine"
        return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]

    def kinds(self, events: list[Event]) -> int:
        return sum(e.kind == self.record_kind for e in events)

    @pytest.fixture
    def valid(self, tmp_path: Path) -> tuple[Path, Path, list[Row]]:
        path = self.make_input(tmp_path, self.n_records)
        return tmp_path, path, self.run(tmp_path, path)

    # -- the contract ----------------------------------------------------------------------------------
    def test_registered_under_its_name(self):
        reg = registry()
        assert self.extractor.name, "decorate the class with @register_extractor(name)"
        assert reg[self.extractor.name].cls is self.extractor
        assert self.extractor.source, "set the class attribute `source`"
        assert self.extractor.medium in MEDIA, (f"set the class attribute `medium` to one of {', '.join(MEDIA)}: "
                                                "what mining reads the events as (a chat connector's messages "
                                                "become chat_answer work items with no change to mining)")

    def test_registered_without_the_test_importing_it(self):
        """A fresh interpreter sees the name: the class is an entry point of the `taskmine.extractors` group."""
        code = f"from extractors.base import registry; assert {self.extractor.name!r} in registry()"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        cls = self.extractor
        assert r.returncode == 0, (
            f"{cls.name!r} is not registered at startup: add `{cls.name} = \"{cls.__module__}:{cls.__qualname__}\"` "
            f"under [project.entry-points.\"taskmine.extractors\"] in pyproject.toml (a third party: in theirs), "
            f"then `uv run ...` installs it again ({r.stderr.strip().splitlines()[-1:] or ''})")

    def test_detect_claims_the_input(self, tmp_path: Path):
        path = self.make_input(tmp_path, self.n_records)
        assert path in self.extractor.detect(tmp_path)

    def test_yields_one_event_per_record(self, valid):
        _, _, rows = valid
        events, quarantined = self.split(rows)
        assert quarantined == []
        assert self.kinds(events) == self.n_records

    def test_rows_are_schema_valid(self, valid):
        root, path, rows = valid
        events, quarantined = self.split(rows)
        assert to_table(Event, events).num_rows == len(events)
        assert to_table(Quarantine, quarantined).num_rows == len(quarantined)
        for e in events:
            assert Event.from_row(e.to_row()) == e, "attrs must survive a JSON round trip"
            assert (e.dataset, e.source) == (self.dataset, self.extractor.source)
            assert e.ts.tzinfo is not None
            assert e.provenance.get("file") == path.relative_to(root).as_posix()

    def test_identity_conventions(self, valid):
        events, _ = self.split(valid[2])
        prefix = f"{self.extractor.source}:"
        for e in events:
            people = e.attrs.get("people", [])
            for p in people:
                assert set(p) >= PERSON_KEYS and p["role"] in ROLES and p["handle"].startswith(prefix), p
            if e.actor is not None:
                assert e.actor.startswith(prefix) and e.actor in {p["handle"] for p in people}, e.actor

    def test_event_ids_stable_and_unique(self, valid):
        root, path, rows = valid
        events, _ = self.split(rows)
        ids = [e.event_id for e in events]
        assert len(ids) == len(set(ids))
        assert all(e.event_id == event_id(self.dataset, self.extractor.source, e.native_id) for e in events)
        again, _ = self.split(self.run(root, path, run_id="run-2"))
        assert [e.event_id for e in again] == ids

    def test_deterministic(self, valid):
        root, path, rows = valid
        assert [r.to_row() for r in self.run(root, path)] == [r.to_row() for r in rows]

    def test_empty_input_yields_nothing(self, tmp_path: Path):
        path = self.make_input(tmp_path, 0)
        assert self.run(tmp_path, path) == []

    def test_bad_record_is_quarantined_and_neighbours_survive(self, tmp_path: Path):
        path, n_good = self.make_bad_input(tmp_path)
        events, quarantined = self.split(self.run(tmp_path, path))
        assert quarantined, "the bad record must become a Quarantine row"
        assert len({q.quarantine_id for q in quarantined}) == len(quarantined)
        for q in quarantined:
            assert q.file == path.relative_to(tmp_path).as_posix() or path.is_dir()
            assert q.error_class and q.message
            assert q.offset is not None or q.member, "say where in the input the bad record is"
        assert self.kinds(events) == n_good

    def test_survives_damage(self, tmp_path: Path):
        """Truncation, inserted junk and bit flips never raise; every row stays schema-valid."""
        clean = self.make_input(tmp_path / "clean", 5)
        files = [clean] if clean.is_file() else sorted(p for p in clean.rglob("*") if p.is_file()
                                                       and ".git" not in p.parts)
        rng = random.Random(self.extractor.name)
        for case in range(6):
            root = tmp_path / f"damaged-{case}"
            path = self.make_input(root, 5)
            targets = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                           and ".git" not in p.parts)
            if not targets or not files:
                return
            victim = rng.choice(targets)
            data = bytearray(victim.read_bytes())
            at = rng.randrange(len(data) or 1)
            if case % 3 == 0:
                data = data[:at]
            elif case % 3 == 1:
                data[at:at] = bytes(rng.randrange(256) for _ in range(64))
            else:
                for i in rng.sample(range(len(data)), min(8, len(data))):
                    data[i] ^= 1 << rng.randrange(8)
            victim.write_bytes(bytes(data))
            events, quarantined = self.split(self.run(root, path))
            to_table(Event, events)
            to_table(Quarantine, quarantined)

    def test_no_network(self, valid, monkeypatch):
        root, path, rows = valid

        def refuse(*args, **kwargs):
            raise AssertionError("an extractor opened a network connection")

        for name in ("connect", "connect_ex"):
            monkeypatch.setattr(socket.socket, name, refuse)
        monkeypatch.setattr(socket, "getaddrinfo", refuse)
        assert [r.to_row() for r in self.run(root, path)] == [r.to_row() for r in rows]
