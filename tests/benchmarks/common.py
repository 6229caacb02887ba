"""Shared helpers of the benchmarks: timing child processes (wall and CPU), the load."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def timed_process(cmd: list[str], cwd: Path | None = None,
                  env: dict[str, str] | None = None) -> dict[str, float]:
    """Run ``cmd``; its wall time, CPU time (user + system) and peak RSS (MiB), all of that
    one child (``wait4``: the peak of this process alone, not the largest child so far).
    Fails loudly when the command fails."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env or child_env(), stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-3000:]
            raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({p.returncode}):\n{tail}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall": wall, "cpu": cpu, "rss_mib": usage.ru_maxrss / 1024}


def python() -> str:
    return sys.executable


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def doc_table_main(prog: str, args: list[str] | None, table, default_k: int, doc: Path,
                   begin: str, end: str, what: str = "rows") -> None:
    """``main`` of a benchmark that prints a simulation table (``table(k)``) and, with
    ``--write``, puts it into ``doc`` between the markers ``begin`` and ``end``."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--k", type=int, default=default_k, help=f"data sets per {what}")
    parser.add_argument("--write", action="store_true", help=f"put the table into {doc.name}")
    opts = parser.parse_args(args)
    t0 = time.process_time()
    text = table(opts.k)
    print(text)
    print(f"\n(CPU {time.process_time() - t0:.1f} s)")
    if opts.write:
        write_between(doc, begin, end, text)
        print(f"wrote the table into {doc}")


def write_between(doc: Path, begin: str, end: str, text: str) -> None:
    """Put ``text`` into ``doc`` between the markers ``begin`` and ``end`` (both must be
    there)."""
    import re

    page = doc.read_text(encoding="utf-8")
    new, n = re.subn(f"{re.escape(begin)}.*?{re.escape(end)}",
                     lambda _: f"{begin}\n{text}\n{end}", page, flags=re.S)
    if n != 1:
        raise SystemExit(f"{doc}: expected the markers {begin} ... {end} once, found {n}")
    doc.write_text(new, encoding="utf-8")
