"""The version is written once, in meson.build's project(): the extension is
built with it (ringsafe.__version__), and pyproject.toml takes it from there
(dynamic = ["version"], meson-python)."""

import pathlib
import re

import ringsafe
from ringsafe import _ringsafe

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_version_is_meson_builds():
    declared = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", (ROOT / "meson.build").read_text(), re.S)
    assert declared and ringsafe.__version__ == _ringsafe.__version__ == declared.group(1)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and not re.search(r"^version\s*=", pyproject, re.M)
