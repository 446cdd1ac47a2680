"""The layers hold: every import of every module, read from the source, against the layer table.

- Each module belongs to an *area* (``mucode.<area>``, or ``ground`` for the vocabulary and the
  registry on the ground floor, ``config`` for the config tree). An area may import only the areas
  its row of ``MAY_IMPORT`` names (docs/architecture.md shows the same table); nothing imports the
  command line; the in-sandbox executor imports nothing of mucode.
- No two areas import each other, and no modules form an import cycle at module level.
- A function-level import is only allowed where it guards a heavy dependency, and it says which:
  ``# lazy: torch`` (or another name of ``HEAVY``) on the import line, and importing the module named
  really does import that dependency (checked through the module-level imports, transitively).
- pyproject.toml lists every package (setuptools' ``packages``), the mapped folders included.

Imports under ``if TYPE_CHECKING:`` are not read: they never run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"mucode": "mucode", "mucode.sandbox.executor": "sandbox", "mucode.configs": "configs",
         "mucode.eval.data": "eval"}  # fmt: skip
"""Package name -> folder (pyproject.toml's package-dir mapping ships the last three inside mucode)."""

HEAVY = ("torch", "transformers", "vllm", "verl", "matplotlib", "fastapi", "uvicorn", "datasets", "evalplus",
         "math_verify", "wandb", "pyarrow", "huggingface_hub", "docker", "tokenizers", "tensorboard", "trl",
         "safetensors", "ray", "sympy", "latex2sympy2_extended", "antlr4")  # fmt: skip
"""Dependencies heavy enough (to import, or optional) that a function may import them, or a module that
pulls them in, lazily (the last two: math-verify's LaTeX parser, whose internals mucode.rewards.math_fast
wraps)."""

GROUND = {
    "mucode",
    "mucode.protocol",
    "mucode.registry",
    "mucode.seeds",
    "mucode.logs",
    "mucode.configs",
    "mucode.components",
}

MAY_IMPORT: dict[str, set[str]] = {
    "ground": set(),
    "executor": set(),
    "algo": {"ground"},
    "data": {"ground"},
    "assets": {"ground"},
    "sandbox": {"ground", "executor"},
    "rollout": {"ground", "assets"},
    "rewards": {"ground", "sandbox", "executor"},
    "verifier": {"ground", "rewards", "sandbox", "executor"},
    "config": {"ground", "algo", "data", "rollout"},
    "eval": {"ground", "data", "assets", "rollout", "rewards", "verifier", "sandbox", "executor"},
    "train": {
        "ground",
        "algo",
        "data",
        "assets",
        "rollout",
        "config",
        "eval",
        "verifier",
        "rewards",
        "sandbox",
    },
    "integrations": {"ground", "algo", "data", "assets", "config", "verifier", "rewards", "sandbox"},
    "study": {
        "ground",
        "algo",
        "data",
        "assets",
        "rollout",
        "config",
        "verifier",
        "rewards",
        "sandbox",
        "train",
    },
    "cli": {
        "ground",
        "algo",
        "data",
        "assets",
        "rollout",
        "config",
        "eval",
        "verifier",
        "rewards",
        "sandbox",
        "train",
        "integrations",
        "study",
        "executor",
    },
}
"""Who may import whom (the layer order, bottom to top). Same-area imports are always allowed."""


def area_of(module: str) -> str:
    if module in GROUND:
        return "ground"
    if module.startswith("mucode.sandbox.executor"):
        return "executor"
    if module in ("mucode.config", "mucode.config_algo", "mucode.config_methods"):
        return "config"
    return module.split(".")[1]


def module_files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, folder in ROOTS.items():
        base = REPO / folder
        for path in base.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            name = ".".join((package, *path.relative_to(base).with_suffix("").parts)).removesuffix(
                ".__init__"
            )
            out[name] = path
    return out


MODULES = module_files()


class Import:
    def __init__(self, module: str, target: str, line: int, text: str, in_function: bool) -> None:
        self.module, self.target, self.line, self.text, self.in_function = (
            module,
            target,
            line,
            text,
            in_function,
        )

    def where(self) -> str:
        return f"{MODULES[self.module].relative_to(REPO)}:{self.line}"


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def read_imports(module: str) -> list[Import]:
    path = MODULES[module]
    source = path.read_text()
    lines = source.splitlines()
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other, in_function)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                text = "\n".join(lines[child.lineno - 1 : child.end_lineno])
                found.extend(
                    Import(module, t, child.lineno, text, in_function) for t in _targets(module, path, child)
                )
            else:
                visit(
                    child,
                    in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda),
                )

    visit(ast.parse(source), False)
    return found


