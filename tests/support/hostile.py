"""A hostile notes folder, built on disk by the tests and by bench/hostile.py.

Each `Case` makes one bad file (or folder) next to the good notes and says
what groove must do with it: skip it with a reason, index it with a warning
(what was cut or left out), or index it as it is. `build(folder, names)` makes
the good notes and the cases named; every good note carries a word of its own
(`GOOD_WORDS`) so a test can check the rest of the folder is searchable.

Cases that need the test's help (a file that vanishes between scan and read,
an unreadable file or folder when running as root) are faults injected
through `groove.corpus.scan.open_fd` / `os.scandir`: see tests/test_hostile.py.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MB = 1_000_000

GOOD_WORDS = {"good/alpha.md": "glacierword", "good/beta.md": "volcanoword", "top.md": "meadowword"}


@dataclass(frozen=True)
class Case:
    name: str
    path: str          # the path groove reports (relative to the notes folder; printable form)
    outcome: str       # "skipped", "warned" (indexed, with a warning), "indexed", "kept" (folder), "refused"
    reason: str        # a regex the reported reason (or warning) must match; "" for "indexed"
    make: Callable[[Path], None]
    word: str = ""     # for "indexed" / "warned": a word of its own that must be searchable


def _good(kb: Path) -> None:
    for rel, word in GOOD_WORDS.items():
        p = kb / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {Path(rel).stem}\n\nA normal note about the {word} and nothing else.\n", encoding="utf-8")


def _bytes(rel: str, data: bytes) -> Callable[[Path], None]:
    def make(kb: Path) -> None:
        (kb / rel).write_bytes(data)
    return make


def _text(rel: str, text: str) -> Callable[[Path], None]:
    return _bytes(rel, text.encode("utf-8"))


def _big(rel: str, size: int, line: bytes) -> Callable[[Path], None]:
    """A file of `size` bytes written in blocks (never `size` bytes in memory at once)."""
    def make(kb: Path) -> None:
        block = line * max(1, (1 << 20) // len(line))
        with open(kb / rel, "wb") as fh:
            left = size
            while left > 0:
                fh.write(block[:left])
                left -= min(left, len(block))
    return make


def long_words_note(size: int, seed: int = 7) -> str:
    """A note of long random words (20-400 letters), one paragraph per 40 words, `size` characters."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    parts = ["# Long words\n\n"]
    total = len(parts[0])
    n = 0
    while total < size:
        word = "".join(rng.choices(letters, k=rng.randint(20, 400)))
        n += 1
        sep = "\n\n" if n % 40 == 0 else " "
        parts.append(word + sep)
        total += len(word) + len(sep)
    return "".join(parts)[:size - 1] + "\n"


def _symlink(rel: str, target: str | Callable[[Path], str]) -> Callable[[Path], None]:
    def make(kb: Path) -> None:
        os.symlink(target(kb) if callable(target) else target, kb / rel)
    return make


def _outside(kb: Path) -> str:
    secret = kb.parent / "outside-secret.md"
    secret.write_text("# Secret\n\nsecretoutsideword\n", encoding="utf-8")
    return str(secret)


def _fifo(rel: str) -> Callable[[Path], None]:
    def make(kb: Path) -> None:
        os.mkfifo(kb / rel)
    return make


def _folder_with_note(kb: Path) -> None:
    d = kb / "locked"
    d.mkdir()
    (d / "inside.md").write_text("# Inside\n\nA note in a folder that will be locked: lockedword\n", encoding="utf-8")


ALIAS_BOMB = (
    "---\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
    "---\n# Bomb\n\nThe body after an alias bomb: bombbodyword\n"
)

