"""Each mucode package's public surface, and imports that only import.

For every subpackage (and the top-level modules), in a fresh interpreter of its own so a side effect
is pinned on the package that caused it:

- every module imports, and every name in a module's ``__all__`` exists (lazy exports resolve);
- the names a package docstring shows in its ``from mucode.X import ...`` lines (the documented
  public API) are in that package's ``__all__``;
- importing all of it, and resolving those names, starts no thread and no process, adds no log
  handler, prints nothing, writes no file in the working directory, and changes no environment
  variable, signal handler, ``sys.path`` entry or ``atexit`` registration.

Exceptions, each documented where it lives: ``mucode.sandbox.executor``'s scripts run as files inside
the sandbox and import their siblings by flat names (only the package and its ``protocol`` module
are importable from outside); ``mucode.integrations.verl.register`` registers mucode's losses with verl on
import, which is its purpose (verl's own import adds a root log handler), so only its exports are
checked. Not covered: network connections, and effects of third-party imports that mucode cannot
tell apart from its own.
"""

from __future__ import annotations

import importlib.util
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mucode

PACKAGE_DIR = Path(mucode.__file__).parent
FLAT_IMPORT_SCRIPTS = {
    "mucode.sandbox.executor.executor",
    "mucode.sandbox.executor.runner",
    "mucode.sandbox.executor.slots",
    "mucode.sandbox.executor.cleanup",
    "mucode.sandbox.executor.languages",
    "mucode.sandbox.executor.pyrun",
    "mucode.sandbox.executor.seccomp",
    "mucode.sandbox.executor.harness",
}
REGISTERS_ON_IMPORT = "mucode.integrations.verl.register"

_PROBE = r'''
import atexit, importlib, json, logging, os, signal, sys, threading

PACKAGE, MODULES, CHECK_EFFECTS = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
SIGNALS = [s for s in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGALRM", "SIGPIPE", "SIGHUP", "SIGUSR1") if hasattr(signal, s)]


def children():
    pid = os.getpid()
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += f.read().split()
    return sorted(out)


def handlers():  # the root logger's and mucode's (third-party libraries configure their own loggers)
    names = [n for n in list(logging.Logger.manager.loggerDict) if n == "mucode" or n.startswith("mucode.")]
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in names)]
    return sorted(f"{lg.name}:{type(h).__name__}" for lg in loggers for h in getattr(lg, "handlers", [])
                  if not isinstance(h, logging.NullHandler))


def mucode_caller():
    """The mucode module that made the current call, if any (third-party import effects are theirs)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in ("os", "__main__"):
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name if name == "mucode" or name.startswith("mucode.") else None


exit_hooks, env_writes = [], []
_register, _putenv, _unsetenv = atexit.register, os.putenv, os.unsetenv


def register(func, *args, **kwargs):
    if mucode_caller():
        exit_hooks.append(f"{mucode_caller()}: {getattr(func, '__qualname__', func)!r}")
    return _register(func, *args, **kwargs)


def putenv(key, value):
    if mucode_caller():
        env_writes.append(f"{mucode_caller()} sets {key!r}")
    return _putenv(key, value)


def unsetenv(key):
    if mucode_caller():
        env_writes.append(f"{mucode_caller()} unsets {key!r}")
    return _unsetenv(key)


atexit.register, os.putenv, os.unsetenv = register, putenv, unsetenv


def snapshot():
    return {"threads": sorted(t.name for t in threading.enumerate()), "children": children(),
            "log handlers": handlers(), "environment": list(env_writes), "sys.path": list(sys.path),
            "signal handlers": {s: repr(signal.getsignal(getattr(signal, s))) for s in SIGNALS},
            "atexit hooks": list(exit_hooks), "files in cwd": sorted(os.listdir("."))}


before = snapshot()
problems = []
for name in MODULES:
    module = importlib.import_module(name)
    for export in getattr(module, "__all__", ()):
        if not hasattr(module, export):
            problems.append(f"{name}.__all__ names {export!r}, which the module does not have")
after = snapshot()
if CHECK_EFFECTS:
    for key, value in before.items():
        if after[key] != value:
            if isinstance(value, dict):
                changed = sorted(k for k in {*value, *after[key]} if value.get(k) != after[key].get(k))
                problems.append(f"importing changed {key}: {changed}")
            else:
                problems.append(f"importing changed {key}: {value!r} -> {after[key]!r}")
print(json.dumps(problems))
'''