IMPORTS = {m: read_imports(m) for m in MODULES}


def internal(imports: list[Import]) -> Iterator[Import]:
    return (i for i in imports if i.target == "mucode" or i.target.startswith("mucode."))


def owner(target: str) -> str:
    """The module an import target names (a name imported from a module belongs to that module)."""
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def heavy_reached(target: str) -> set[str]:
    """Third-party roots of HEAVY that importing ``target`` imports (module-level imports, transitively)."""
    seen: set[str] = set()
    stack = [".".join(target.split(".")[:i]) for i in range(1, target.count(".") + 2)]
    heavy: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in MODULES:
            for imp in IMPORTS[name]:
                if not imp.in_function:
                    stack.extend(
                        ".".join(imp.target.split(".")[:i]) for i in range(1, imp.target.count(".") + 2)
                    )
        elif name.split(".")[0] in HEAVY:
            heavy.add(name.split(".")[0])
    return heavy


def layer_violations(imports: dict[str, list[Import]]) -> list[str]:
    bad = []
    for module, found in imports.items():
        mine = area_of(module)
        for imp in internal(found):
            theirs = area_of(owner(imp.target))
            if theirs != mine and theirs not in MAY_IMPORT[mine]:
                bad.append(f"{imp.where()}: {mine} imports {theirs} ({imp.target})")
    return bad


def test_every_import_follows_the_layer_order() -> None:
    assert len(MODULES) > 100 and layer_violations(IMPORTS) == []


def test_the_layer_check_catches_an_upward_import() -> None:
    """A deliberate upward import (the sandbox reaching into the trainer) is reported."""
    planted = dict(IMPORTS)
    planted["mucode.sandbox.base"] = [*IMPORTS["mucode.sandbox.base"],
                                      Import("mucode.sandbox.base", "mucode.train.loop", 1, "", False)]  # fmt: skip
    assert layer_violations(planted) == [
        "mucode/sandbox/base.py:1: sandbox imports train (mucode.train.loop)"
    ]


def test_the_layer_table_is_a_strict_order() -> None:
    """No two areas may import each other (directly or around a loop): the table is acyclic."""
    state: dict[str, int] = {}

    def visit(area: str, path: list[str]) -> None:
        if state.get(area) == 2:
            return
        assert state.get(area) != 1, f"the layer table has a cycle: {' -> '.join([*path, area])}"
        state[area] = 1
        for below in MAY_IMPORT[area]:
            visit(below, [*path, area])
        state[area] = 2

    for area in MAY_IMPORT:
        visit(area, [])


def test_no_import_cycle_between_modules() -> None:
    edges = {
        m: {owner(i.target) for i in internal(found) if not i.in_function} - {m}
        for m, found in IMPORTS.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strongconnect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in MODULES:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in MODULES:
        if v not in index:
            strongconnect(v)
    assert cycles == []


LAZY = re.compile(r"#\s*lazy:\s*([\w, ]+)")


def test_function_level_imports_guard_a_named_heavy_dependency() -> None:
    problems = []
    for module, found in IMPORTS.items():
        if area_of(module) == "executor":
            continue
        for imp in found:
            if not imp.in_function:
                continue
            match = LAZY.search(imp.text)
            named = {n.strip() for n in match.group(1).split(",")} if match else set()
            if named == {"command"} and module == "mucode.cli.app" and imp.target.startswith("mucode.cli."):
                continue  # the app imports a command module when it registers it (``main``)
            reached = heavy_reached(imp.target)
            if not named:
                problems.append(f"{imp.where()}: `{imp.text.strip()}` inside a function needs `# lazy: DEP` "
                                f"naming the heavy dependency it guards (it reaches {sorted(reached) or 'none'}); "
                                "otherwise import it at module top")  # fmt: skip
            elif not named <= set(HEAVY) or not named & reached:
                problems.append(
                    f"{imp.where()}: `# lazy: {', '.join(sorted(named))}` but importing "
                    f"{imp.target} reaches {sorted(reached) or 'no heavy dependency'}"
                )
    assert problems == []


def test_pyproject_lists_every_package() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {m for m, path in MODULES.items() if path.name == "__init__.py"}
    assert listed == packages


@pytest.mark.parametrize("area", sorted(MAY_IMPORT))
def test_every_area_has_modules(area: str) -> None:
    """The table names no area that does not exist (a renamed package would silently escape it)."""
    assert any(area_of(m) == area for m in MODULES)
