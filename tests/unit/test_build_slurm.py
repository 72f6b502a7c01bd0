"""ci/build-slurm.sh builds and installs Slurm from a source tree (issue 69): docs/adopting.md
shows the very commands it runs, packages and configure line, and the script parses. The
build itself is not run here (not in CI)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPT = CHECKOUT / "ci" / "build-slurm.sh"
ADOPTING = CHECKOUT / "docs" / "adopting.md"
#: The source tree and prefix docs/adopting.md's build block is written for.
SOURCE, PREFIX = "/usr/local/src/slurm-25-11-7-1", "/opt/slurm-25.11"


def doc_build_block() -> list[str]:
    """The lines of the ``bash`` block that follows the doc's ``ci/build-slurm.sh`` call."""
    text = ADOPTING.read_text()
    call = re.search(rf"ci/build-slurm\.sh\s+{re.escape(SOURCE)}\s+{re.escape(PREFIX)}", text)
    assert call, f"docs/adopting.md does not name `ci/build-slurm.sh {SOURCE} {PREFIX}`"
    block = text[call.end():].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_script_parses() -> None:
    checked = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_doc_shows_what_the_script_runs() -> None:
    """Packages (munge, json-c, MariaDB, D-Bus among them), the configure line with
    --with-mysql_config, make and make install: the doc's block is the script's --print."""
    printed = subprocess.run([str(SCRIPT), "--print", SOURCE, PREFIX], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    assert doc_build_block() == printed
    packages = printed[0].split()
    for needed in ("libmunge-dev", "libjson-c-dev", "libmariadb-dev", "libdbus-1-dev"):
        assert needed in packages
    assert "--with-mysql_config=/usr/bin" in printed[2].split()
    assert "--enable-multiple-slurmd" in printed[2].split()


def test_a_directory_without_configure_is_refused(tmp_path: Path) -> None:
    refused = subprocess.run([str(SCRIPT), str(tmp_path), str(tmp_path / "prefix")],
                             capture_output=True, text=True)
    assert refused.returncode == 2
    assert f"{tmp_path} has no configure script" in refused.stderr
    assert not (tmp_path / "prefix").exists()
