"""Path globs and .grooveignore lines: one matcher, linear in the path and the glob, and bounded (issue 22, points 1-2).

A glob such as `*?*?*?*?*?*?*?*?*?*?Q` made pathspec's regex backtrack for hours
against a long note name, on the event loop (one search froze the daemon), and
the same line in .grooveignore hung indexing. The tests that could hang on a
regression run in a subprocess with a timeout, so a regression fails instead of
hanging the run; the bound is generous (the old code takes hours), not a speed
claim. Where steps can be counted, they are counted instead.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from groove.corpus import globs
from groove.corpus.globs import MAX_GLOB_CHARS, MAX_GLOB_STARS, GlobError
from groove.corpus.scan import Ignore, scan
from groove.errors import GrooveError
from groove.ops import doctor
from groove.search.compiler import QueryError
from groove.search.filters import MAX_PATH_GLOBS, Filters
from groove.search.request import SearchRequest
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, search_once

HOSTILE = "*?" * 10 + "Q"                 # 10 stars: within the bound, so it is matched, not refused
OVER_STARS = "*?" * (MAX_GLOB_STARS + 1) + "Q"
LONG_NAME = "a" * 200 + ".md"             # against HOSTILE, pathspec's regex backtracked for hours
BOUND_S = 60                              # generous: the old code takes hours; the new a few milliseconds


def bounded(spawn, code: str, *args: str) -> str:
    """Run `code` in a fresh interpreter (in the checkout: `tests.support` imports); its stdout. Fails, not hangs,
    past BOUND_S."""
    try:
        done = spawn.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                              text=True, timeout=BOUND_S, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish in {BOUND_S} s: the glob matching backtracks")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# --- the same answers as pathspec's gitignore patterns (which groove used before) ----------------------------

@pytest.mark.parametrize("pattern, path, expected", [
    ("notes.md", "notes.md", True),
    ("notes.md", "deep/er/notes.md", True),          # no slash: any depth
    ("/notes.md", "deep/notes.md", False),           # leading slash: the top only
    ("a/notes.md", "x/a/notes.md", False),           # a slash inside: anchored
    ("drafts/", "drafts/d.md", True),                # a folder and what is inside it
    ("drafts/", "drafts", False),                    # ... not a file of that name
    ("drafts/", "x/drafts/", True),
    ("drafts", "drafts/d.md", True),
    ("*.md", "a/b/c.md", True),
    ("*", "anything/at/all", True),
    ("f3/**", "f3/a/b.md", True),
    ("f3/**", "f3", False),
    ("**/sub/*.md", "a/b/sub/x.md", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/*", "a/b", True),
    ("a/*", "a/b/c", False),                         # a last `*` ends the path
    ("a/*", "a/b/", True),
    ("a?c", "abc", True),
    ("a?c", "a/c", False),
    ("[ab]x", "bx", True),
    ("[!ab]x", "cx", True),
    ("[!ab]x", "ax", False),
    ("[a-c]x", "dx", False),
    ("x[!a]", "x/", False),                          # as git: a class never matches `/` (pathspec's regex did)
    (r"\*.md", "*.md", True),
    (r"\*.md", "a.md", False),
    ("[unclosed", "[unclosed", True),
    ("# a comment", "# a comment", False),
    ("", "x", False),
])
def test_a_glob_means_what_it_means_in_gitignore(pattern, path, expected):
    assert globs.GlobSet([g for g in [globs.parse(pattern)] if g]).match(path) is expected


def test_the_last_matching_line_decides_and_a_bang_line_re_includes():
    lines, refused = globs.parse_lines(["*.md", "!keep.md", "drafts/"])
    assert not refused
    assert lines.match("x.md") and not lines.match("keep.md") and lines.match("drafts/keep.md")


def test_a_set_of_lines_says_ignored_re_included_or_nothing_so_nested_gitignore_files_can_defer_upward():
    lines, _ = globs.parse_lines(["*.md", "!keep.md"])
    assert lines.decide("x.md") is True and lines.decide("keep.md") is False and lines.decide("x.txt") is None


def test_the_matcher_agrees_with_pathspec_on_thousands_of_random_lines_and_paths():
    pathspec = pytest.importorskip("pathspec")
    rng = random.Random(22)
    atoms = ["a", "b", "ab", "*", "**", "?", "/", "[ab]", "[!a]", "[^b]", "[a-c]", "[]a]", "[", "]", "\\", "\\*",
             "!", "#", " ", "-", ".", "[a-]", "[-a]", "x/", ".md"]
    segments = ["a", "b", "ab", "ba", "", "x", "a.md", "[", "]", "*", " ", "-", "\\"]
    negated = re.compile(r"\[\^(?!/\])")  # a negated class in pathspec's regex: it may match `/`, git's does not
    compared = differed = 0
    for _ in range(3000):
        lines = ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 7))) for _ in range(rng.randint(1, 3))]
        ours, refused = globs.parse_lines(lines)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = pathspec.PathSpec.from_lines("gitignore", lines)
        except Exception:  # noqa: BLE001 - pathspec raises several types for a bad pattern
            assert refused, lines
            continue
        assert not refused, (lines, refused)
        slash_differs = any(negated.search(str(p.regex.pattern)) for p in theirs.patterns if p.regex is not None)
        for _ in range(8):
            path = "/".join(rng.choice(segments) for _ in range(rng.randint(1, 5)))
            if slash_differs and "/" in path:
                continue
            compared += 1
            differed += theirs.match_file(path) != ours.match(path)
    assert compared > 10_000 and differed == 0


# --- linear, and bounded ------------------------------------------------------------------------------------

@pytest.mark.parametrize("glob", [
    "a/**/a*/**/a/**/a*/**/a/**/Q",  # inner `**`: the table, each (glob segment, path segment) cell once
    "**/a/a*/a/a*/a/a/a/a/a/Q",      # a leading `**` only: the block tried at each start
])
def test_matching_is_linear_a_deep_glob_against_a_deep_path_takes_at_most_segments_times_segments_steps(
        monkeypatch, glob):
    steps = 0
    budget = 201 * 11  # (path segments) x (glob segments)
    real = globs._Segment.match

    def counted(self, text):
        nonlocal steps
        steps += 1
        if steps > budget:
            raise AssertionError(f"more than {budget} segment comparisons: the matcher backtracks")
        return real(self, text)

    monkeypatch.setattr(globs._Segment, "match", counted)
    parsed = globs.parse(glob)
    assert parsed is not None and not parsed.match("a/" * 200 + "x")
    assert 0 < steps <= budget


def test_matching_is_linear_within_a_segment_every_star_but_the_last_is_an_atomic_group():
    # A*B*C -> A(?>.*?B).*C: each group takes the leftmost fit and is never re-entered (the module doc).
    assert globs._Segment("*?*?*?Q").regex.pattern == "(?s:(?>.*?.)(?>.*?.).*.Q)"
    assert globs._Segment("a*[bc]*d").regex.pattern == "(?s:a(?>.*?[bc]).*d)"


def test_matching_is_linear_so_a_star_question_glob_returns_at_once_through_the_filters(spawn):
    out = bounded(spawn, f"""
        from groove.search.filters import Filters
        f = Filters.build(path_globs=[{HOSTILE!r}])
        names = [{LONG_NAME!r}, "deep/" + {LONG_NAME!r}, "b" * 60 + "Q.md", "x" * 30 + "Q"]
        print([f.path_matches(n) for n in names])
    """)
    assert out.strip() == "[False, False, False, True]"


def test_matching_is_linear_so_a_star_question_glob_search_returns_through_the_real_search_path(spawn, kb, make_settings):
    write(kb / LONG_NAME, "# Long\n\nMarmalade on toast.\n")
    write(kb / ("x" * 40 + "Q") / "inside.md", "# Inside\n\nMarmalade in a jar.\n")
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    out = bounded(spawn, """
        import json, sys
        import anyio
        from tests.support.fakes import BagOfWordsEmbedder
        from tests.support.oneshot import search_once
        from groove.config import load_settings
        from groove.search.request import SearchRequest
        settings = load_settings(None, kb_path=sys.argv[1], index_path=sys.argv[2])
        req = SearchRequest.from_arguments({"query": "marmalade", "retriever": "fts", "path_globs": [sys.argv[3]]})
        found = anyio.run(lambda: search_once(settings, req, embedder=BagOfWordsEmbedder()))
        print(json.dumps(sorted(r.path for r in found.results)))
    """, str(kb), str(settings.resolved_index_path()), HOSTILE)
    assert json.loads(out) == ["x" * 40 + "Q/inside.md"]


def test_path_glob_matching_runs_off_the_event_loop(kb, make_settings, monkeypatch):
    write(kb / "a.md", "# A\n\nMarmalade.\n")
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    released = threading.Event()
    seen: list[bool] = []
    real = Filters.path_matches

    def waiting(self, path):
        # Waits for a task on the event loop: it can run only if the loop is free while paths are matched.
        seen.append(released.wait(timeout=10))
        return real(self, path)

    monkeypatch.setattr(Filters, "path_matches", waiting)

    async def main():
        async def release():
            await anyio.sleep(0.05)
            released.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release)
            req = SearchRequest(query="marmalade", retriever="fts", filters=Filters.build(path_globs=["*.md"]))
            return await search_once(settings, req, embedder=BagOfWordsEmbedder())

    found = anyio.run(main)
    assert seen == [True] and [r.path for r in found.results] == ["a.md"]


@pytest.mark.parametrize("glob, message", [
    ("a" * (MAX_GLOB_CHARS + 1), f"is {MAX_GLOB_CHARS + 1} characters long; the limit is {MAX_GLOB_CHARS} characters"),
    (OVER_STARS, f"has {MAX_GLOB_STARS + 1} '*' wildcards; the limit is {MAX_GLOB_STARS}"),
    ("a/" + "**/" * 9 + "x", f"has 18 '*' wildcards; the limit is {MAX_GLOB_STARS}"),
    ("[z-a]", "has a bad character range z-a"),
    ("x\\", "ends with a lone backslash"),
])
def test_a_glob_over_a_bound_is_refused_with_one_line_naming_the_limit(glob, message):
    with pytest.raises(GlobError) as err:
        globs.parse(glob)
    assert str(err.value) == message or str(err.value).startswith(message)
    assert isinstance(err.value, GrooveError)


def test_a_glob_at_the_bounds_is_accepted():
    assert globs.parse("a" * MAX_GLOB_CHARS) is not None
    assert globs.parse("*?" * MAX_GLOB_STARS + "Q") is not None


@pytest.mark.parametrize("arguments, message", [
    ({"path_globs": ["a" * 300]}, f"path glob 'aaaa{'a' * 36}...' is 300 characters long; the limit is {MAX_GLOB_CHARS} characters"),
    ({"path_globs": ["ok/**", "!" + OVER_STARS]}, f"has {MAX_GLOB_STARS + 1} '*' wildcards; the limit is {MAX_GLOB_STARS}"),
    ({"path_globs": ["[z-a]"]}, "path glob '[z-a]' has a bad character range z-a"),
    ({"path_globs": ["*.md"] * (MAX_PATH_GLOBS + 1)}, f"path_globs has {MAX_PATH_GLOBS + 1} items; at most {MAX_PATH_GLOBS} are allowed"),
    ({"filters": {"path_globs": ["*"] * 501}}, f"at most {MAX_PATH_GLOBS} are allowed"),
])
def test_an_over_long_glob_in_a_search_request_is_one_line_naming_the_limit(arguments, message):
    # SearchRequest is what the MCP search tool and /ui/api/search both validate with.
    with pytest.raises(QueryError) as err:
        SearchRequest.from_arguments({"query": "x", **arguments})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_search_tool_schema_states_the_glob_bounds():
    from groove.search.request import tool_fields

    schema = tool_fields()["path_globs"][1]
    assert f"{MAX_GLOB_CHARS} characters" in schema["description"] and f"{MAX_GLOB_STARS} '*'" in schema["description"]
    assert schema["anyOf"][0]["maxItems"] == MAX_PATH_GLOBS


def test_filters_built_directly_are_checked_when_first_matched():
    with pytest.raises(QueryError, match="the limit is"):
        Filters(path_globs=(OVER_STARS,)).path_matches("x.md")


# --- .grooveignore: the same matcher, the same bound; a refused line is named and the rest applies -------------

IGNORE_LINES = [
    "drafts/",        # line 1
    HOSTILE,          # line 2: accepted; ignores the folder whose name ends in Q
    OVER_STARS,       # line 3: refused, over the bound
    "[z-a]",          # line 4: refused, does not parse
    "private.md",     # line 5
]


@pytest.fixture
def hostile_kb(kb: Path) -> Path:
    write(kb / ".grooveignore", "\n".join(IGNORE_LINES) + "\n")
    write(kb / "keep.md", "# Keep\n\nVisible.\n")
    write(kb / LONG_NAME, "# Long\n\nA long name the hostile line must reject quickly.\n")
    write(kb / "drafts" / "d.md", "# Draft\n\nIgnored by line 1.\n")
    write(kb / ("b" * 60 + "Q") / "n.md", "# In Q\n\nIgnored by line 2.\n")
    write(kb / "private.md", "# Private\n\nIgnored by line 5.\n")
    return kb


def test_a_hostile_grooveignore_is_scanned_at_once_its_refused_lines_named_and_the_rest_applied(spawn, hostile_kb):
    out = bounded(spawn, """
        import json, sys
        from pathlib import Path
        from groove.corpus.scan import Ignore, scan
        kb = Path(sys.argv[1])
        ignore = Ignore(kb)
        print(json.dumps({"files": sorted(scan(kb, ignore, 1_000_000).files), "refused": ignore.refused}))
    """, str(hostile_kb))
    result = json.loads(out)
    assert result["files"] == sorted(["keep.md", LONG_NAME])
    assert [r.split(":")[0] for r in result["refused"]] == ["line 3", "line 4"]
    assert f"has {MAX_GLOB_STARS + 1} '*' wildcards; the limit is {MAX_GLOB_STARS}" in result["refused"][0]
    assert "bad character range z-a" in result["refused"][1]


def test_a_refused_grooveignore_line_is_logged_once_with_its_line_number(hostile_kb):
    with capture_logs() as logs:
        ignore = Ignore(hostile_kb)
        ignore.reload()  # unchanged: not logged again
    refused = [e for e in logs if e["event"] == "ignore_line_refused"]
    assert [e["line"].split(":")[0] for e in refused] == ["line 3", "line 4"]
    assert sorted(scan(hostile_kb, ignore, 1_000_000).files) == sorted(["keep.md", LONG_NAME])


def test_indexing_a_folder_with_a_hostile_grooveignore_indexes_the_rest(hostile_kb, make_settings):
    settings = make_settings(hostile_kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    con = sqlite3.connect(settings.resolved_index_path())
    try:
        assert sorted(r[0] for r in con.execute("SELECT path FROM documents")) == sorted(["keep.md", LONG_NAME])
    finally:
        con.close()


def test_doctor_names_each_refused_grooveignore_line(hostile_kb):
    (finding,) = doctor.check_ignore_file(hostile_kb)
    assert finding.level == "error" and finding.count == 2
    assert [e.split(":")[0] for e in finding.examples] == ["line 3", "line 4"]
    assert "fix or delete line 3" in finding.fix and "the other lines apply" in finding.message
