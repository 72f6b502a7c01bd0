"""Spack stacks: syntax checked without Spack, concretized and audited by a real Spack
(>= 1.0) where one is on PATH, installed from a local source mirror and run from the
stack's view on the embedded cluster where one is given."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from perfguard.run.reframe import RunRequest, run_reframe
from perfguard.site import spack, stacks
from perfguard.site.spack import SPACK_ENVS, environments, recipes
from perfguard.store.report import load
from tests.conftest import TEST_CONTEXT, TEST_STATE, dry_run_scripts, job_file, perfguard

STACKS = ("gcc-mvapich2", "gcc-openmpi-ucx", "gcc-openmpi-ucx-cuda", "gcc-openmpi4-verbs-cuda",
          "gcc-system-openmpi")
HAVE_SPACK = shutil.which("spack") is not None
NEEDS_SPACK = pytest.mark.skipif(not HAVE_SPACK, reason="needs `spack` (>= 1.0) on PATH: "
                                 "source your Spack's share/spack/setup-env.sh")
#: A Spack source mirror holding osu-micro-benchmarks 7.4 (what gcc-system-openmpi builds).
SPACK_MIRROR = os.environ.get("PERFGUARD_SPACK_MIRROR")


def without_spack() -> dict[str, str]:
    """PATH with no `spack` on it: what a host without Spack sees."""
    spack = shutil.which("spack")
    keep = [d for d in os.environ["PATH"].split(os.pathsep)
            if not spack or Path(d) != Path(spack).parent]
    return {"PATH": os.pathsep.join(keep)}


def test_without_spack_only_syntax_is_checked_and_said() -> None:
    result = perfguard("spack", "check", env=without_spack())
    assert result.returncode == 0, result.stdout
    for env in STACKS:
        assert f"ok   {SPACK_ENVS / env}\n" in result.stdout
    assert "version 2002.02.21 has no sha256" in result.stdout  # said, not hidden
    assert result.stdout.count("style of Spack's builtin repository: passed") == 2
    assert "perftest/package.py: no maintainers(): the builtin repository asks" in result.stdout
    assert ("note: spack is not on PATH (source your Spack's share/spack/setup-env.sh; "
            "perfguard does not install Spack): only syntax and structure were checked"
            in result.stdout)
    assert re.search(r"; \d+ specs were not parsed", result.stdout), result.stdout
    assert "concretized" not in result.stdout


@NEEDS_SPACK
def test_every_stack_concretizes_and_our_recipes_pass_spacks_audit() -> None:
    """Spack itself judges names, versions, variants and dependencies; the checkout is
    left as it was (Spack works on a scratch copy)."""
    before = {p: p.read_bytes() for p in SPACK_ENVS.rglob("*.y*ml")}
    result = perfguard("spack", "check")
    assert result.returncode == 0, result.stdout
    for env in STACKS:
        block = result.stdout.split(f"ok   {SPACK_ENVS / env}\n")[1].split("\nok")[0]
        assert "concretized in" in block and "osu-micro-benchmarks@" in block, block
    assert "osu-micro-benchmarks@7.5.1, perftest@25.10.0-0.128, ucx@1.17.0" in result.stdout
    assert result.stdout.count("spack audit packages: passed") == len(recipes())
    assert {p: p.read_bytes() for p in SPACK_ENVS.rglob("*.y*ml")} == before


@NEEDS_SPACK
def test_spack_names_what_it_cannot_build(envs_copy: Path) -> None:
    """A package Spack does not have, in a stack and as a recipe's dependency (the
    Himeno recipe once needed `lhasa`), fails with Spack's words and the file."""
    for env in environments(envs_copy):
        if env.name != "gcc-openmpi-ucx":
            shutil.rmtree(env)
    _edit(envs_copy / "gcc-openmpi-ucx/spack.yaml", "perftest@", "perftestx@")
    _edit(envs_copy / "spack_repo/perfguard/packages/himeno/package.py",
          'depends_on("libarchive"', 'depends_on("lhasa"')
    result = perfguard("spack", "check", "--envs", str(envs_copy))
    assert result.returncode == 1
    assert f"FAIL {envs_copy / 'gcc-openmpi-ucx'}" in result.stdout
    assert "spack concretize failed" in result.stdout and "perftestx" in result.stdout
    himeno = envs_copy / "spack_repo/perfguard/packages/himeno/package.py"
    assert f"FAIL {himeno}" in result.stdout
    assert "himeno: unknown package 'lhasa' in 'depends_on' directive" in result.stdout
    assert str(himeno) in result.stdout.split("lhasa")[1]  # the checkout's file, not a copy


