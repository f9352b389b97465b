"""Odd files and names on real folders and a real index (issue 22 points 10, 11, 13, 14): a note replaced by
a folder of its name and back, names with a no-break space or an emoji sequence, UTF-32, a NUL far into a
note, a symlinked folder."""

from __future__ import annotations

import codecs
import os
import shutil
from pathlib import Path

import anyio

from groove.ops.doctor import diagnose
from groove.search.request import SearchRequest
from tests.support.common import eventually, write
from tests.support.daemon import running
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, read_status

FAKE = BagOfWordsEmbedder()


def index(settings) -> dict:
    # the report as `groove index --format json` prints it
    return anyio.run(lambda: index_once(settings, embedder=FAKE)).model_dump(mode="json")


def plain(answer) -> dict:
    """A command's answer as a dict (a dict, or a pydantic answer model)."""
    return answer if isinstance(answer, dict) else answer.model_dump(mode="json")


def status(settings) -> dict:
    return plain(anyio.run(lambda: read_status(settings, embedder=FAKE)))


async def found(daemon, word: str) -> list[str]:
    resp = plain(await daemon.index.search(SearchRequest(query=word, retriever="fts", limit=10)))
    return [r["path"] for r in resp["results"]]


async def test_a_note_replaced_by_a_folder_of_its_name_and_back_is_handled_by_the_watcher_at_once(kb: Path, make_settings):
    write(kb / "x.md", "# X\n\nfilebeforeword\n")
    settings = make_settings(kb, **{"watch.debounce_ms": 50, "watch.reconcile_interval_s": 0})
    async with running(settings, BagOfWordsEmbedder()) as daemon:
        (kb / "x.md").unlink()
        write(kb / "x.md" / "inner.md", "# Inner\n\ninsidefolderword\n")

        async def became_folder() -> bool:
            st = plain(await daemon.index.status())
            return await found(daemon, "insidefolderword") == ["x.md/inner.md"] and st["documents"] == 1

        await eventually(became_folder, "x.md (a note) gone and x.md/inner.md indexed", timeout=30)
        assert await found(daemon, "filebeforeword") == []

        shutil.rmtree(kb / "x.md")
        write(kb / "x.md", "# X again\n\nfileagainword\n")

        async def became_file() -> bool:
            st = plain(await daemon.index.status())
            return await found(daemon, "fileagainword") == ["x.md"] and st["documents"] == 1

        await eventually(became_file, "x.md/inner.md gone and x.md (a note again) indexed", timeout=30)
        st = plain(await daemon.index.status())
        assert st["skipped"] == []  # no phantom "x.md/inner.md: cannot stat: Not a directory"


def test_names_with_a_no_break_space_or_an_emoji_sequence_are_indexed_and_only_control_characters_are_skipped(
        kb: Path, make_settings):
    names = ["a\u00a0b.md", "\U0001F469\u200d\U0001F4BB notes.md", "caf\u00e9\ufe0f.md"]
    for i, name in enumerate(names):
        write(kb / name, f"# N{i}\n\nunusualname{i}\n")
    write(kb / "tab\there.md", "# Tab\n\ntabword\n")
    settings = make_settings(kb)
    report = index(settings)
    assert report["added"] == 3
    skipped = {x["path"]: x["reason"] for x in report["skipped_files"]}
    assert list(skipped) == ["tab\\there.md"] and "control character" in skipped["tab\\there.md"]


def test_a_utf32_note_with_a_byte_order_mark_is_decoded_not_called_binary(kb: Path, make_settings):
    text = "# Unicode 32\n\nthirtytwoword and 日本語\n"
    (kb / "le.md").write_bytes(codecs.BOM_UTF32_LE + text.encode("utf-32-le"))
    (kb / "be.md").write_bytes(codecs.BOM_UTF32_BE + text.replace("thirtytwo", "bigend").encode("utf-32-be"))
    settings = make_settings(kb)
    report = index(settings)
    assert report["added"] == 2 and report["skipped_files"] == []

    async def search(word: str) -> list[str]:
        from tests.support.oneshot import search_once

        resp = plain(await search_once(settings, SearchRequest(query=word, retriever="fts"), embedder=FAKE))
        return [r["path"] for r in resp["results"]]

    assert anyio.run(search, "thirtytwoword") == ["le.md"]
    assert anyio.run(search, "bigendword") == ["be.md"]


def test_text_after_a_nul_byte_past_the_first_8_kb_is_found_and_the_note_is_warned_about(kb: Path, make_settings):
    head = b"# Late NUL\n\n" + b"filler text for the first eight kilobytes. " * 250 + b"\n\n"
    assert len(head) > 8192
    (kb / "late.md").write_bytes(head + b"broken\x00 afternulword is here\n")
    (kb / "early.md").write_bytes(b"# Early\n\n\x00binary\n")
    settings = make_settings(kb)
    report = index(settings)
    assert {x["path"]: x["reason"] for x in report["skipped_files"]} == {"early.md": "binary file (NUL bytes)"}
    warnings = {x["path"]: x["warnings"] for x in report["note_warnings"]}
    assert "NUL byte(s)" in warnings["late.md"][0] and "line 5" in warnings["late.md"][0]

    async def search(word: str) -> list[str]:
        from tests.support.oneshot import search_once

        resp = plain(await search_once(settings, SearchRequest(query=word, retriever="fts"), embedder=FAKE))
        return [r["path"] for r in resp["results"]]

    assert anyio.run(search, "afternulword") == ["late.md"]  # the word table too (a one-word query)


def test_a_symlinked_folder_is_reported_by_status_and_doctor_as_an_info_line_with_its_path(kb: Path, make_settings, tmp_path):
    write(kb / "a.md", "# A\n\nplain\n")
    outside = tmp_path / "elsewhere"
    write(outside / "inside.md", "# Inside\n\nfollowedword\n")
    os.symlink(outside, kb / "linked")
    settings = make_settings(kb)
    report = index(settings)
    assert report["added"] == 1 and report["skipped"] == 0
    assert [x["path"] for x in report["linked_dirs"]] == ["linked/"]
    shown = {x["path"]: x["reason"] for x in status(settings)["skipped"]}
    assert shown["linked/"].startswith(f"symlinked folder (to {outside})") and "not followed" in shown["linked/"]
    doctor = diagnose(settings)
    info = [f for f in doctor["findings"] if f["check"] == "symlinked_folders"]
    assert info and info[0]["level"] == "info" and info[0]["examples"] == ["linked/"]
    assert [f["check"] for f in doctor["findings"] if "linked/" in f["examples"]] == ["symlinked_folders"]
    # The advice is one that works: a note linked from outside the folder is skipped as well (it once said "link its
    # notes one by one"), so it names a folder of its own.
    assert "--kb NAME=PATH" in info[0]["fix"] and "one by one" not in info[0]["fix"] + shown["linked/"]
    os.symlink(outside / "inside.md", kb / "inside.md")
    again = index(settings)
    assert {x["path"]: x["reason"] for x in again["skipped_files"]}["inside.md"] == (
        "symlink pointing outside the notes folder")
