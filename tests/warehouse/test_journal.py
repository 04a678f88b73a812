"""A table's journal: a long stage's finished units kept one at a time without rewriting the partition, seen by
every reader, folded into the same file a single write would have made."""

from warehouse.schemas import Validation
from warehouse.store import Store


def run(task: str, kind: str, score: float | None = 1.0) -> Validation:
    return Validation(validation_id=f"{task}-{kind}", task_id=task, dataset="d", run_kind=kind, attempt=0,
                      score=score, checks=[{"id": "c", "score": score}], duration_s=0.25, sandbox="local")


def test_journal_rows_are_read_over_the_partition_and_folded_into_the_file_one_write_makes(tmp_path):
    store = Store(tmp_path / "a")
    store.replace("validations", "d", [run("t1", "oracle"), run("t1", "null", 0.0)])
    store.journal_add("validations", "d", [run("t2", "oracle"), run("t2", "null", 0.0)])
    store.journal_add("validations", "d", [run("t1", "oracle", 0.5)])        # a key's later row wins
    assert store.count("validations", "d") == 4
    assert {(v.validation_id, v.score) for v in store.read("validations", "d")} == {
        ("t1-oracle", 0.5), ("t1-null", 0.0), ("t2-oracle", 1.0), ("t2-null", 0.0)}
    with open(store.journal("validations", "d"), "a") as f:
        f.write('{"validation_id": "t3-oracle", "task_')              # a kill in the middle of a line
    assert store.count("validations", "d") == 4
    assert store.fold_journal("validations", "d") == 3 and not store.journal("validations", "d").exists()

    direct = Store(tmp_path / "b")
    direct.replace("validations", "d", [run("t1", "oracle", 0.5), run("t1", "null", 0.0), run("t2", "oracle"),
                                        run("t2", "null", 0.0)])
    assert store.partition("validations", "d").read_bytes() == direct.partition("validations", "d").read_bytes()
    assert store.fold_journal("validations", "d") == 0
