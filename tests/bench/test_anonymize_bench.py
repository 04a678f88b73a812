"""The anonymize benchmark's bookkeeping: recall is counted per planted item the way its docstring says, and
the texts it reads hold every planted item at the truth's offsets. No model is loaded, nothing is timed."""

from __future__ import annotations

from bench.anonymize import Planted, load_corpus, presidio_caught, project_caught, recall

TEXT = "Ping Ana Lind (ana@x.example, +44 20 7946 0123); Ana knows."


def item(kind: str, value: str, outsider: bool = False, nth: int = 0) -> Planted:
    start = -1
    for _ in range(nth + 1):
        start = TEXT.index(value, start + 1)
    return Planted(0, kind, value, start, start + len(value), outsider)


def test_recall_counts_each_item_by_type_and_overall():
    planted = [item("name", "Ana Lind"), item("email", "ana@x.example", True), item("phone", "+44 20 7946 0123", True),
               item("first_name", "Ana", nth=1)]
    # Name and phone replaced; the e-mail and the bare first name "Ana" are still there as whole words.
    scrubbed = "Ping Dana Ash (ana@x.example, [PHONE]); Ana knows."
    caught = [project_caught(p, scrubbed) for p in planted]
    assert caught == [True, False, True, False]
    assert project_caught(item("first_name", "Ana", nth=1), "Ping Anabel, anab knows") is True
    assert project_caught(item("first_name", "Ana", nth=1), "ping ANA.") is False  # any case, word boundary

    key = Planted(0, "secret:github_token", "ghp_x", 0, 5, False)
    assert recall([*planted, key], [*caught, True]) == {
        "name": [1, 1], "email": [0, 1], "email/outsider": [0, 1], "phone": [1, 1], "phone/outsider": [1, 1],
        "first_name": [0, 1], "secret:github_token": [1, 1], "people": [2, 4], "non-secret": [2, 4], "all": [3, 5]}


def test_presidio_needs_an_overlapping_result_of_the_right_type_unless_any():
    name, email = item("name", "Ana Lind"), item("email", "ana@x.example")
    results = [("PERSON", 5, 8), ("URL", 19, 28)]  # "Ana" only, and the domain of the address as a URL
    assert presidio_caught(name, results) is True  # partial overlap counts
    assert presidio_caught(email, results) is False  # URL is not EMAIL_ADDRESS
    assert presidio_caught(email, results, typed=False) is True
    assert presidio_caught(name, [("PERSON", 0, 5), ("PERSON", 13, 14)]) is False  # touching is not overlapping
    assert recall([name, email], [presidio_caught(p, results) for p in (name, email)])["all"] == [1, 2]
    secret = Planted(0, "secret:password", "Lind", 9, 13, False)
    assert presidio_caught(secret, [("PERSON", 5, 13)]) is False  # Presidio has no type for secrets
    assert presidio_caught(secret, [("PERSON", 5, 13)], typed=False) is True


def test_every_planted_item_is_read_at_its_offsets(sample_company):
    texts, prose, planted = load_corpus(sample_company, "acme")
    assert len(prose) == len(texts) and any(prose)
    assert planted and all(texts[p.doc][p.start:p.end] == p.value for p in planted)
    assert {"name", "first_name", "email", "phone", "username"} <= {p.type for p in planted}
    assert any(p.outsider for p in planted) and not any(p.outsider for p in planted if p.type.startswith("secret:"))
    assert len({p.doc for p in planted}) < len(texts)  # texts without planted PII are in the mix too
