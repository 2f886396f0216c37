"""Building the SDK as a wheel (what `pip install sdk/python` does) leaves
nothing in the source tree: no `build/`, no `*.egg-info`."""

import subprocess
import sys
import zipfile
from pathlib import Path

SDK = Path(__file__).resolve().parent.parent


def test_a_wheel_builds_without_leaving_files_in_the_sdk(tmp_path):
    before = sorted(p.name for p in SDK.iterdir())
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--no-build-isolation", "--disable-pip-version-check",
         "-w", str(tmp_path), str(SDK)],
        check=True,
    )
    after = sorted(p.name for p in SDK.iterdir())
    assert after == before, "the build left files in sdk/python"
    (wheel,) = tmp_path.glob("weir_sdk-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "weir_sdk/__init__.py" in names
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]
