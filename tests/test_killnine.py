"""kill -9 of `groove index` and of `groove serve` during a burst of edits, at seeded random points:
after the restart the index equals a fresh index of the same folder (documents, chunk hashes, vector
count, nothing pending, FTS integrity-check). Real processes and files; a few rounds here, many in
`python -m bench killnine` (which prints N of N)."""

from __future__ import annotations

from pathlib import Path

from bench import killnine


def test_the_comparison_sees_a_lost_vector_and_a_missing_note(spawn, tmp_path: Path):
    """The oracle itself: a fingerprint differs from a fresh one when a vector or a note is gone (bench.killnine
    runs `groove index` as a child process: `spawn` marks the test)."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "groove.toml").write_text(killnine.CONFIG, encoding="utf-8")
    kb = work / "notes"
    killnine.make_notes(kb, 3)
    index = work / "i.sqlite"
    killnine.groove_index(work, kb, index)
    fresh = killnine.fingerprint(index)
    assert fresh["pending"] == 0 and fresh["vectors"] == len({h for _, _, h in fresh["chunks"]})
    assert killnine.differences(fresh, fresh) == []

    from groove.store.sqlite import connection

    con = connection.connect_sync(index)
    # A lost vector in one note, and another note gone (write order is not path order: pick apart).
    con.execute("UPDATE chunks SET embedding_id = NULL WHERE id = (SELECT min(c.id) FROM chunks c JOIN documents d"
                " ON d.id = c.doc_id WHERE d.path != (SELECT max(path) FROM documents))")
    con.execute("DELETE FROM documents WHERE path = (SELECT max(path) FROM documents)")
    con.close()
    diffs = killnine.differences(killnine.fingerprint(index), fresh)
    assert "documents" in diffs and "chunks" in diffs and "pending" in diffs


def test_kill_9_of_index_and_of_the_daemon_mid_burst_converge_to_a_fresh_index(spawn, tmp_path: Path):
    # bench.killnine starts `groove index` and `groove serve` itself and kills them: `spawn` marks the test.
    out = killnine.run_rounds(tmp_path / "work", rounds=2, notes=12, edits=15, seed=7)
    assert out["total"] == 2
    failed = [r for r in out["rounds"] if not r["converged"]]
    assert not failed, failed
    assert all(r["documents"] > 0 and r["vectors"] > 0 for r in out["rounds"])
