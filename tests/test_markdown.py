"""groove.corpus.markdown: a note's text -> frontmatter, title, tags, date and chunks."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groove.corpus.markdown import (
    Chunk,
    ParsedNote,
    embed_text,
    estimate_tokens,
    normalise_text,
    parse_note,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "notes"

_PIECE = re.compile(
    r"[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f]"  # one token per CJK char
    r"|[A-Za-z]{1,4}"  # words in pieces of up to four letters
    r"|\d"
    r"|[^\sA-Za-z\d\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f]"
)


def wordpiece_ish(text: str) -> int:
    """A counter shaped like a real subword tokenizer (and not additive with ours)."""
    return len(_PIECE.findall(text))


def words(text: str) -> int:
    return len(text.split())


COUNTERS = {"estimate": estimate_tokens, "wordpiece": wordpiece_ish, "words": words}


def original_lines(text: str) -> list[str]:
    if text.startswith("\ufeff"):
        text = text[1:]
    return re.split(r"\r\n|\r|\n", text)


_LONG_RUN = re.compile(r"[^\s\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]{100,}")


def expected_size(count, text: str) -> int:
    """The counter's tokens, except that a run of 100+ characters without whitespace or CJK (a long
    word) counts one token per character and is not counted by the counter (whose single [UNK] for a
    long word would hide its size); the text between long words is counted part by part."""
    runs = _LONG_RUN.findall(text)
    if not runs:
        return count(text)
    between = [part.strip() for part in _LONG_RUN.split(text) if part.strip()]
    return sum(len(r) for r in runs) + sum(count(part) for part in between)


def assert_well_formed(
    text: str,
    note: ParsedNote,
    *,
    body: str | None = None,
    max_tokens: int = 256,
    count=estimate_tokens,
) -> None:
    """The invariants every parse keeps: no bytes lost, size bound, line spans, hashes."""
    if body is not None:
        if body.strip():
            assert "".join(c.content for c in note.chunks) == body
        else:
            assert note.chunks == ()
    lines = original_lines(text)
    for ordinal, chunk in enumerate(note.chunks):
        assert chunk.ordinal == ordinal
        assert chunk.content.strip()
        assert chunk.token_count == expected_size(count, embed_text(chunk.content))
        assert chunk.token_count <= max_tokens
        assert chunk.hash == hashlib.sha256(embed_text(chunk.content).encode()).hexdigest()
        own = chunk.content.split("\n")
        if chunk.content.endswith("\n"):
            own.pop()
        filled = [i for i, line in enumerate(own) if line.strip()]
        if not filled:
            continue
        own = own[filled[0] : filled[-1] + 1]
        assert chunk.end_line - chunk.start_line + 1 == len(own)
        span = lines[chunk.start_line - 1 : chunk.end_line]
        if len(own) == 1:
            assert own[0] in span[0]
        else:
            assert span[0].endswith(own[0])
            assert span[-1].startswith(own[-1])
            assert span[1:-1] == own[1:-1]


def headings(note: ParsedNote) -> list[str]:
    return [c.heading for c in note.chunks]


def para(n_words: int, word: str = "lorem") -> str:
    return " ".join(f"{word}{i}" for i in range(n_words)) + "\n"


# ---------------------------------------------------------------------------
# Empty and trivial input


def test_an_empty_file_yields_no_chunks_and_takes_its_title_from_the_stem():
    note = parse_note("", stem="inbox")
    assert note.chunks == ()
    assert note.title == "inbox"
    assert note.tags == ()
    assert note.date is None
    assert note.frontmatter == {}
    assert note.warnings == ()


def test_a_whitespace_only_file_yields_no_chunks():
    assert parse_note("\n  \n\t\n\r\n", stem="blank").chunks == ()


def test_a_file_with_only_frontmatter_keeps_its_metadata_and_yields_no_chunks():
    text = "---\ntitle: Placeholder\ntags: [todo]\ndate: 2024-05-01\n---\n\n\n"
    note = parse_note(text, stem="p")
    assert note.chunks == ()
    assert (note.title, note.tags, note.date) == ("Placeholder", ("todo",), "2024-05-01")
    assert note.warnings == ()


def test_a_file_of_one_short_line_without_a_heading_is_one_preamble_chunk():
    note = parse_note("just a thought", stem="t")
    assert len(note.chunks) == 1
    chunk = note.chunks[0]
    assert (chunk.heading, chunk.level, chunk.context) == ("", 0, "t")
    assert (chunk.start_line, chunk.end_line) == (1, 1)


# ---------------------------------------------------------------------------
# Frontmatter


def test_frontmatter_title_tags_date_and_every_other_key_are_kept():
    text = (
        "---\n"
        "title: SQLite WAL\n"
        "tags: [sqlite, '#databases', sqlite]\n"
        "date: 2024-03-14\n"
        "aliases: [WAL mode]\n"
        "status: evergreen\n"
        "rating: 4.5\n"
        "---\n"
        "# Something else\n\nbody\n"
    )
    note = parse_note(text, stem="wal")
    assert note.title == "SQLite WAL"
    assert note.tags == ("sqlite", "databases")
    assert note.date == "2024-03-14"
    assert note.frontmatter == {
        "title": "SQLite WAL",
        "tags": ["sqlite", "#databases", "sqlite"],
        "date": "2024-03-14",
        "aliases": ["WAL mode"],
        "status": "evergreen",
        "rating": 4.5,
    }
    assert note.warnings == ()


@pytest.mark.parametrize(
    "tags, expected",
    [
        ("'rust, async,  tokio'", ("rust", "async", "tokio")),
        ("'#rust #async #rust'", ("rust", "async")),
        ("日本語 検索", ("日本語", "検索")),
        ("[project/groove, ' spaced ']", ("project/groove", "spaced")),
        ("42", ("42",)),
        ("", ()),
    ],
)
def test_tags_may_be_a_list_or_a_comma_or_space_separated_string(tags, expected):
    note = parse_note(f"---\ntags: {tags}\n---\nbody\n", stem="t")
    assert note.tags == expected


def test_inline_hashtags_in_the_body_are_not_collected_as_tags():
    note = parse_note("---\ntags: [a]\n---\n#idea worth keeping #later\n", stem="t")
    assert note.tags == ("a",)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("2024-03-01", "2024-03-01"),
        ("'2024-03-01'", "2024-03-01"),
        ("2024/03/01", "2024-03-01"),
        ("2024.3.1", "2024-03-01"),
        ("2024年3月1日", "2024-03-01"),
        ("20240301", "2024-03-01"),
        ("2024-03-01 09:30:00", "2024-03-01T09:30:00"),
        ("2024-03-01 09:30", "2024-03-01T09:30:00"),
        ("2024-03-01T09:30:00+09:00", "2024-03-01T09:30:00+09:00"),
    ],
)
def test_dates_are_normalised_to_iso_and_keep_a_time_when_they_have_one(raw, expected):
    note = parse_note(f"---\ndate: {raw}\n---\nbody\n", stem="d")
    assert note.date == expected
    assert note.warnings == ()


def test_an_unparseable_date_leaves_the_note_undated_with_a_warning_but_keeps_the_key():
    note = parse_note("---\ndate: sometime in spring\n---\nbody\n", stem="d")
    assert note.date is None
    assert len(note.warnings) == 1 and "date" in note.warnings[0]
    assert note.frontmatter["date"] == "sometime in spring"
    assert len(note.chunks) == 1


def test_an_impossible_yaml_date_is_a_warning_and_the_body_is_still_indexed():
    note = parse_note("---\ndate: 2024-02-30\n---\n# Body\n", stem="d")
    assert note.frontmatter == {}
    assert note.date is None
    assert "not valid YAML" in note.warnings[0]
    assert "".join(c.content for c in note.chunks) == "# Body\n"


def test_frontmatter_values_that_are_not_json_serialisable_are_converted():
    text = (
        "---\n"
        "created: 2023-01-02 03:04:05\n"
        "when: {start: 2024-01-01, end: 2024-01-31}\n"
        "2024-06-01: a date as a key\n"
        "7: a number as a key\n"
        "blob: !!binary aGVsbG8=\n"
        "ids: !!set {a: null}\n"
        "nan: .nan\n"
        "---\n"
    )
    note = parse_note(text, stem="j")
    json.dumps(note.frontmatter, allow_nan=False)
    assert note.frontmatter["created"] == "2023-01-02T03:04:05"
    assert note.frontmatter["when"] == {"start": "2024-01-01", "end": "2024-01-31"}
    assert note.frontmatter["2024-06-01"] == "a date as a key"
    assert note.frontmatter["7"] == "a number as a key"
    assert note.frontmatter["blob"] == "aGVsbG8="
    assert note.frontmatter["nan"] == "nan"


def test_invalid_yaml_frontmatter_is_reported_with_its_file_line_and_the_body_is_indexed():
    text = "---\ntitle: ok\ntags: [unclosed\n---\n# Real title\n\ntext\n"
    note = parse_note(text, stem="broken")
    assert note.frontmatter == {}
    assert note.title == "Real title"
    (warning,) = note.warnings
    assert warning.startswith("frontmatter is not valid YAML (line ")
    assert warning.endswith("indexed the body without it")
    line = int(re.search(r"line (\d+)", warning).group(1))
    assert 3 <= line <= 4  # the unclosed list, as numbered in the file
    assert "".join(c.content for c in note.chunks) == "# Real title\n\ntext\n"
    assert note.chunks[0].start_line == 5


@pytest.mark.parametrize("yaml_body", ["- a\n- b", "just a string", "42"])
def test_frontmatter_that_is_not_a_mapping_is_ignored_with_a_warning(yaml_body):
    note = parse_note(f"---\n{yaml_body}\n---\nbody\n", stem="x")
    assert note.frontmatter == {}
    assert "not a mapping" in note.warnings[0]
    assert "".join(c.content for c in note.chunks) == "body\n"


def test_an_unterminated_frontmatter_fence_makes_the_whole_text_the_body():
    text = "---\ntitle: never closed\n\n# Heading\n\nbody\n"
    note = parse_note(text, stem="open")
    assert note.frontmatter == {}
    assert "never closed" in note.warnings[0]
    assert "".join(c.content for c in note.chunks) == text
    assert note.title == "Heading"


def test_frontmatter_may_be_closed_by_three_dots_and_may_be_empty():
    dots = parse_note("---\ntitle: Dots\n...\nbody\n", stem="x")
    assert dots.title == "Dots" and dots.chunks[0].content == "body\n"
    empty = parse_note("---\n---\nbody\n", stem="x")
    assert empty.frontmatter == {} and empty.warnings == ()
    assert empty.chunks[0].content == "body\n"


def test_a_thematic_break_that_is_not_on_the_first_line_is_not_frontmatter():
    text = "intro\n---\ntitle: no\n---\n"
    note = parse_note(text, stem="x")
    assert note.frontmatter == {}
    assert "".join(c.content for c in note.chunks) == text


def test_a_yaml_alias_bomb_is_dropped_with_a_warning_instead_of_expanded():
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        levels.append(f"a{i}: &a{i} [{refs}]")
    note = parse_note("---\n" + "\n".join(levels) + "\n---\nbody\n", stem="bomb")
    assert note.frontmatter == {}
    assert "more than" in note.warnings[0]
    assert note.chunks[0].content == "body\n"


def test_a_self_referencing_yaml_structure_is_dropped_with_a_warning():
    note = parse_note("---\nloop: &l [*l]\n---\nbody\n", stem="loop")
    assert note.frontmatter == {}
    assert note.warnings and "indexed the body without it" in note.warnings[0]


# ---------------------------------------------------------------------------
# Title and breadcrumbs


def test_the_title_comes_from_frontmatter_else_the_first_h1_else_the_stem():
    assert parse_note("---\ntitle: FM\n---\n# H1\n", stem="s").title == "FM"
    assert parse_note("intro\n## Two\n# First H1\n# Second H1\n", stem="s").title == "First H1"
    assert parse_note("## only h2\n", stem="stem").title == "stem"
    assert parse_note("```\n# fenced\n```\n", stem="stem").title == "stem"


def test_the_context_is_a_breadcrumb_that_does_not_repeat_the_title():
    text = "# Guide\n\n" + para(40) + "## Install\n\n" + para(40) + "### Linux\n\n" + para(40)
    text += "## Usage\n\n" + para(40)
    note = parse_note(text, stem="guide")
    assert [c.context for c in note.chunks] == [
        "Guide",
        "Guide > Install",
        "Guide > Install > Linux",
        "Guide > Usage",
    ]
    assert [c.level for c in note.chunks] == [1, 2, 3, 2]


def test_an_h1_that_differs_from_the_frontmatter_title_appears_in_the_breadcrumb():
    text = "---\ntitle: Notes 2024\n---\n# March\n\n" + para(40) + "## Week 1\n\n" + para(40)
    note = parse_note(text, stem="x")
    assert [c.context for c in note.chunks] == [
        "Notes 2024 > March",
        "Notes 2024 > March > Week 1",
    ]


# ---------------------------------------------------------------------------
# Headings and code fences


def test_a_heading_inside_a_fenced_code_block_does_not_start_a_section():
    text = (
        "## Shell\n\n" + para(40)
        + "```bash\n# this is a comment, not a heading\necho hi\n```\n\n"
        + "~~~python\n## neither is this\n~~~\n"
        + "## After\n\n" + para(40)
    )
    note = parse_note(text, stem="x")
    assert headings(note) == ["Shell", "After"]
    assert "# this is a comment" in note.chunks[0].content


def test_a_fence_closes_only_with_the_same_character_and_at_least_the_same_length():
    text = (
        "## A\n\n" + para(40)
        + "````\n```\n# inside\n~~~~\n# still inside\n````\n"
        + "## B\n\n" + para(40)
    )
    assert headings(parse_note(text, stem="x")) == ["A", "B"]


def test_an_unclosed_fence_runs_to_the_end_of_the_file():
    text = "## A\n\n" + para(40) + "```\n## not a heading\n\n## nor this\n"
    note = parse_note(text, stem="x")
    assert headings(note) == ["A"]


def test_a_hashtag_line_without_a_space_is_not_a_heading():
    text = "## Ideas\n\n" + para(40) + "#todo\n#日本語タグ\n####### seven is too many\n"
    note = parse_note(text, stem="x")
    assert headings(note) == ["Ideas"]


def test_atx_headings_allow_three_leading_spaces_a_tab_and_closing_hashes():
    text = (
        "   ## Indented ##\n\n" + para(40)
        + "##\tTabbed\n\n" + para(40)
        + "    ## four spaces is code\n\n"
        + "## C# is a language #\n\n" + para(40)
    )
    note = parse_note(text, stem="x")
    assert headings(note) == ["Indented", "Tabbed", "C# is a language"]


def test_headings_deeper_than_split_levels_stay_inside_their_section():
    text = "## Top\n\n" + para(40) + "#### Deep\n\n" + para(40) + "## Next\n\n" + para(40)
    note = parse_note(text, stem="x", split_levels=3)
    assert headings(note) == ["Top", "Next"]
    assert "#### Deep" in note.chunks[0].content
    deeper = parse_note(text, stem="x", split_levels=4)
    assert headings(deeper) == ["Top", "Deep", "Next"]


def test_split_levels_zero_keeps_the_whole_body_in_one_section():
    text = "# A\n\nshort\n\n## B\n\nshort\n"
    note = parse_note(text, stem="x", split_levels=0)
    assert len(note.chunks) == 1
    assert (note.chunks[0].level, note.chunks[0].heading) == (0, "")
    assert note.title == "A"


def test_setext_headings_start_sections_at_their_levels():
    text = "## Real\n\n" + para(40) + "\nUnderlined\n==========\n\n" + para(40) + "\nDashed\n---\n\n" + para(40)
    note = parse_note(text, stem="x")
    assert [(c.heading, c.level) for c in note.chunks] == [("Real", 2), ("Underlined", 1), ("Dashed", 2)]
    assert note.chunks[1].content.startswith("Underlined\n==========\n")
    assert (note.chunks[1].start_line, note.chunks[2].start_line) == (5, 10)
    assert note.title == "Underlined"  # the first H1


def test_a_paragraph_directly_above_an_underline_is_one_setext_heading_as_commonmark_says():
    text = "Intro line one\nand line two\n===\n\n" + para(40)
    note = parse_note(text, stem="x")
    assert [(c.heading, c.level) for c in note.chunks] == [("Intro line one and line two", 1)]


@pytest.mark.parametrize(
    "container",
    [
        "> # Quoted heading\n> more quote\n",
        "<div>\n# Inside html\n</div>\n",
        "    # indented code\n",
        "- # In a list item\n",
        "```\n# In a fence\n```\n",
    ],
    ids=["block quote", "html block", "indented code", "list item", "fence"],
)
def test_a_heading_looking_line_inside_a_container_block_is_not_a_heading(container):
    text = "## Real\n\n" + para(40) + "\n" + container + "\n" + para(40)
    note = parse_note(text, stem="x")
    assert headings(note) == ["Real"]
    assert "".join(c.content for c in note.chunks) == text


# ---------------------------------------------------------------------------
# Merging tiny sections


def test_a_heading_only_parent_merges_into_its_following_child():
    text = "## Setup\n\n### Linux\n\n" + para(40) + "### macOS\n\n" + para(40)
    note = parse_note(text, stem="x")
    assert len(note.chunks) == 2
    first = note.chunks[0]
    assert first.content.startswith("## Setup\n\n### Linux\n")
    assert (first.heading, first.level, first.context) == ("Linux", 3, "x > Setup > Linux")
    assert first.start_line == 1


def test_leading_blank_lines_merge_into_the_first_section_and_are_not_in_its_span():
    text = "\n\n\n# Title\n\n" + para(40)
    note = parse_note(text, stem="x")
    (chunk,) = note.chunks
    assert chunk.content == text
    assert chunk.heading == "Title"
    assert chunk.start_line == 4


def test_a_tiny_section_with_a_body_merges_into_the_previous_section():
    text = "## Big\n\n" + para(40) + "## Small\n\nok\n\n## Other\n\n" + para(40)
    note = parse_note(text, stem="x")
    assert headings(note) == ["Big", "Other"]
    assert note.chunks[0].content.endswith("## Small\n\nok\n\n")


def test_a_tiny_first_section_merges_into_the_following_one_and_keeps_its_own_label():
    text = "Short intro.\n\n## Body\n\n" + para(40)
    note = parse_note(text, stem="x")
    (chunk,) = note.chunks
    assert (chunk.heading, chunk.level) == ("", 0)
    assert chunk.content == text


def test_a_document_with_one_tiny_section_yields_that_one_chunk():
    note = parse_note("# Hi\n\nshort\n", stem="x")
    assert len(note.chunks) == 1
    assert note.chunks[0].token_count < 32


def test_a_tiny_section_stays_alone_when_no_neighbour_has_room_for_it():
    text = "## A\n\n" + para(55) + "## B\n\nok\n\n## C\n\n" + para(55)
    note = parse_note(text, stem="x", max_tokens=58, min_chunk_tokens=10, count_tokens=words)
    assert [c.token_count for c in note.chunks] == [57, 3, 57]
    assert headings(note) == ["A", "B", "C"]


def test_min_chunk_tokens_zero_keeps_every_non_blank_section():
    text = "# A\nx\n## B\ny\n## C\nz\n"
    assert headings(parse_note(text, stem="x", min_chunk_tokens=0)) == ["A", "B", "C"]


# ---------------------------------------------------------------------------
# Splitting oversized sections


def test_an_oversized_section_splits_at_paragraph_boundaries_and_keeps_its_heading():
    paragraphs = [para(30, word=f"p{i}w") for i in range(8)]
    text = "## Long\n\n" + "\n".join(paragraphs)
    note = parse_note(text, stem="doc", max_tokens=120, min_chunk_tokens=0, count_tokens=words)
    assert len(note.chunks) > 1
    assert {(c.heading, c.level, c.context) for c in note.chunks} == {("Long", 2, "doc > Long")}
    for chunk in note.chunks[1:]:
        assert chunk.content.startswith("p")  # starts at a paragraph
        assert not chunk.content.startswith("## ")
    assert_well_formed(text, note, body=text, max_tokens=120, count=words)


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize(
    "shape",
    ["paragraphs", "one_long_line", "no_spaces", "long_lines", "japanese", "code"],
)
def test_no_chunk_exceeds_max_tokens_whatever_the_shape_of_the_text(shape, counter):
    body = {
        "paragraphs": "\n".join(para(70) for _ in range(20)),
        "one_long_line": "The quick brown fox jumps. " * 400,
        "no_spaces": "x" * 5000 + "\n",
        "long_lines": "".join(f"line {i} " + "word " * 90 + "\n" for i in range(12)),
        "japanese": "これは長い日本語の段落です。全文検索の評価を行いました！本当に？" * 80,
        "code": "```python\n" + "".join(f"value_{i} = compute({i})  # step\n" for i in range(400)) + "```\n",
    }[shape]
    text = "# Title\n\n" + body + "\n## End\n\nfin\n"
    count = COUNTERS[counter]
    note = parse_note(text, stem="x", max_tokens=64, min_chunk_tokens=16, count_tokens=count)
    # a 5000-character word is never one chunk, even for a counter that sees it as one token
    assert len(note.chunks) > 1 or (count(text) <= 64 and shape != "no_spaces")
    assert_well_formed(text, note, body=text, max_tokens=64, count=count)


def test_a_long_single_line_splits_at_sentence_ends_before_splitting_hard():
    sentences = [f"Sentence number {i} says something useful. " for i in range(60)]
    text = "## S\n\n" + "".join(sentences) + "\n"
    note = parse_note(text, stem="x", max_tokens=50, min_chunk_tokens=0)
    assert note.chunks[0].content.startswith("## S\n\nSentence number 0 ")
    bodies = [c.content for c in note.chunks[1:]]
    assert bodies and all(b.startswith("Sentence number ") for b in bodies)
    assert all(c.content.rstrip().endswith(".") for c in note.chunks)


def test_japanese_text_splits_at_japanese_sentence_ends():
    text = "## 日記\n\n" + "今日は雨でした。図書館で本を読みました！楽しかった？" * 30 + "\n"
    note = parse_note(text, stem="x", max_tokens=60, min_chunk_tokens=0)
    assert len(note.chunks) > 2
    assert all(c.content.rstrip()[-1] in "。！？" for c in note.chunks)
    assert all(c.heading == "日記" for c in note.chunks)


def test_a_code_fence_that_fits_is_kept_whole_when_a_section_is_split():
    fence = "```sql\nPRAGMA journal_mode=WAL;\n\nPRAGMA synchronous=NORMAL;\n```\n"
    text = "## Tuning\n\n" + para(50) + "\n" + fence + "\n" + para(50)
    note = parse_note(text, stem="x", max_tokens=64, min_chunk_tokens=0, count_tokens=words)
    assert sum(fence in c.content for c in note.chunks) == 1


def test_a_text_that_cannot_be_split_further_than_one_character_still_terminates():
    text = "abcdef"
    note = parse_note(text, stem="x", max_tokens=1, min_chunk_tokens=0, count_tokens=len)
    assert [c.content for c in note.chunks] == list(text)


# ---------------------------------------------------------------------------
# Japanese, CRLF, BOM, line numbers


JAPANESE = """\
---
title: 日本語の全文検索
tags: [検索, FTS5]
date: 2024-04-01
---

