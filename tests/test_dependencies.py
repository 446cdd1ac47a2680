"""Every runtime dependency declared in pyproject.toml is imported somewhere in mucode (no dead weight)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
# distribution name -> the module mucode imports it as (only where they differ)
MODULE = {
    "pyyaml": "yaml",
    "pydantic-settings": "pydantic_settings",
    "prometheus-client": "prometheus_client",
    "math-verify": "math_verify",
    "tensorboard": "torch.utils.tensorboard",
}


def test_every_declared_dependency_is_imported() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    sources = "\n".join(p.read_text() for p in (REPO / "mucode").rglob("*.py"))
    for dep in deps:
        dist = re.split(r"[\[<>=!~ ]", dep, maxsplit=1)[0].lower()
        module = MODULE.get(dist, dist.replace("-", "_"))
        pattern = rf"^\s*(import|from) {re.escape(module)}(\.|\s|$)"
        assert re.search(pattern, sources, re.M), (
            f"{dist} is declared in pyproject.toml but mucode never imports {module}"
        )


# third-party modules mucode imports without declaring them, and why that is right
UNDECLARED = {
    "huggingface_hub": "installed with transformers, which is built on it",
    "starlette": "FastAPI's foundation, installed with fastapi",
    "packaging": "installed with transformers (and vllm, whose version mucode.rollout.vllm checks)",
    "latex2sympy2_extended": "math-verify's LaTeX parser, installed with math-verify (mucode.rewards.math_fast "
    "wraps its parser factory)",
    "antlr4": "the parser runtime of math-verify[antlr4-9-3], installed with it (math_fast sets its prediction mode)",
}


def _third_party_imports() -> set[str]:
    import ast
    import sys

    found: set[str] = set()
    for path in (REPO / "mucode").rglob("*.py"):
        if "executor" in path.parts:  # the in-sandbox executor: standard library only (its own test)
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "mucode"}


def test_every_third_party_import_is_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [
        *project["dependencies"],
        *(d for extra in project["optional-dependencies"].values() for d in extra),
    ]
    modules = set()
    for dep in declared:
        dist = re.split(r"[\[<>=!~ ]", dep, maxsplit=1)[0].lower()
        modules.add(MODULE.get(dist, dist.replace("-", "_")).split(".")[0])
    missing = _third_party_imports() - modules - set(UNDECLARED)
    assert not missing, f"mucode imports {sorted(missing)} but pyproject.toml declares no such dependency"
    assert "torch" in _third_party_imports() and "torch" in modules  # the scan sees imports at all
