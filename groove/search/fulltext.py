"""The full-text half of a search, in groove's terms: which legs a query runs, with which terms, and which
common terms each leaves out, before any store is asked.

Three legs, one per full-text index of the store (`groove.store.protocols.TextKind`): `trigram` searches
the seeds' phrases as substrings of the folded text, `words` the stemmed words of a query made only of
words of alphabets written with spaces (it replaces the trigram leg then: decision 0014), `bigram` the CJK
bigrams of the query's Japanese (decision 0006). Each is a `TextQuery`: its terms, the ones that match as a
prefix (a one-character CJK run), and for the trigram leg the excluded phrases.

Common terms (decision 0010): from 5,000 chunks on, before a leg runs, each of its terms is counted in
the store's index (`doc_freq`) and the terms are kept rarest first, while a term's idf is at least a tenth
of the rarest's and the kept terms' chunks add up to at most the chunks that hold any term of that index.
A term left out weighs little in bm25 (its idf clamps to almost 0 past half the chunks) but would make the
store walk and score most of them. The compiler's phrases are unchanged; only what the leg hands the store
is. The rule is the same whichever store answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from groove.corpus.cjk import query_terms
from groove.search.compiler import CompiledQuery
from groove.store.protocols import SearchReads, TextKind, TextQuery

MIN_WEIGHT_SHARE = 0.1
POSTINGS_SHARE = 1.0
PRUNE_MIN_CHUNKS = 5_000

FULL_TEXT_LEGS = ("trigram", "words", "bigram")  # the full-text legs, in the order they are fused and shown
KIND_OF: dict[str, TextKind] = {"trigram": "phrases", "words": "words", "bigram": "bigrams"}

Leg = tuple[str, TextQuery, list[str]]  # (leg, its query, its evidence terms)


def bigram_query(text: str) -> TextQuery | None:
    """The bigram leg of a query's text: every bigram of every CJK run, a one-character run as a prefix term;
    None without CJK text."""
    terms = query_terms(text)
    if not terms:
        return None
    return TextQuery("bigrams", tuple(terms), frozenset(t for t in terms if len(t) == 1))


def plan(cq: CompiledQuery, bigrams: TextQuery | None, use_fts: bool = True) -> list[Leg]:
    """Each full-text leg a compiled query runs: the word index for a query made only of words of spaced
    alphabets, else the trigram index for the seeds' phrases (with the exclusions); the bigram index for its
    CJK runs."""
    legs: list[Leg] = []
    if use_fts and cq.trigram_expr is not None:
        legs.append(("trigram", TextQuery("phrases", cq.positives, excluded=cq.negatives), list(cq.positives)))
    if use_fts and cq.word_expr is not None:
        legs.append(("words", TextQuery("words", cq.words), list(cq.words)))
    if bigrams is not None:
        legs.append(("bigram", bigrams, query_terms(cq.vector_text)))
    return legs


def excludes_by_id(leg: str) -> bool:
    """Whether a leg drops the excluded chunks by id (the trigram leg leaves out their phrases itself)."""
    return leg != "trigram"


def idf(n: int, total: int) -> float:
    """bm25's idf of a term in `n` of `total` chunks (FTS5's, clamped to 1e-6 where it would go negative)."""
    return max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6)


async def without_common_terms(
    reads: SearchReads,
    query: TextQuery,
    *,
    weight_share: float | None = None,
    postings_share: float | None = None,
    min_chunks: int | None = None,
) -> TextQuery:
    """`query` without its common terms (the module's rule; the defaults are its constants).

    Terms are taken rarest first: the rarest is always kept, and each next one while its idf is at least
    `weight_share` of the rarest matching term's idf and the kept terms' chunk counts add up to at most
    `postings_share` of the chunks holding any term of the index. Returned unchanged: a query of one term,
    and any over fewer than `min_chunks` chunks."""
    weight_share = MIN_WEIGHT_SHARE if weight_share is None else weight_share
    postings_share = POSTINGS_SHARE if postings_share is None else postings_share
    min_chunks = PRUNE_MIN_CHUNKS if min_chunks is None else min_chunks
    terms = query.terms
    if len(terms) < 2 or (await reads.doc_freq(query.kind, ()))[1] < min_chunks:
        return query
    df, n = await reads.doc_freq(query.kind, terms)
    counts = [df.get(t, 0) for t in terms]
    matching = [c for c in counts if c > 0]
    if not matching:
        return query
    floor = weight_share * idf(min(matching), n)
    # The postings bound counts the chunks the index holds terms for: every chunk has a row in the bigram
    # index, but only the chunks with CJK text hold any (47% of the scale bench's 100k mixed chunks).
    budget = postings_share * await reads.indexed_rows(query.kind)
    by_rarity = sorted(range(len(terms)), key=lambda i: (counts[i], i))
    keep = {by_rarity[0]}
    spent = counts[by_rarity[0]]
    for i in by_rarity[1:]:
        if idf(counts[i], n) < floor or spent + counts[i] > budget:
            break
        keep.add(i)
        spent += counts[i]
    if len(keep) == len(terms):
        return query
    return query.keeping({terms[i] for i in keep})


def left_out(full: TextQuery, sent: TextQuery) -> list[str]:
    """The terms of `full` that `sent` no longer has, quoted as the compiler writes a term."""
    kept = set(sent.terms)
    return [quoted(t, t in full.prefix) for t in full.terms if t not in kept]


def quoted(term: str, prefix: bool = False) -> str:
    return '"' + term.replace('"', '""') + '"' + ("*" if prefix else "")


def terms_of(legs: Sequence[Leg]) -> dict[str, TextQuery]:
    return {name: query for name, query, _ in legs}
