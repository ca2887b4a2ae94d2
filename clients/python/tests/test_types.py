"""The package is typed (``py.typed``): mypy --strict accepts it and these
tests, which use it as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_strict_accepts_the_client_and_its_use(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), "src", "tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (ROOT / "src" / "handover_client" / "py.typed").is_file()
