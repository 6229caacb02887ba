"""Benchmark: start-up of ``raglab --help`` and ``raglab validate --help`` against
``python -c pass`` (best of ``--repeat``, wall time).

    python -m tests.benchmarks startup [--repeat 5]
"""

from __future__ import annotations

import argparse

from tests.benchmarks.common import load, python, timed_process

TARGET_S = 1.0  # "fast": well under a second on an idle machine


def best(cmd: list[str], repeat: int) -> float:
    return min(timed_process(cmd)["wall"] for _ in range(repeat))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    print(f"start-up, best of {a.repeat} ({load()})")
    base = best([python(), "-c", "pass"], a.repeat)
    print(f"  python -c pass: {base:.3f} s")
    for args in (["--help"], ["validate", "--help"], ["run", "--help"]):
        t = best([python(), "-m", "raglab.cli", *args], a.repeat)
        print(f"  raglab {' '.join(args)}: {t:.3f} s ({t / base:.1f}x python -c pass, "
              f"+{t - base:.3f} s)")


if __name__ == "__main__":
    main()
