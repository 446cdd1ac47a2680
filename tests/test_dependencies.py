"""Every runtime dependency declared in pyproject.toml is imported somewhere in mucode (no dead weight)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
# distribution name -> the module mucode imports it as (only where they differ)
MODULE = {"pyyaml": "yaml", "pydantic-settings": "pydantic_settings", "prometheus-client": "prometheus_client",
          "math-verify": "math_verify", "tensorboard": "torch.utils.tensorboard"}


def test_every_declared_dependency_is_imported() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    sources = "\n".join(p.read_text() for p in (REPO / "mucode").rglob("*.py"))
    for dep in deps:
        dist = re.split(r"[\[<>=!~ ]", dep, maxsplit=1)[0].lower()
        module = MODULE.get(dist, dist.replace("-", "_"))
        pattern = rf"^\s*(import|from) {re.escape(module)}(\.|\s|$)"
        assert re.search(pattern, sources, re.M), f"{dist} is declared in pyproject.toml but mucode never imports {module}"
