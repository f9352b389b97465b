"""groove's benchmarks: speed measured, not asserted.

Each benchmark measures the things it compares side by side in ONE run (the
machines here are small and shared, so only ratios taken in the same run mean
much), prints a small table (ratios first, then the raw numbers) and returns
the same numbers as a dict that `--json PATH` writes.

    python -m bench                   every benchmark, default sizes (each < ~5 min)
    python -m bench NAME [options]    one of them, or one run by name only (`python -m bench --help` lists them)

Nothing downloads: HF_HUB_OFFLINE=1 is set before anything loads a model. The
data comes from ../shared/data (BEIR SciFact), which a user's checkout does
not have; `--data PATH` points elsewhere. See docs/benchmarks.md.
"""
