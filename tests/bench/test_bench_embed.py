"""`taskmine bench embed` runs end to end at scale 1 (the real packaged model; no timing asserted)."""

from bench.embed import bench_embed


def test_bench_embed_reports_the_three_runs(capsys, tmp_path):
    assert bench_embed(1, str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "SentenceTransformer.encode (baseline)" in out and "warm re-run vs first run" in out
    assert "embedded 0" in out   # the warm run embeds nothing