@NEEDS_SPACK
def test_spack_reads_the_specs_itself(envs_copy: Path) -> None:
    """Spack 1.x syntax a hand-written parser once refused passes; what Spack cannot parse
    fails with Spack's words and the file it came from."""
    for env in environments(envs_copy):
        if env.name != "gcc-openmpi-ucx":
            shutil.rmtree(env)
    manifest = envs_copy / "gcc-openmpi-ucx/spack.yaml"
    _edit(manifest, "specs:", "specs:\n  - 'ucx %c,cxx=gcc@12'\n"
                               "  - 'osu-micro-benchmarks ^[virtuals=mpi] openmpi'\n"
                               "  - 'ucx cuda_arch==90'\n  - 'ucx@1.17.0 !verbs'")
    result = perfguard("spack", "check", "--envs", str(envs_copy))
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if "specs[" in line]
    assert len(errors) == 1 and "!verbs" not in errors[0].split("specs[")[0], errors
    assert str(manifest) in errors[0] and "specs[3]" in errors[0], errors


@pytest.fixture()
def envs_copy(tmp_path: Path) -> Path:
    target = tmp_path / "spack_envs"
    shutil.copytree(SPACK_ENVS, target, ignore=shutil.ignore_patterns(".spack-env", "*.lock"))
    return target


@pytest.mark.parametrize("breakage, message", [
    (lambda d: (d / "gcc-openmpi-ucx/spack.yaml").write_text("spack:\n  specs: [ucx\n"),
     "invalid YAML"),
    (lambda d: _edit(d / "gcc-openmpi-ucx/spack.yaml",
                     "- ucx@1.17.0 +verbs +rc +ud +dc +mlx5_dv +rdmacm +cma", "- ''"),
     "spec must be a non-empty string"),
    (lambda d: _edit(d / "gcc-mvapich2/spack.yaml", "../site/packages.yaml",
                     "../site/missing.yaml"), "include '../site/missing.yaml' does not exist"),
    (lambda d: _edit(d / "gcc-mvapich2/spack.yaml", "../spack_repo/perfguard",
                     "../repo"), "repo '../repo' has no repo.yaml"),
    (lambda d: _edit(d / "site/packages.yaml", "prefix: /usr/local/cuda-12.4",
                     "prefix: usr/local/cuda"), "is not absolute"),
    (lambda d: _edit(d / "spack_repo/perfguard/packages/perftest/package.py",
                     "class Perftest(", "class PerfTest("), "expected one package class"),
    (lambda d: _edit(d / "spack_repo/perfguard/packages/himeno/package.py",
                     "import os\nimport re\n", "import re\nimport os\n"),
     "not in the builtin repository's style (lint, "),
    (lambda d: _edit(d / "spack_repo/perfguard/packages/himeno/package.py",
                     "\n\nclass Himeno(", "\nclass Himeno("),
     "not in the builtin repository's style (format, "),
])
def test_broken_copies_fail_with_file_and_reason(envs_copy: Path, breakage, message) -> None:
    breakage(envs_copy)
    result = perfguard("spack", "check", "--envs", str(envs_copy), env=without_spack())
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
    env_dir = TEST_STATE / "spack" / "envs" / "gcc-openmpi4-verbs-cuda"
    assert build[1:] == [f"spack -e {env_dir} install --fail-fast",
                         f"sha256sum {env_dir}/spack.lock"]
    [run] = [lines for name, lines in scripts.items() if name.startswith("OsuPt2Pt")]
    view = f"{TEST_STATE}/spack/views/gcc-openmpi4-verbs-cuda"
    assert f"export PATH={view}/bin:$PATH" in run
    assert run[-1].endswith(f"{view}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency "
                            "-m 1:4194304")


