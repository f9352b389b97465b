"""`groove related --format dot`: a related-notes answer as a Graphviz DOT digraph.

One node per note, named by its path and labelled with its title over its path (the source note drawn bold);
one edge per related note, from the note it was reached from (the source, one hop out) to it, labelled with
its score rounded to 3 places. A note the walk went through but that is not in the answer (cut by the limit)
is a node labelled with its path alone. The text is Unicode (write it as UTF-8, Graphviz's default charset);
`--format svg` pipes it through `dot -Tsvg` (groove/cli.py). docs/search.md ("Related notes") shows it.
"""

from __future__ import annotations

from groove.api.answers import RelatedAnswer


def dot_string(text: str) -> str:
    """`text` as a DOT quoted string that a label shows as written: backslashes doubled (Graphviz reads `\\N`,
    `\\l`... in labels), quotes escaped, every line break (`\\r\\n`, `\\r`, `\\n`) as DOT's `\\n`."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{escaped}"'


def _node(path: str, title: str | None, extra: str = "") -> str:
    label = f"{title}\n{path}" if title else path
    return f"  {dot_string(path)} [label={dot_string(label)}{extra}];"


def related_dot(answer: RelatedAnswer) -> str:
    """The answer as a DOT digraph (ends with a newline)."""
    source = answer.source
    out = [
        "digraph related {",
        "  rankdir=LR;",
        "  node [shape=box];",
        _node(source.path, source.title, ", style=bold"),
    ]
    listed = {source.path} | {n.path for n in answer.related}
    passed: list[str] = []  # notes walked through but not in the answer
    for n in answer.related:
        for path in n.via[1:-1]:
            if path not in listed and path not in passed:
                passed.append(path)
    out += [_node(n.path, n.title) for n in answer.related]
    out += [_node(path, None) for path in passed]
    for n in answer.related:
        origin = n.via[-2] if len(n.via) >= 2 else source.path
        out.append(f"  {dot_string(origin)} -> {dot_string(n.path)} [label={dot_string(f'{n.score:.3f}')}];")
    out.append("}")
    return "\n".join(out) + "\n"