# Packages that setuptools' package-dir mapping ships from top-level folders (sandbox/, configs/, eval/):
# not under mucode/ on disk, so each is walked with the package that holds it.
MAPPED = {
    "mucode": ["mucode.configs"],
    "mucode.sandbox": ["mucode.sandbox.executor"],
    "mucode.eval": ["mucode.eval.data"],
}


def _walk(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    return [
        package,
        *(m.name for m in pkgutil.walk_packages(list(spec.submodule_search_locations), f"{package}.")),
    ]


def _modules(package: str) -> list[str]:
    if package == "mucode":  # the top-level modules; the subpackages have tests of their own
        names = [
            "mucode",
            *(f"mucode.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE_DIR)]) if not m.ispkg),
        ]
    else:
        names = _walk(package)
    names += [n for mapped in MAPPED.get(package, []) for n in _walk(mapped)]
    return [n for n in names if n not in FLAT_IMPORT_SCRIPTS]


# every directory of the source tree with Python files in it (a namespace package too)
SUBPACKAGES = [
    "mucode",
    *sorted(f"mucode.{d.name}" for d in PACKAGE_DIR.iterdir() if d.is_dir() and any(d.glob("*.py"))),
]


def test_every_package_directory_is_a_regular_package() -> None:
    """An ``__init__.py`` (with a docstring) in each: pkgutil, mypy and readers all see a package."""
    dirs = [
        d
        for d in PACKAGE_DIR.rglob("*")
        if d.is_dir() and any(d.glob("*.py")) and "__pycache__" not in d.parts
    ]
    assert dirs and [str(d) for d in dirs if not (d / "__init__.py").is_file()] == []


def test_every_subpackage_is_covered() -> None:
    assert {
        "mucode",
        "mucode.algo",
        "mucode.sandbox",
        "mucode.verifier",
        "mucode.train",
        "mucode.eval",
    } <= set(SUBPACKAGES)
    assert "mucode.verifier.client" in _modules("mucode.verifier") and "mucode.cli" in SUBPACKAGES
    assert "mucode.sandbox.executor.protocol" in _modules("mucode.sandbox")
    assert "mucode.eval.data" in _modules("mucode.eval") and "mucode.configs" in _modules("mucode")


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_exports_exist_and_importing_only_imports(package: str, tmp_path: Path) -> None:
    modules = _modules(package)
    groups = [
        [m for m in modules if not m.startswith(REGISTERS_ON_IMPORT)],
        [m for m in modules if m.startswith(REGISTERS_ON_IMPORT)],
    ]
    for group, check_effects in zip(groups, (True, False), strict=True):
        if not group:
            continue
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, package, json.dumps(group), "1" if check_effects else "0"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        *printed, last = out.stdout.splitlines() or [""]
        assert json.loads(last) == [], json.loads(last)
        if check_effects:
            assert not printed and not out.stderr.strip(), (
                f"importing {package} printed: {out.stdout[:500]}{out.stderr[-1500:]}"
            )


_DOC_IMPORT = re.compile(r"from (mucode(?:\.\w+)*) import ([\w, ]+)")


@pytest.mark.parametrize("package", SUBPACKAGES[1:])
def test_documented_public_api_is_exported(package: str) -> None:
    """``from mucode.X import a, b`` in package X's docstring: a and b are in X's ``__all__``."""
    import importlib

    module = importlib.import_module(package)
    for target, names in _DOC_IMPORT.findall(module.__doc__ or ""):
        if target != package:
            continue
        exported = set(getattr(module, "__all__", ()))
        documented = {n.strip() for n in names.split(",") if n.strip()}
        assert documented <= exported, (
            f"{package}'s docstring shows {sorted(documented - exported)}, not in __all__"
        )
