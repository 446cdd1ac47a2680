"""A real installed plug-in for tests: a module and its ``*.dist-info`` (METADATA, entry_points.txt)
written under a directory; put the directory on ``sys.path`` (and ``PYTHONPATH`` for child
processes) and ``importlib.metadata`` finds its entry points as it finds a pip-installed package's."""

from __future__ import annotations

from pathlib import Path


def write_dist(root: Path, module: str, source: str, group: str, entries: dict[str, str]) -> Path:
    """``root/module.py`` and ``root/module-0.1.dist-info`` declaring ``entries`` (name → ``module:attr``
    target, or a bare attribute, which is taken from ``module``) under ``group``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(source)
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    lines = [
        f"{name} = {target if ':' in target else f'{module}:{target}'}" for name, target in entries.items()
    ]
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "\n".join(lines) + "\n")
    return root