CASES: tuple[Case, ...] = (
    Case("invalid UTF-8", "latin1.md", "skipped", r"not UTF-8 text \(invalid byte at offset \d+\)",
         _bytes("latin1.md", "# Caf\xe9\n\ncaf\xe9 au lait\n".encode("latin-1"))),
    Case("UTF-16 with BOM", "utf16.md", "indexed", "",
         _bytes("utf16.md", "# UTF-16\n\nA note saved as UTF-16: sixteenword\n".encode("utf-16")), word="sixteenword"),
    Case("binary bytes named .md", "image.md", "skipped", r"binary file \(NUL bytes\)",
         _bytes("image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)),
    Case("a 50 MB note", "huge.md", "skipped", r"too large \(50000000 bytes > max_file_bytes 2000000\)",
         _big("huge.md", 50 * MB, b"A line of an enormous note, over and over again.\n")),
    Case("one 10 MB line", "one-line.md", "skipped", r"too large \(10000000 bytes > max_file_bytes",
         _big("one-line.md", 10 * MB, b"word ")),
    Case("10,000 headings", "headings.md", "indexed", "",
         _text("headings.md", "".join(f"# Heading {i}\n\nline {i}\n\n" for i in range(10_000)) + "headingsword\n"),
         word="headingsword"),
    Case("5,000-level nested lists", "nested.md", "indexed", "",
         _text("nested.md", "# Nested\n\n" + "- " * 5000 + "deep\n\n" + "> " * 5000 + "quote\n\nnestedword\n"),
         word="nestedword"),
    Case("frontmatter: broken YAML", "fm-broken.md", "warned", r"frontmatter is not valid YAML",
         _text("fm-broken.md", "---\ntitle: [unclosed\n---\n# Broken\n\nbrokenfmword\n"), word="brokenfmword"),
    Case("frontmatter: YAML alias bomb", "fm-bomb.md", "warned", r"frontmatter has more than 10000 values",
         _text("fm-bomb.md", ALIAS_BOMB), word="bombbodyword"),
    Case("frontmatter: not a mapping", "fm-list.md", "warned", r"frontmatter is a YAML list, not a mapping",
         _text("fm-list.md", "---\n- one\n- two\n---\n# List\n\nlistfmword\n"), word="listfmword"),
    Case("frontmatter: 1 MB long", "fm-long.md", "warned",
         r"cut: frontmatter is 1000\d+ bytes, more than max_frontmatter_bytes 65536",
         _text("fm-long.md", "---\ntitle: " + "x" * MB + "\n---\n# Long frontmatter\n\nlongfmword\n"), word="longfmword"),
    Case("an empty file", "empty.md", "indexed", "", _bytes("empty.md", b"")),
    Case("a symlink loop", "loop.md", "skipped", r"symlink loop", _symlink("loop.md", "loop.md")),
    Case("a symlink to a file outside the folder", "outside.md", "skipped", r"symlink pointing outside the notes folder",
         _symlink("outside.md", _outside)),
    Case("a symlink to /dev/zero", "zero.md", "skipped", r"symlink pointing outside the notes folder",
         _symlink("zero.md", "/dev/zero")),
    Case("a name with a newline", "new\\nline.md", "skipped", r"file name contains a control character",
         _text("new\nline.md", "# Newline\n\nnewlinenameword\n")),
    Case("a name that is not UTF-8", "bad\\xff.md", "skipped", r"file name is not valid UTF-8",
         lambda kb: (kb / os.fsdecode(b"bad\xff.md")).write_bytes(b"# Bad name\n\nbadnameword\n")),
    Case("a FIFO named x.md", "x.md", "skipped", r"not a regular file \(a FIFO\)", _fifo("x.md")),
    Case("a dangling symlink", "dangling.md", "skipped", r"dangling symlink \(its target .*gone\.md does not exist\)",
         _symlink("dangling.md", "gone.md")),
    Case("long words just under the size cap", "long-words.md", "warned",
         r"cut: the note makes \d+ chunks, more than max_chunks_per_file 1000; indexed the first 1000",
         _text("long-words.md", long_words_note(1_900_000))),
)

# Cases that refuse the whole run rather than one file (an ignore file that cannot be read would
# otherwise index what it excludes): a clear error at once, never a hang.
REFUSING: tuple[Case, ...] = (
    Case("a FIFO named .grooveignore", ".grooveignore", "refused", r"ignore file .*\.grooveignore is not a regular file",
         _fifo(".grooveignore")),
    Case("a symlink to /dev/zero named .grooveignore", ".grooveignore", "refused",
         r"ignore file .*\.grooveignore is not a regular file", _symlink(".grooveignore", "/dev/zero")),
)

# The settings the hostile run uses: the defaults, but a chunk cap the fake embedder's counts reach.
CONFIG = "[index]\nmax_chunks_per_file = 1000\n"

BY_NAME = {c.name: c for c in CASES + REFUSING}


def build(kb: Path, cases: tuple[Case, ...] | list[Case] = CASES) -> Path:
    """The good notes plus `cases` in `kb` (created)."""
    kb.mkdir(parents=True, exist_ok=True)
    _good(kb)
    for case in cases:
        case.make(kb)
    return kb


def matches(case: Case, text: str) -> bool:
    return re.search(case.reason, text) is not None
