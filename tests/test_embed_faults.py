"""When embedding fails: a text that always fails is set aside (the rest of the queue goes on), and a
query that cannot be embedded searches full text alone. Real index files, real notes on disk, the real
watcher; the fake embedder (tests/support/fakes.py) raises on the texts a test chooses."""

from __future__ import annotations

import datetime as dt
import time

import anyio

from groove.daemon import Daemon
from groove.search.request import SearchRequest
from tests.support.common import eventually, write
from tests.support.daemon import fast, running
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once

POISON = "xylofailure"


def notes(kb, n: int = 6) -> None:
    for i in range(n):
        write(kb / f"n{i}.md", f"# Note {i}\n\nA plain note number {i} about tea{i} and gardens.\n")


async def vector_paths(daemon: Daemon, query: str) -> list[str]:
    resp = await daemon.service.search(SearchRequest(query=query, limit=10, retriever="vector"))
    return [r.path for r in resp.results]


async def test_a_text_that_always_fails_is_set_aside_and_every_other_text_is_embedded(kb, make_settings):
    notes(kb)
    # Written last, so it is the newest edit: the queue's order fetches it first every time.
    write(kb / "poisoned.md", f"# Poisoned\n\nThis note mentions {POISON} and the model always chokes on it.\n")
    fake = BagOfWordsEmbedder()
    fake.fail_on.add(POISON)
    async with running(fast(make_settings, kb), fake) as daemon:
        async def only_the_poison_left() -> bool:
            return await daemon.index.pending() == 1

        await eventually(only_the_poison_left, "every text but the failing one to get its vector")
        status = await daemon.service.status()
        failures = status.embedding_failures
        assert failures.count == 1
        assert POISON in failures.last_error and "injected failure" in failures.last_error
        # ISO-8601 UTC to the second now (a time in the future, cut to its second, is still > now - 1)
        assert dt.datetime.fromisoformat(failures.next_retry_at).timestamp() > time.time() - 1
        assert "n3.md" in await vector_paths(daemon, "tea3 gardens")

        # New work written while the failing text is still set aside is embedded too: no starvation.
        write(kb / "later.md", "# Later\n\nA later note about lighthouses.\n")

        async def later_embedded() -> bool:
            return "later.md" in await vector_paths(daemon, "lighthouses")

        await eventually(later_embedded, "a note written after the failure to be embedded")
        assert await daemon.index.pending() == 1


async def test_a_set_aside_text_is_retried_with_backoff_and_embedded_once_the_model_takes_it(kb, make_settings):
    write(kb / "poisoned.md", f"# Poisoned\n\nThis note mentions {POISON} once.\n")
    fake = BagOfWordsEmbedder()
    fake.fail_on.add(POISON)
    async with running(fast(make_settings, kb), fake) as daemon:
        async def failed_twice() -> bool:
            return fake.failed_calls >= 2

        await eventually(failed_twice, "the failing text to be retried")
        # Exponential backoff: the retries slow down instead of hammering the model every second.
        await anyio.sleep(1.5)
        assert fake.failed_calls <= 4
        assert (await daemon.service.status()).embedding_failures.count == 1

        fake.fail_on.clear()

        async def recovered() -> bool:
            return await daemon.index.pending() == 0

        await eventually(recovered, "the set-aside text to be embedded on a later retry")
        assert (await daemon.service.status()).embedding_failures.model_dump() == {"count": 0, "last_error": None, "next_retry_at": None}
        assert await vector_paths(daemon, f"{POISON} once") == ["poisoned.md"]


async def test_when_the_query_cannot_be_embedded_search_falls_back_to_full_text_and_says_so(kb, make_settings):
    write(kb / "volcano.md", "# Volcano\n\nThe stratovolcano erupted at dawn.\n")
    write(kb / "bread.md", "# Bread\n\nSourdough needs a long fermentation.\n")
    fake = BagOfWordsEmbedder()
    async with running(fast(make_settings, kb), fake) as daemon:
        healthy = await daemon.service.search(SearchRequest(query="stratovolcano", limit=5))
        assert healthy.vectors_degraded is False

        fake.fail_queries = True
        for retriever in ("hybrid", "vector"):
            resp = await daemon.service.search(SearchRequest(query="stratovolcano", limit=5, retriever=retriever))
            assert resp.vectors_degraded is True
            assert [r.path for r in resp.results] == ["volcano.md"]
            assert resp.results[0].fts_rank == 1 and resp.results[0].vec_rank is None


def test_groove_index_embeds_everything_else_and_leaves_the_failing_text_pending(kb, make_settings):
    notes(kb, 4)
    write(kb / "poisoned.md", f"# Poisoned\n\nThe {POISON} note.\n")
    fake = BagOfWordsEmbedder()
    fake.fail_on.add(POISON)
    summary = anyio.run(lambda: index_once(make_settings(kb), embedder=fake))
    assert summary.pending_chunks == 1
    assert summary.chunks_embedded == summary.chunks_written - 1
