"""A model switch's embedding queue walks the texts once: each batch starts where the last one
ended (a keyset on the hash index), instead of walking again past every text already embedded.

Real SQLite files. The work a batch costs is counted in SQLite virtual-machine steps (the
progress handler), never in seconds: with a rescan from the start, the last batch of a switch
steps over every text before it and costs many times the first.
"""

from __future__ import annotations

import numpy as np

from groove.store.sqlite import connection, shadow
from groove.store.sqlite.store import SqliteShadowQueue
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once

TEXTS = 240
BATCH = 12


async def _switching(tmp_path):
    from groove.config import load_settings

    kb = tmp_path / "kb"
    for i in range(TEXTS):
        write(kb / f"n{i:03d}.md", f"# Note {i}\n\ntext number {i} of the switch\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "switch.sqlite")
    await index_once(settings, embedder=BagOfWordsEmbedder())
    con = connection.connect_sync(settings.resolved_index_path())
    try:
        shadow.begin_sync(con, model="model-new", dimension=8, settings_json=None)
    finally:
        con.close()
    return await connection.connect(settings.resolved_index_path())


async def _steps(conn, work) -> tuple[int, object]:
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    await conn.set_progress_handler(count, 100)
    try:
        out = await work()
    finally:
        await conn.set_progress_handler(None, 100)
    return steps[0], out


async def test_a_switch_hands_out_every_text_once_and_its_last_batch_costs_what_its_first_did(tmp_path):
    conn = await _switching(tmp_path)
    store = SqliteShadowQueue(conn)
    seen: list[str] = []
    costs: list[int] = []
    try:
        distinct = (await (await conn.execute("SELECT count(DISTINCT hash) FROM chunks")).fetchone())[0]
        while True:
            cost, batch = await _steps(conn, lambda: store.pending_batch(BATCH))
            if not batch:
                break
            costs.append(cost)
            hashes = [h for h, _ in batch]
            seen += hashes
            await store.store_vectors(hashes, np.ones((len(hashes), 8), dtype=np.float32))
    finally:
        await conn.close()
    assert len(seen) == len(set(seen)) == distinct >= TEXTS
    assert len(costs) >= TEXTS // BATCH
    # a rescan from the start would make the last full batch cost ~20x the first
    assert max(costs[:-1]) <= 2 * costs[0] + 10, costs


async def test_texts_behind_the_cursor_are_found_when_the_queue_wraps(tmp_path):
    """A text edited during the switch can hash below the cursor; so can one set aside and due again."""
    conn = await _switching(tmp_path)
    store = SqliteShadowQueue(conn)
    try:
        first = await store.pending_batch(BATCH)
        set_aside = first[0][0]
        await store.store_vectors([h for h, _ in first[1:]], np.ones((len(first) - 1, 8), dtype=np.float32))
        store.after = "f" * 64  # past every hash
        rest: list[str] = []
        while batch := await store.pending_batch(BATCH, exclude=set(rest)):
            rest += [h for h, _ in batch]
        pending = (await (await conn.execute(
            "SELECT count(DISTINCT hash) FROM chunks c WHERE NOT EXISTS"
            " (SELECT 1 FROM embeddings_shadow s WHERE s.hash = c.hash)")).fetchone())[0]
    finally:
        await conn.close()
    assert set_aside in rest
    assert len(rest) == len(set(rest)) == pending
