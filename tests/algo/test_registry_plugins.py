"""``Registry`` with an entry-point group: plug-ins are real distributions on ``sys.path``.

A broken plug-in raises at every lookup naming its package; two packages declaring one name raise
naming both; ``refresh()`` reads the entry points again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mucode.registry import DuplicateNameError, PluginLoadError, Registry, UnknownNameError

GROUP = "mucode.test_widgets"


def _dist(root: Path, package: str, module_text: str, entries: str) -> None:
    """A distribution ``package`` (module + dist-info with METADATA and entry_points.txt) under ``root``."""
    module = package.replace("-", "_")
    (root / f"{module}.py").write_text(module_text)
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{entries}\n")


def test_plugins_load_lazily_and_refresh_rereads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg: Registry[object] = Registry("widget", entry_point_group=GROUP)
    reg.register("builtin", 1)
    assert reg.names() == ("builtin",)  # nothing installed yet
    _dist(tmp_path, "widget-a", "class Gear:\n    size = 3\n", "gear = widget_a:Gear")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "gear" not in reg  # entry points were read once already
    reg.refresh()
    gear = reg.get("gear")
    assert type(gear).__name__ == "Gear" and gear.size == 3  # type: ignore[attr-defined]  # a class is instantiated
    with pytest.raises(UnknownNameError, match="valid names: builtin, gear .*'mucode.test_widgets'"):
        reg.get("cog")


def test_a_broken_plugin_names_its_package_at_every_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dist(
        tmp_path, "widget-broken", "raise ImportError('missing dependency zzz')\n", "bad = widget_broken:Bad"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[object] = Registry("widget", entry_point_group=GROUP)
    for _ in range(2):
        with pytest.raises(PluginLoadError, match="'bad' .*package 'widget-broken'.*missing dependency zzz"):
            reg.get("anything")


def test_two_packages_with_one_name_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for package in ("widget-one", "widget-two"):
        root = tmp_path / package
        root.mkdir()
        _dist(root, package, "VALUE = 1\n", f"same = {package.replace('-', '_')}:VALUE")
        monkeypatch.syspath_prepend(str(root))
    reg: Registry[object] = Registry("widget", entry_point_group=GROUP)
    with pytest.raises(
        DuplicateNameError, match="'same' of package 'widget-(one|two)' is already registered"
    ):
        reg.names()
