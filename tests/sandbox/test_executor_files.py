"""The executor's files run as plain scripts under a bare ``python3 -I -S`` (as in the image and the
jail): they import only the standard library and each other, never ``mucode`` or a third-party
package, and the directory the backends and the image use is the one inside the package."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mucode.sandbox.executor import EXECUTOR_DIR

import mucode
from mucode.sandbox.local import LocalBackend

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
for name in sys.argv[2:]:
    __import__(name)
new = sorted(set(sys.modules) - before)
print(json.dumps({"new": new, "stdlib": sorted(sys.stdlib_module_names)}))
"""


def test_executor_modules_import_only_the_standard_library_and_each_other() -> None:
    names = sorted(p.stem for p in EXECUTOR_DIR.glob("*.py") if p.stem != "__init__")
    assert {"executor", "protocol", "runner", "pyrun", "slots", "cleanup", "seccomp", "languages"} <= set(
        names
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-S", "-c", PROBE, str(EXECUTOR_DIR), *names],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    allowed = set(found["stdlib"]) | set(names)
    outside = [m for m in found["new"] if m.split(".")[0] not in allowed]
    assert not outside, f"executor files import non-stdlib modules: {outside}"


def test_the_executor_is_the_package_s_and_the_backends_use_it() -> None:
    # From a source checkout mucode.sandbox.executor is the top-level sandbox/ folder (setuptools'
    # package-dir mapping); tests/test_wheel_install.py checks where an installed wheel puts it.
    in_checkout = Path(mucode.__file__).resolve().parent.parent / "sandbox"
    assert EXECUTOR_DIR in (in_checkout, Path(mucode.__file__).resolve().parent / "sandbox" / "executor")
    assert LocalBackend().executor_dir == EXECUTOR_DIR
    for name in ("executor.py", "protocol.py", "jail.sh", "Dockerfile"):
        assert (EXECUTOR_DIR / name).is_file(), name
    dockerfile = (EXECUTOR_DIR / "Dockerfile").read_text()
    assert "COPY *.py /opt/sandbox/" in dockerfile  # build context: this directory