# 日本語の全文検索

日本語は単語の区切りに空白を使わないため、トライグラムで索引を作るのが手軽である。

## トライグラムの限界

二文字の検索語はトライグラムでは一致しない。例えば「検索」だけでは見つからないので、LIKE にフォールバックする必要がある。

## まとめ

FTS5 の trigram トークナイザは日本語と英語の混在したメモに向いている。
"""


def test_japanese_headings_and_bodies_are_sectioned_titled_and_tagged():
    note = parse_note(JAPANESE, stem="fts", min_chunk_tokens=0)
    assert note.title == "日本語の全文検索"
    assert note.tags == ("検索", "FTS5")
    assert headings(note) == ["日本語の全文検索", "トライグラムの限界", "まとめ"]
    assert note.chunks[1].context == "日本語の全文検索 > トライグラムの限界"
    assert note.chunks[1].start_line == 11
    assert_well_formed(JAPANESE, note, body=JAPANESE.split("---\n", 2)[2])


def test_estimate_tokens_counts_each_cjk_character_as_one_token_and_latin_by_four():
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("日本語") == 3
    assert estimate_tokens("カタカナとひらがな、한국어") == 13
    assert estimate_tokens("検索 test") == 2 + 2


def test_crlf_and_lone_cr_become_lf_and_line_numbers_match_the_original_file():
    text = "---\r\ntitle: T\r\n---\r\n# T\r\n\r\n" + para(40).replace("\n", "\r\n")
    text += "## Mac\r" + para(40).replace("\n", "\r") + "\r## Done\r\n" + para(40).replace("\n", "\r\n")
    note = parse_note(text, stem="x")
    assert all("\r" not in c.content for c in note.chunks)
    assert [(c.heading, c.start_line, c.end_line) for c in note.chunks] == [
        ("T", 4, 6),
        ("Mac", 7, 8),
        ("Done", 10, 11),
    ]
    body = normalise_text(text).split("---\n", 2)[2]
    assert_well_formed(text, note, body=body)


def test_a_bom_is_stripped_before_frontmatter_is_detected():
    text = "\ufeff---\ntitle: With BOM\n---\nbody\n"
    note = parse_note(text, stem="x")
    assert note.title == "With BOM"
    assert note.chunks[0].content == "body\n"
    assert note.chunks[0].start_line == 4
    assert normalise_text("\ufeffa\r\nb\rc") == "a\nb\nc"


def test_line_numbers_count_the_frontmatter_lines():
    text = "---\ntitle: x\ntags: [a]\n---\n\nPreamble line one.\n" + para(40) + "\n## Part\n\n" + para(40) + "\n\n"
    note = parse_note(text, stem="x")
    assert [(c.heading, c.start_line, c.end_line) for c in note.chunks] == [
        ("", 6, 7),
        ("Part", 9, 11),
    ]
    assert_well_formed(text, note, body=text.split("---\n", 2)[2])


# ---------------------------------------------------------------------------
# What is embedded


def test_the_hash_is_the_sha256_of_the_embedded_text_which_is_the_trimmed_content():
    note = parse_note("---\ntitle: Title\n---\n# Title\n\nhello world\n\n", stem="x")
    (chunk,) = note.chunks
    assert embed_text(chunk.content) == "# Title\n\nhello world"
    assert chunk.hash == hashlib.sha256(b"# Title\n\nhello world").hexdigest()
    assert "Title >" not in embed_text(chunk.content)


def test_moving_a_section_to_another_note_or_renaming_the_note_keeps_its_hash():
    section = "## Checkpoints\n\n" + para(40, word="wal")
    here = parse_note("# Database notes\n\n" + para(40) + section, stem="db")
    there = parse_note("---\ntitle: Other\n---\n" + section + "\n\n", stem="renamed")
    moved_here = next(c for c in here.chunks if c.heading == "Checkpoints")
    moved_there = next(c for c in there.chunks if c.heading == "Checkpoints")
    assert moved_here.context != moved_there.context
    assert moved_here.hash == moved_there.hash


def test_editing_one_section_changes_only_that_chunks_hash():
    parts = [f"## S{i}\n\n" + para(40, word=f"s{i}w") for i in range(4)]
    before = parse_note("".join(parts), stem="x")
    parts[2] = parts[2].replace("s2w7", "edited")
    after = parse_note("".join(parts), stem="x")
    changed = [a.hash != b.hash for a, b in zip(before.chunks, after.chunks)]
    assert changed == [False, False, True, False]


def test_token_count_comes_from_the_given_counter_applied_to_the_embedded_text():
    note = parse_note("# A\n\none two three\n", stem="x", count_tokens=words)
    assert note.chunks[0].token_count == 5
    padded = parse_note("\n\n# A\n\nabcd\n\n\n\n", stem="x", count_tokens=len)
    assert padded.chunks[0].token_count == len("# A\n\nabcd")


def test_a_flood_of_blank_lines_never_becomes_a_chunk_of_its_own():
    text = "first\n" + "\n" * 5000 + "second\n" + " \n" * 3000
    note = parse_note(text, stem="x", max_tokens=8, min_chunk_tokens=0, count_tokens=len)
    assert [c.content.strip() for c in note.chunks] == ["first", "second"]
    assert "".join(c.content for c in note.chunks) == text


def test_trailing_blank_lines_after_a_full_last_piece_join_it_instead_of_standing_alone():
    # Cut hard into 10-character pieces, the last one is full when the blank
    # lines after it arrive; they must not become a chunk of their own.
    text = "## L\n\n" + "x" * 13 + "\n\n\n"
    note = parse_note(text, stem="x", max_tokens=10, min_chunk_tokens=0, count_tokens=len)
    assert len(note.chunks) > 1
    assert all(c.content.strip() for c in note.chunks)
    assert note.chunks[-1].content.endswith("x\n\n\n")
    assert "".join(c.content for c in note.chunks) == text


@pytest.mark.parametrize(
    "kwargs",
    [{"split_levels": 7}, {"split_levels": -1}, {"max_tokens": 0}, {"min_chunk_tokens": -1}],
)
def test_impossible_settings_are_rejected(kwargs):
    with pytest.raises(ValueError):
        parse_note("x", stem="x", **kwargs)


def test_parsed_notes_and_chunks_are_immutable_values():
    note = parse_note("# A\n\nbody\n", stem="x")
    assert isinstance(note.chunks[0], Chunk)
    with pytest.raises(AttributeError):
        note.chunks[0].content = "changed"  # type: ignore[misc]
    assert note == parse_note("# A\n\nbody\n", stem="x")


# ---------------------------------------------------------------------------
# Properties over generated documents

_words = st.sampled_from(
    ["alpha", "beta", "検索", "日本語", "SQLite", "wal.", "end!", "why?", "終わり。", "本当！", "x" * 40, ""]
)
_text_line = st.lists(_words, min_size=1, max_size=25).map(" ".join)
_line = st.one_of(
    _text_line,
    _text_line.map(lambda t: t * 6),
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 7), _text_line),
    st.builds(lambda n, t: " " * n + "## " + t, st.integers(0, 4), _text_line),
    st.sampled_from(
        ["", "", "", "  ", "#", "#tag", "```", "```py", "~~~", "````", "    code", "> quote", "- item", "==="]
    ),
    st.text(alphabet="ab #`~\t。.", max_size=12),
).filter(lambda s: s.rstrip() not in ("---", "..."))
_newline = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])


@st.composite
def documents(draw) -> tuple[str, str]:
    """(file text, the normalised body expected to be chunked)."""
    lines = draw(st.lists(_line, max_size=60))
    nl = draw(_newline)
    body = nl.join(lines) + draw(st.sampled_from(["", nl, nl * 3]))
    front = draw(
        st.sampled_from(
            ["", "---\ntitle: T\ntags: a b\n---\n", "---\r\n[broken: yaml\r\n...\r\n", "---\n- not\n- a map\n---\n"]
        )
    )
    bom = draw(st.sampled_from(["", "\ufeff"]))
    return bom + front + body, normalise_text(body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=documents(),
    counter=st.sampled_from(sorted(COUNTERS)),
    max_tokens=st.integers(4, 200),
    min_tokens=st.integers(0, 60),
    split_levels=st.integers(0, 6),
)
def test_no_bytes_are_lost_no_chunk_is_too_big_and_every_span_points_into_the_file(
    doc, counter, max_tokens, min_tokens, split_levels
):
    text, body = doc
    count = COUNTERS[counter]
    note = parse_note(
        text,
        stem="gen",
        split_levels=split_levels,
        max_tokens=max_tokens,
        min_chunk_tokens=min_tokens,
        count_tokens=count,
    )
    assert_well_formed(text, note, body=body, max_tokens=max_tokens, count=count)
    json.dumps(note.frontmatter)


@settings(max_examples=200, deadline=None)
@given(doc=documents())
def test_with_default_settings_no_chunk_is_blank(doc):
    text, body = doc
    note = parse_note(text, stem="gen")
    assert_well_formed(text, note, body=body)
    assert all(chunk.content.strip() for chunk in note.chunks)


# Hand-built documents whose headings are known by construction (the oracle is
# the generator, not a parser): real headings (ATX with or without a closing
# run, setext) and decoys that look like headings but are not (inside a fence,
# a block quote, indented code, an HTML block; a hashtag without a space).
_plain = st.lists(
    st.sampled_from(["alpha", "beta", "検索", "日本語", "SQLite", "wal.", "end!", "終わり。", "x" * 30]),
    min_size=1, max_size=12,
).map(" ".join)


@st.composite
def _heading_block(draw) -> tuple[str, tuple[str, int]]:
    words = draw(_plain)
    level = draw(st.integers(1, 6))
    style = draw(st.sampled_from(["atx", "atx-closed", "setext"] if level <= 2 else ["atx", "atx-closed"]))
    if style == "setext":
        source = words + "\n" + ("=" if level == 1 else "-") * draw(st.integers(1, 8))
    else:
        source = " " * draw(st.integers(0, 3)) + "#" * level + " " + words + (" " + "#" * draw(st.integers(1, 9)) if style == "atx-closed" else "")
    return source, (words, level)


_decoy = st.one_of(
    _plain,
    _plain.map(lambda t: "```\n# " + t + "\n## " + t + "\n```"),
    _plain.map(lambda t: "~~~~\n# " + t + "\n~~~\n# still code\n~~~~"),
    _plain.map(lambda t: "> # " + t + "\n> " + t),
    _plain.map(lambda t: "    # " + t),
    _plain.map(lambda t: "<div>\n# " + t + "\n</div>"),
    _plain.map(lambda t: "#" + t.replace(" ", "")),
)


@st.composite
def known_documents(draw) -> tuple[str, list[tuple[str, int] | None]]:
    """(body, per block: its (heading text, level) if it is a real heading, else None)."""
    blocks = draw(st.lists(st.one_of(_heading_block(), _decoy.map(lambda t: (t, None))), min_size=1, max_size=14))
    return "\n\n".join(src for src, _ in blocks) + "\n", [known for _, known in blocks]


@settings(max_examples=300, deadline=None)
@given(doc=known_documents(), split_levels=st.integers(1, 6))
def test_chunks_start_exactly_at_the_known_headings_and_never_at_a_decoy(doc, split_levels):
    body, known = doc
    note = parse_note(body, stem="gen", split_levels=split_levels, max_tokens=100_000, min_chunk_tokens=0)
    cutting = [k for k in known if k is not None and k[1] <= split_levels]
    expected = ([("", 0)] if not known or known[0] is None or known[0][1] > split_levels else []) + cutting
    assert [(c.heading, c.level) for c in note.chunks] == expected
    assert "".join(c.content for c in note.chunks) == body


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=400))
def test_arbitrary_text_never_raises_and_never_loses_bytes(text):
    note = parse_note(text, stem="any", max_tokens=32, min_chunk_tokens=8)
    normalised = normalise_text(text)
    joined = "".join(c.content for c in note.chunks)
    if normalised.split("\n", 1)[0].rstrip() != "---":
        assert joined == (normalised if normalised.strip() else "")
    else:
        assert normalised.endswith(joined)
    assert all(c.token_count <= 32 for c in note.chunks)


# ---------------------------------------------------------------------------
# The shipped example notes


def _examples() -> list[Path]:
    return sorted(EXAMPLES.rglob("*.md"))


def test_the_example_notes_are_a_dozen_mixed_english_and_japanese_in_subfolders():
    notes = _examples()
    assert 12 <= len(notes) <= 14
    assert len({p.parent for p in notes}) >= 3

    def mostly_japanese(path: Path) -> bool:
        text = path.read_text("utf-8")
        cjk = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
        latin = len(re.findall(r"[A-Za-z]", text))
        return cjk > latin / 3  # a Japanese character carries about three letters' worth

    japanese = [p for p in notes if mostly_japanese(p)]
    assert abs(len(japanese) - len(notes) / 2) <= 1.5


@pytest.mark.parametrize("path", _examples(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_each_example_note_parses_cleanly_with_metadata_and_several_chunks(path):
    text = path.read_text("utf-8")
    note = parse_note(text, stem=path.stem)
    assert note.warnings == ()
    assert note.title and note.tags and note.date
    assert len(note.chunks) >= 2
    assert_well_formed(text, note, body=text.split("---\n", 2)[2])


def test_at_least_one_example_note_has_a_section_long_enough_to_be_split():
    def has_continuation(note: ParsedNote) -> bool:
        return any(
            a.context == b.context and not b.content.lstrip().startswith("#")
            for a, b in zip(note.chunks, note.chunks[1:])
        )

    notes = [parse_note(p.read_text("utf-8"), stem=p.stem) for p in _examples()]
    assert any(has_continuation(note) for note in notes)


def test_chunking_counts_tokens_in_proportion_to_the_input_not_its_square():
    """Characters handed to count_tokens per input character stay flat as a note grows tenfold."""

    def note_of(sections: int) -> str:
        return "# Big\n\n" + "".join(
            f"## S{i}\n\n" + f"word{i % 10} is here. " * 60 + "\n\n- item a\n- item b\n\n" for i in range(sections)
        ) + "x" * (100 * sections) + "\n"

    def counted_per_char(text: str) -> tuple[float, float]:
        seen = {"calls": 0, "chars": 0}

        def counting(t: str) -> int:
            seen["calls"] += 1
            seen["chars"] += len(t)
            return estimate_tokens(t)

        note = parse_note(text, stem="big", max_tokens=128, count_tokens=counting)
        return seen["chars"] / len(text), seen["calls"] / len(note.chunks)

    small_chars, small_calls = counted_per_char(note_of(40))
    big_chars, big_calls = counted_per_char(note_of(400))
    assert big_chars <= small_chars * 1.25
    assert big_calls <= small_calls * 1.25
    assert big_calls < 10  # a handful of counts per chunk, not a search over every prefix


def _long_words(size: int, seed: int = 7) -> str:
    """Random words of 20-99 letters (under the long-word length), a paragraph per 40 words (issue 22 point 8)."""
    import random

    rng = random.Random(seed)
    parts, total, n = ["# Long words\n\n"], 14, 0
    while total < size:
        word = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(20, 99)))
        n += 1
        sep = "\n\n" if n % 40 == 0 else " "
        parts.append(word + sep)
        total += len(word) + len(sep)
    return "".join(parts)[: size - 1] + "\n"


def _uneven_subwords(text: str) -> int:
    """A counter whose tokens per letter vary from word to word, as a SentencePiece model's do on random
    letters: a guess from the average rate misses for each cut, which is what made a cut cost a search."""
    return sum(1 + (len(w) + sum(map(ord, w[:8]))) % 5 + len(w) // 2 for w in text.split())


def test_a_note_of_long_words_is_counted_about_twice_per_character_whatever_its_size():
    """Issue 22 point 8: each hard cut is guessed from the measured rate and corrected from the size it
    turned out to have, so the characters handed to count_tokens grow with the note, at about two per
    character (a search from one character up made it seven)."""

    def counted(text: str) -> tuple[int, ParsedNote]:
        seen = {"chars": 0}

        def counting(t: str) -> int:
            seen["chars"] += len(t)
            return _uneven_subwords(t)

        note = parse_note(text, stem="long", max_tokens=512, count_tokens=counting, max_chunks=100_000)
        return seen["chars"], note

    small_text, big_text = _long_words(100_000), _long_words(200_000)
    small, _ = counted(small_text)
    big, note = counted(big_text)
    assert big / small < 2.5  # doubling the note at most doubles the work (and a little)
    assert big / len(big_text) < 3.5
    assert_well_formed(big_text, note, max_tokens=512, count=_uneven_subwords)


def test_finding_long_words_costs_the_same_per_character_for_long_and_short_words():
    """The long-word pattern starts a match only where a run of letters starts: a 90-letter word is not
    scanned again from each of its letters (which made words of 20-99 letters cost L x L / 2)."""
    import time

    from groove.corpus.chunking import size_of

    def cpu(word_len: int) -> float:
        text = " ".join(["q" * word_len] * (600_000 // (word_len + 1)))
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            size_of(text, lambda t: 1)
            best = min(best, time.process_time() - started)
        return best

    assert cpu(90) < cpu(18) * 2.5  # before: about 5 x (the square of the word length)
