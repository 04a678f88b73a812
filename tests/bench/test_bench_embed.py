"""`taskmine bench embed` runs end to end at scale 1 with the real packaged model (no speed asserted: the
exit code is about correctness only)."""

import json

import pytest

from bench.embed import bench_embed


@pytest.mark.slow
def test_bench_embed_reports_baseline_cold_and_warm(capsys, tmp_path):
    assert bench_embed(1, str(tmp_path)) == 0
    out = capsys.readouterr().out
    for row in ("baseline: SentenceTransformer.encode (best of", "taskmine cold: embed_cached, empty (best of",
                "taskmine warm: same store", "model load, in no texts/s below", "cold wall / warm wall:"):
        assert row in out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["embedded"]["warm"] == report["embedded"]["warm_fresh_process"] == 0
    assert report["embedded"]["cold"] == report["unique"] <= report["texts"] == report["embedded"]["baseline"]
    assert report["agreement"]["max_abs_diff"] < 1e-5 and report["agreement"]["warm_equals_cold"]
    assert report["agreement"]["cache_file_unchanged_by_warm"]
    assert not report["agreement"]["fresh_process_imported_torch"]
