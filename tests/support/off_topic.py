"""Ten topics with nothing in common: a query about none of them is off topic, even for the bag-of-words fake."""

from __future__ import annotations

from pathlib import Path

from tests.support.common import write

TOPICS = {
    "rice": ["rinse the rice and soak it", "simmer the rice covered", "rest the cooked rice before serving"],
    "bread": ["knead the bread dough", "let the dough rise overnight", "bake the loaf in a hot oven"],
    "garden": ["water the tomato plants", "tomatoes want full sun", "stake the tomato vines"],
    "rust": ["rust borrows are checked at compile time", "lifetimes name scopes in rust", "rust moves ownership"],
    "invoices": ["the invoice was paid late", "accounting closes the quarter", "payment terms are thirty days"],
    "running": ["marathon pace is steady", "running shoes wear out", "long runs build endurance"],
    "guitar": ["practise chords slowly", "tune the guitar strings", "a metronome keeps time"],
    "camera": ["film cameras need light meters", "develop the negatives", "scan the prints"],
    "moving": ["pack the boxes by room", "cancel the utilities", "register the new address"],
    "cat": ["the old cat drinks more water", "the vet checks the kidneys", "feed the cat renal food"],
}


def write_topics(kb: Path) -> None:
    """One note per topic, a section per phrase."""
    for name, parts in TOPICS.items():
        body = "\n\n".join(f"## {p.split()[-1].title()}\n\n{p.capitalize()}. {p.capitalize()} again." for p in parts)
        write(kb / f"{name}.md", f"# {name.title()}\n\n{body}\n")
