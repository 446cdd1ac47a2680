"""A process and its descendants on Linux (/proc): the tree, its resident memory, its CPU time.

One copy for the benches (bench/loadgen.py samples a server's memory; bench/verifier.py and
bench/sandbox.py measure CPU seconds) and the tests that check nothing is left running (pytest puts
bench/ on the import path, see [tool.pytest.ini_options] in pyproject.toml). Reads /proc without
locking: a process may exit between two reads; such a process is skipped.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

__all__ = ["children_cpu_s", "cpu_by_process", "cpu_s", "descendants", "rss_mb", "tree"]


def tree(pid: int) -> list[int]:
    """``pid`` (first) and all its live descendants, sessions of their own included."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    return tree(pid)[1:]


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB."""
    total = 0.0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants, and by the
    descendants that exited and were waited for."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
    return total


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's children that exited and were waited for."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def cpu_by_process(pid: int) -> dict[int, tuple[int, str, float, float]]:
    """For ``pid`` and each live descendant: (its parent, its command line, its own CPU seconds, the
    CPU seconds of its children that exited and were waited for)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[int, str, float, float]] = {}
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        own = (int(fields[11]) + int(fields[12])) / tick
        out[p] = (int(fields[1]), cmd, own, (int(fields[13]) + int(fields[14])) / tick)
    return out