@NEEDS_SPACK
@pytest.mark.skipif(not SPACK_MIRROR, reason="needs PERFGUARD_SPACK_MIRROR: a Spack source "
                    "mirror holding osu-micro-benchmarks 7.4 (no internet here)")
def test_stack_built_by_spack_runs_from_its_view(layout, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The SpackStack fixture installs gcc-system-openmpi (OMB against Debian's Open MPI)
    with real Spack; the check finds osu_latency through the stack's view and runs it
    between two virtual nodes; the result names the stack's lock."""
    scope = tmp_path / "scope"
    scope.mkdir()
    (scope / "mirrors.yaml").write_text(f"mirrors:\n  perfguard-test: file://{SPACK_MIRROR}\n")
    # A mirror made by hand from a git copy of the release has other bytes than OSU's
    # tarball, whose sha256 the builtin recipe pins.
    (scope / "config.yaml").write_text("config:\n  checksum: false\n")
    monkeypatch.setenv("PERFGUARD_SPACK_ENV", "gcc-system-openmpi")
    monkeypatch.setenv("PERFGUARD_SPACK_CONFIG", str(scope))
    outcome = run_reframe(TEST_CONTEXT, RunRequest(names=(
        "OsuPt2PtCheck%hca=lo%benchmark=osu_latency%transfer=H-H%placement=inter",)))
    [case] = [c for c in load(outcome.report).testcases if c.check == "OsuPt2PtCheck"]
    assert case.result == "pass", case.fail_reason
    view = TEST_STATE / "spack" / "views" / "gcc-system-openmpi"
    script = job_file(outcome.report, "OsuPt2PtCheck", "rfm_job.sh")
    assert f"{view}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency" in script
    assert "# OSU MPI Latency Test v7.4" in job_file(outcome.report, "OsuPt2PtCheck",
                                                         "rfm_job.out")
    lock = TEST_STATE / "spack" / "envs" / "gcc-system-openmpi" / "spack.lock"
    assert hashlib.sha256(lock.read_bytes()).hexdigest() in outcome.report.read_text()



# --- the environment Spack works on: rendered under the install root -----------------
def test_a_stack_is_rendered_under_its_root_and_the_checkout_stays_as_it_is(
        tmp_path: Path) -> None:
    """No variable is left for a plain `spack -e` to turn into a literal directory; the
    manifest's relative include and repository resolve beside it; Spack's lock and
    .spack-env survive a new rendering; a recipe gone from the checkout is gone there."""
    before = {p: p.read_bytes() for p in SPACK_ENVS.rglob("*") if p.is_file()}
    root = tmp_path / "root"
    env = stacks.render("gcc-system-openmpi", root)
    assert env == root / "envs" / "gcc-system-openmpi"
    manifest = (env / "spack.yaml").read_text()
    assert "${" not in manifest and f"root: {root}/views/gcc-system-openmpi" in manifest \
        and f"root: {root}/opt" in manifest
    data = yaml.safe_load(manifest)["spack"]
    assert (env / data["include"][0]).read_bytes() == \
        (SPACK_ENVS / "site" / "packages.yaml").read_bytes()
    assert (env / data["repos"][0] / "packages" / "himeno" / "package.py").is_file()
    (env / "spack.lock").write_text("{}")
    (env / ".spack-env").mkdir()
    stale = root / "envs" / "spack_repo" / "perfguard" / "packages" / "gone" / "package.py"
    stale.parent.mkdir()
    stale.write_text("")
    assert stacks.render("gcc-system-openmpi", root) == env
    assert (env / "spack.lock").read_text() == "{}" and (env / ".spack-env").is_dir()
    assert not stale.exists() and not stale.parent.exists()
    assert before == {p: p.read_bytes() for p in SPACK_ENVS.rglob("*") if p.is_file()}


def test_the_site_directorys_externals_replace_the_shipped_example(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "spack_packages.yaml").write_text("packages:\n  slurm:\n    externals:\n"
                                              "    - {spec: slurm@23.11.4, prefix: /opt/slurm}\n")
    result = perfguard("spack", "env", "gcc-openmpi-ucx", "--root", str(tmp_path / "r"),
                       env={"PERFGUARD_SITE": str(site)})
    assert result.returncode == 0, result.stderr
    env = Path(result.stdout.strip())
    assert env == tmp_path / "r" / "envs" / "gcc-openmpi-ucx"
    assert "slurm@23.11.4" in (env.parent / "site" / "packages.yaml").read_text()
    result = perfguard("spack", "env", "gcc-openmpi-ucx5", "--root", str(tmp_path / "r"))
    assert result.returncode != 0
    assert "no Spack stack 'gcc-openmpi-ucx5'" in result.stderr and \
        "known: gcc-mvapich2, gcc-openmpi-ucx," in result.stderr


def test_check_names_what_a_stack_builds_though_the_site_declared_it(tmp_path: Path) -> None:
    """`spack concretize`'s tree in the form Spack prints it (status, hash, spec): Spack
    builds its own gdrcopy and reuses its own hwloc though the site declared both (as it
    did when the site's lacked +cuda); PMIx and rdma-core are the site's."""
    env = stacks.render("gcc-openmpi-ucx-cuda", tmp_path)
    declared = spack.declared_externals(env)
    assert declared["gdrcopy"].startswith("gdrcopy@2.4.1") and "rdma-core" in declared
    tree = """==> Concretized 5 specs:
 -   abcdefg  openmpi@5.0.5+cuda~internal-pmix build_system=autotools fabrics=ucx
 -   bcdefgh      ^gdrcopy@2.5.1+cuda build_system=makefile
[e]  cdefghi      ^pmix@4.2.9~docs build_system=autotools
[+]  defghij      ^hwloc@2.12.2+cuda~gl build_system=autotools
[e]  efghijk      ^rdma-core@50.0~ipo build_system=cmake
 -   fghijkl      ^prrte@3.0.6 build_system=autotools
"""
    warnings = spack.not_the_sites(tree, declared)
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("the stack builds gdrcopy@2.5.1, not the site's external "
                                  "gdrcopy@2.4.1")
    assert warnings[1].startswith("the stack reuses a Spack install of hwloc@2.12.2, not the "
                                  "site's external hwloc@2.9.0")


def test_mirror_puts_archives_where_spack_looks(tmp_path: Path) -> None:
    """An offline site's source mirror: a checksummed archive by its sha256 (the layout
    Spack 1.1 installed OMB 7.4 from: _source-cache/archive/1e/<sha256>.tar.gz), one
    without a checksum (Himeno) by name and version; bad input names what is wrong."""
    omb = tmp_path / "osu-micro-benchmarks-7.4.tar.gz"
    omb.write_bytes(b"not really OMB, but bytes with a digest")
    himeno = tmp_path / "cc_himenobmtxp_mpi.zip"
    himeno.write_bytes(b"PK")
    omb.with_name("README.txt").write_text("read me")
    mirror = tmp_path / "mirror"
    result = perfguard("spack", "mirror", str(mirror), str(omb),
                       "--named", f"himeno@2002.02.21={himeno}")
    assert result.returncode == 0, result.stderr
    sha = hashlib.sha256(omb.read_bytes()).hexdigest()
    by_sum = mirror / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz"
    assert by_sum.read_bytes() == omb.read_bytes()
    assert (mirror / "himeno" / "himeno-2002.02.21.zip").read_bytes() == b"PK"
    assert f"spack mirror add perfguard file://{mirror}" in result.stdout
    assert sorted(p.name for p in mirror.rglob("*") if p.is_file()) == sorted(
        [by_sum.name, "himeno-2002.02.21.zip"])  # no partial copies left
    for argv, message in (([str(tmp_path / "absent.tar.gz")], "no such archive"),
                          (["--named", f"himeno={himeno}"], "give NAME@VERSION"),
                          (["--named", "himeno@1"], "give NAME@VERSION=FILE"),
                          ([str(omb.with_name("README.txt"))], "not an archive")):
        bad = perfguard("spack", "mirror", str(mirror), *argv)
        assert bad.returncode != 0 and message in bad.stderr, (argv, bad.stderr)
