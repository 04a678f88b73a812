"""Fixtures shared by the sample tests: the sample company at seed 0, scale 1, and its truth."""

import json
from pathlib import Path

import pytest

from sample.company import write_sample


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sample1")
    write_sample(path, seed=0, scale=1)
    return path


@pytest.fixture(scope="module")
def truth(out) -> dict:
    return json.loads((out / ".truth/acme.json").read_text(encoding="utf-8"))
