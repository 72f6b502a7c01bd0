"""Spack stacks: the shipped ones pass `perfguard spack check`, broken copies fail clearly,
and the spack provider's build and run scripts carry the environment, tree and view."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perfguard.errors import PerfguardError
from perfguard.spack import SPACK_ENVS, parse_spec
from tests.conftest import TEST_STATE, dry_run_scripts, perfguard


def test_shipped_stacks_pass() -> None:
    result = perfguard("spack", "check")
    assert result.returncode == 0, result.stdout
    for env in ("gcc-openmpi-ucx", "gcc-openmpi-ucx-cuda", "gcc-openmpi4-verbs-cuda",
                "gcc-mvapich2"):
        assert f"ok   {SPACK_ENVS / env}" in result.stdout
    assert "version 2002.02.21 has no sha256" in result.stdout  # said, not hidden
    if shutil.which("spack") is None:
        assert "spack is not on PATH" in result.stdout


def test_spec_parser() -> None:
    spec = parse_spec("ucx@1.17.0 +cuda ~assertions cuda_arch=90 %gcc@12 ^cuda@12.4")
    assert (spec.name, spec.version) == ("ucx", "1.17.0")
    assert spec.variants == {"cuda": True, "assertions": False, "cuda_arch": "90",
                             "%compiler": "gcc@12"}
    assert [d.name for d in spec.dependencies] == ["cuda"]
    for bad in ("+cuda ucx", "ucx openmpi", "ucx ^", "ucx@1 @2", "ucx !x"):
        with pytest.raises(PerfguardError):
            parse_spec(bad)


@pytest.fixture()
def envs_copy(tmp_path: Path) -> Path:
    target = tmp_path / "spack_envs"
    shutil.copytree(SPACK_ENVS, target)
    return target


@pytest.mark.parametrize("breakage, message", [
    (lambda d: (d / "gcc-openmpi-ucx/spack.yaml").write_text("spack:\n  specs: [ucx\n"),
     "invalid YAML"),
    (lambda d: _edit(d / "gcc-openmpi-ucx/spack.yaml", "perftest@", "perftestx@"),
     "unknown package 'perftestx'"),
    (lambda d: _edit(d / "gcc-openmpi-ucx/spack.yaml", "ucx@1.17.0 +verbs", "ucx@1.17.0 !verbs"),
     "cannot parse from"),
    (lambda d: _edit(d / "gcc-mvapich2/spack.yaml", "../site/packages.yaml",
                     "../site/missing.yaml"), "include '../site/missing.yaml' does not exist"),
    (lambda d: _edit(d / "site/packages.yaml", "prefix: /usr/local/cuda-12.4",
                     "prefix: usr/local/cuda"), "is not absolute"),
    (lambda d: _edit(d / "repo/packages/perftest/package.py", 'depends_on("pciutils")',
                     'depends_on("pcituils")'), "depends_on unknown package 'pcituils'"),
])
def test_broken_copies_fail_with_file_and_reason(envs_copy: Path, breakage, message) -> None:
    breakage(envs_copy)
    result = perfguard("spack", "check", "--envs", str(envs_copy))
    assert result.returncode == 1
    assert message in result.stdout and str(envs_copy) in result.stdout


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def test_spack_provider_build_and_run_scripts() -> None:
    scripts = dry_run_scripts(
        "seedfdr", "OsuPt2PtCheck%hca=mlx4_1%benchmark=osu_latency%transfer=H-H"
                   "%placement=inter", fixtures=True)
    [build] = [lines for name, lines in scripts.items() if name.startswith("SpackStack")]
    env_dir = SPACK_ENVS / "gcc-openmpi4-verbs-cuda"
    assert build[1:] == [f"export PERFGUARD_SPACK_ROOT={TEST_STATE}/spack",
                         f"spack -e {env_dir} install --fail-fast",
                         f"sha256sum {env_dir}/spack.lock"]
    [run] = [lines for name, lines in scripts.items() if name.startswith("OsuPt2Pt")]
    view = f"{TEST_STATE}/spack/views/gcc-openmpi4-verbs-cuda"
    assert f"export PATH={view}/bin:$PATH" in run
    assert run[-1].endswith(f"{view}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency "
                            "-m 1:4194304")
