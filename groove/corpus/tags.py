"""The one folding rule for tags, used when storing them and when matching them.

`fold_tag` is NFKC then casefold, with surrounding whitespace and leading '#'
removed: `Ünïcode`, `ünïcode` and `ÜNÏCODE` are one tag, full-width `ＡＢＣ` is
`abc`, `日本語` stays itself. `doc_tags` stores tags folded, so SQL compares
folded values with `=` and the index on `doc_tags(tag)` applies (SQLite's own
`lower()` folds ASCII only).
"""

from __future__ import annotations

import unicodedata
from typing import Any


def fold_tag(tag: Any) -> str:
    """The folded form of a tag ('' for a tag that is only whitespace or '#')."""
    return unicodedata.normalize("NFKC", str(tag)).strip().lstrip("#").strip().casefold()
