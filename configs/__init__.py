"""The presets (``--config NAME``), installed as ``mucode.configs``: one YAML file each, overriding the
defaults of ``mucode.config``. ``CONFIG_DIR`` is where they are."""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent

__all__ = ["CONFIG_DIR"]
