"""Spack stacks: syntax checked without Spack, concretized and audited by a real Spack
(>= 1.0) where one is on PATH, installed from a local source mirror and run from the
stack's view on the embedded cluster where one is given."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from perfguard.contract import stacks
from perfguard.contract.offers import OFFERS
from perfguard.site import spack
from perfguard.site.spack import SPACK_ENVS, environments, recipes
from tests.conftest import TEST_STATE, dry_run_scripts, job_file, perfguard, perfguard_command

STACKS = ("gcc-mvapich2", "gcc-openmpi-ucx", "gcc-openmpi-ucx-cuda", "gcc-openmpi4-verbs-cuda",
          "gcc-system-openmpi")
HAVE_SPACK = shutil.which("spack") is not None
NEEDS_SPACK = pytest.mark.skipif(not HAVE_SPACK, reason="needs `spack` (>= 1.0) on PATH: "
                                 "source your Spack's share/spack/setup-env.sh")
CHECKOUT = Path(__file__).resolve().parents[2]


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
    assert "version 3.1.0 has no sha256" not in result.stdout  # sharp: only ever external
    assert result.stdout.count("style of Spack's builtin repository: passed") == len(recipes())
    assert "perftest/package.py: no maintainers(): the builtin repository asks" in result.stdout
    assert ("note: spack is not on PATH (source your Spack's share/spack/setup-env.sh; "
            "perfguard does not install Spack): only syntax and structure were checked"
            in result.stdout)
    assert re.search(r"; \d+ specs were not parsed", result.stdout), result.stdout
    assert "concretized" not in result.stdout


@NEEDS_SPACK
def test_spack_names_what_it_cannot_build(envs_copy: Path) -> None:
    """A package Spack does not have, in a stack and as a recipe's dependency (the
    Himeno recipe once needed `lhasa`), fails with Spack's words and the file."""
    for env in environments(envs_copy):
        if env.name != "gcc-openmpi-ucx":
            shutil.rmtree(env)
    _edit(envs_copy / "gcc-openmpi-ucx/spack.yaml", "perftest@", "perftestx@")
    _edit(envs_copy / "spack_repo/perfguard/packages/himeno/package.py",
          'depends_on("libarchive programs=bsdtar"', 'depends_on("lhasa"')
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
    (lambda d: _edit(d / "spack_repo/perfguard/packages/osu_micro_benchmarks/package.py",
                     "(BuiltinOsuMicroBenchmarks)", "(AutotoolsPackage)"),
     "no version() (and no builtin recipe extended"),
    (lambda d: (_edit(d / "spack_repo/perfguard/packages/sharp/package.py",
                      "    has_code = False\n", ""),
                _edit(d / "spack_repo/perfguard/packages/sharp/package.py",
                      '    version("3.1.0")', "    # ")), "sharp/package.py: no version() "),
    (lambda d: _edit(d / "spack_repo/perfguard/packages/himeno/package.py",
                     "import os\nimport re\n", "import re\nimport os\n"),
     "not in the builtin repository's style (lint, "),
    (lambda d: _edit(d / "spack_repo/perfguard/packages/himeno/package.py",
                     "\n\nclass Himeno(", "\nclass Himeno("),
     "not in the builtin repository's style (format, "),
    (lambda d: _edit(d / "gcc-openmpi-ucx-cuda/offers.yaml", "- ucc-sharp", "- sharp"),
     "offers.yaml: unknown offer 'sharp' (known: mpi-ucc, ucc-sharp, nccl-collnet, cuda-mpi)"),
    (lambda d: (d / "gcc-openmpi-ucx/offers.yaml").write_text("offers: mpi-ucc\n"),
     "offers.yaml: needs 'offers:', a list of names ([] for none)"),
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


def test_spack_provider_build_and_run_scripts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack's install job: Spack's user cache under the install root (not ~/.spack of
    whoever runs the job), then `spack install`."""
    monkeypatch.delenv("PERFGUARD_SPACK_CONFIG", raising=False)  # no scope: plain `spack`
    monkeypatch.delenv("SPACK_USER_CACHE_PATH", raising=False)
    scripts = dry_run_scripts(
        "seedfdr", "OsuPt2PtCheck%hca=mlx4_1%benchmark=osu_latency%transfer=H-H"
                   "%placement=inter", fixtures=True)
    [build] = [lines for name, lines in scripts.items() if name.startswith("SpackStack")]
    env_dir = TEST_STATE / "spack" / "envs" / "gcc-openmpi4-verbs-cuda"
    assert build[1:] == [f"export SPACK_USER_CACHE_PATH={TEST_STATE}/spack/user-cache",
                         f"spack -e {env_dir} install --fail-fast",
                         f"sha256sum {env_dir}/spack.lock"]
    [run] = [lines for name, lines in scripts.items() if name.startswith("OsuPt2Pt")]
    view = f"{TEST_STATE}/spack/views/gcc-openmpi4-verbs-cuda"
    assert f"export PATH={view}/bin:$PATH" in run
    assert run[-2].endswith(f"{view}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency "
                            "-m 1:4194304")


#: What the offline walkthrough needs besides Spack: a spack-packages checkout and the
#: archives, as downloaded. PERFGUARD_SPACK_STANDIN=1 says they are stand-ins (a tarball
#: packed from a git copy of the release, a Himeno ZIP made from RIKEN's source): the
#: walkthrough then runs the doc's block for an archive that is not the release (its last
#: resort, --no-checksum on the scope and the mirror) in place of its own two lines.
SPACK_BUILTIN = os.environ.get("PERFGUARD_SPACK_BUILTIN")
SPACK_ARCHIVES = os.environ.get("PERFGUARD_SPACK_ARCHIVES")
OFFLINE = CHECKOUT / "docs" / "spack.md"


def offline_walkthrough(doc: Path, names: dict[str, str], standin: bool) -> str:
    """The ``sh`` blocks of the doc's "Offline, step by step", in order, as one script,
    with the doc's site paths replaced by this machine's."""
    section = doc.read_text().split("## Offline, step by step", 1)[1].split("\n## ", 1)[0]
    script = "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))
    if standin:
        [non_release] = doc_blocks("An archive that is not the release", doc)
        script = re.sub(r"perfguard spack scope .*?(?=perfguard spack check)",
                        lambda _: non_release, script, count=1, flags=re.S)
    for doc_name, ours in names.items():
        script = script.replace(doc_name, ours)
    return script


@NEEDS_SPACK
@pytest.mark.skipif(not (SPACK_BUILTIN and SPACK_ARCHIVES), reason="needs "
                    "PERFGUARD_SPACK_BUILTIN (a spack/spack-packages checkout) and "
                    "PERFGUARD_SPACK_ARCHIVES (the OMB 7.4 and Himeno archives): no internet "
                    "here to fetch them")
def test_the_offline_walkthrough(layout, tmp_path: Path) -> None:
    """docs/spack.md's offline walkthrough, verbatim but for the paths: the scope, a mirror
    `perfguard spack mirror` filed, every stack concretized (the CUDA ones against CUDA 13
    too) and our recipes audited, the archives a stack needs all in the mirror, OMB and
    Himeno installed, a check run from the view on the embedded cluster and stored with
    the stack's lock hash; the checkout is left as it was."""
    before = {p: p.read_bytes() for p in SPACK_ENVS.rglob("*") if p.is_file()}
    spack_root = Path(shutil.which("spack")).resolve().parents[1]
    script = offline_walkthrough(OFFLINE, {
        "/shared/spack-python/bin/python": os.environ.get("SPACK_PYTHON", "python3"),
        "/shared/spack/share/spack/setup-env.sh": f"{spack_root}/share/spack/setup-env.sh",
        "/shared/perfguard-spack-scope": str(tmp_path / "scope"),
        "/shared/perfguard-mirror": str(tmp_path / "mirror"),
        "/shared/spack-packages": SPACK_BUILTIN}, os.environ.get("PERFGUARD_SPACK_STANDIN") == "1")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=SPACK_ARCHIVES, capture_output=True,
        text=True, timeout=1800, env={
            **os.environ, "PERFGUARD_STATE_DIR": str(TEST_STATE),
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    assert "1edd0c2efa61999409bfb28740a7f39689a5b42b1a1b4c66d1656e5637f7cefc.tar.gz" in said
    assert "himeno/himeno-2002.02.21.zip" in said
    for stack in STACKS:
        block = said.split(f"ok   {SPACK_ENVS / stack}\n")[1].split("\nok")[0]
        assert "Spack 1." in block and "concretized in" in block, block
        assert "osu-micro-benchmarks@" in block and "himeno@2002.02.21" in block, block
        if stack == "gcc-openmpi-ucx-cuda":  # OMB 7.4, patched by our recipe for CUDA 13
            assert re.search(r"with the site's CUDA external at 13\.0\.2: concretizes \(.*"
                             r"osu-micro-benchmarks@7\.4 \(patched: \w+\)", block), block
        elif "cuda" in stack:
            assert "with the site's CUDA external at 13.0.2: refused. The stack says:" in block
    assert "OMB 7.5.1 and older, but 7.4 which perfguard's recipe patches, do not" in said
    assert said.count("spack audit packages: passed") == len(recipes())
    assert "3 of 3 archives in" in said
    view = TEST_STATE / "spack" / "views" / "gcc-system-openmpi"
    assert (view / "bin" / "himeno").is_file()
    assert (view / "share" / "himeno" / "paramset.sh").is_file()
    assert "# OSU MPI Latency Test v7.4" in said or re.search(r"latency\s+[\d.]+\s+us", said)
    lock = TEST_STATE / "spack" / "envs" / "gcc-system-openmpi" / "spack.lock"
    [report] = re.findall(r"\(report (\S+\.json)\)", said)
    assert hashlib.sha256(lock.read_bytes()).hexdigest() in Path(report).read_text()
    script_lines = job_file(Path(report), "OsuPt2PtCheck", "rfm_job.sh")
    assert f"{view}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency" in script_lines
    assert "# OSU MPI Latency Test v7.4" in job_file(Path(report), "OsuPt2PtCheck",
                                                         "rfm_job.out")
    assert {p: p.read_bytes() for p in SPACK_ENVS.rglob("*") if p.is_file()} == before
    print(said)  # the figures (`pytest -rP`): concretization times, installs


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


#: Real `spack concretize -f` outputs of the shipped stacks (Spack 1.1.0 offline, with
#: the example externals: tests/data/spack11/README.md says how they were made).
SPACK11 = CHECKOUT / "tests" / "data" / "spack11"


@pytest.mark.parametrize("stack, recorded", [
    ("gcc-openmpi-ucx-cuda", "concretize_gcc-openmpi-ucx-cuda_cuda12.txt"),
    ("gcc-openmpi-ucx-cuda", "concretize_gcc-openmpi-ucx-cuda_cuda13.txt"),
    ("gcc-openmpi4-verbs-cuda", "concretize_gcc-openmpi4-verbs-cuda_cuda12.txt"),
])
def test_a_stack_offers_what_spack_concretized_for_it(stack: str, recorded: str) -> None:
    """Each CUDA stack's offers.yaml against Spack 1.1's real concretization of it: the
    SHARP stack's Open MPI has coll/ucc (fabrics ucc,ucx), its UCC the SHARP TL (our
    recipe, against the site's external SHARP), the NCCL plugin CollNet."""
    tree = (SPACK11 / recorded).read_text()
    claimed = spack.stack_offers(SPACK_ENVS / stack, spack.Findings())
    assert claimed is not None and spack.offers_in_tree(tree) == claimed
    found = spack.offers_not_built(tree, claimed, SPACK_ENVS / stack / "offers.yaml")
    assert found.errors == [] and found.warnings == []
    if stack == "gcc-openmpi-ucx-cuda":
        assert claimed == {"mpi-ucc", "ucc-sharp", "nccl-collnet", "cuda-mpi"}
        assert re.search(r"^ -   \w{7}  openmpi@5\.0\.5\S*\+cuda.* fabrics:=ucc,ucx ", tree, re.M)
        assert re.search(r"^\[e\]  \w{7}      \^sharp@", tree, re.M)  # the site's, never built


def test_check_knows_how_spack_shows_each_offer_the_checks_read() -> None:
    assert list(spack.STACK_OFFERS) == list(OFFERS)


def test_an_offer_the_concretization_lacks_is_an_error(tmp_path: Path) -> None:
    """Open MPI 4.1.6 fabrics=verbs has no coll/ucc: a stack that listed mpi-ucc would
    send the SHARP checks to a build that can only fail them. What it builds but does not
    list is a warning (the checks that need it are skipped)."""
    tree = (SPACK11 / "concretize_gcc-openmpi4-verbs-cuda_cuda12.txt").read_text()
    listed = tmp_path / "offers.yaml"
    found = spack.offers_not_built(tree, frozenset({"mpi-ucc", "cuda-mpi"}), listed)
    assert found.errors == [f"{listed} lists mpi-ucc, but Spack's concretization of the stack "
                            f"has no openmpi with ucc in its fabrics (coll/ucc: configured "
                            f"--with-ucc)"]
    found = spack.offers_not_built(tree, frozenset(), listed)
    assert found.errors == [] and len(found.warnings) == 1
    assert found.warnings[0].startswith("the stack builds an MPI +cuda, but ")
    fake = " -   abcdefg  ucc@1.5.1+cuda~nccl~rocm~sharp build_system=autotools\n" \
           "[e]  bcdefgh  openmpi@4.1.4~cuda build_system=autotools fabrics:=ucx\n"
    assert spack.offers_in_tree(fake) == set()


def test_mirror_puts_archives_where_spack_looks(tmp_path: Path) -> None:
    """Without Spack: an archive by its own sha256 (the layout Spack 1.1 installed OMB 7.4
    from: _source-cache/archive/1e/<sha256>.tar.gz), one named NAME@VERSION by name and
    version, each said to be unverified; bad input names what is wrong."""
    omb = tmp_path / "osu-micro-benchmarks-7.4.tar.gz"
    omb.write_bytes(b"not really OMB, but bytes with a digest")
    himeno = tmp_path / "cc_himenobmtxp_mpi.zip"
    himeno.write_bytes(b"PK")
    omb.with_name("README.txt").write_text("read me")
    mirror = tmp_path / "mirror"
    result = perfguard("spack", "mirror", str(mirror), str(omb),
                       f"himeno@2002.02.21={himeno}", env=without_spack())
    assert result.returncode == 0, result.stderr
    sha = hashlib.sha256(omb.read_bytes()).hexdigest()
    by_sum = mirror / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz"
    assert by_sum.read_bytes() == omb.read_bytes()
    assert (mirror / "himeno" / "himeno-2002.02.21.zip").read_bytes() == b"PK"
    assert result.stdout.count("warning: not compared with the recipe's checksum: spack is "
                               "not on PATH") == 2
    assert f"--mirror {mirror}` writes the scope that names it" in result.stdout
    assert sorted(p.name for p in mirror.rglob("*") if p.is_file()) == sorted(
        [by_sum.name, "himeno-2002.02.21.zip"])  # no partial copies left
    for argv, message in (([str(tmp_path / "absent.tar.gz")], "no such archive"),
                          ([f"himeno={himeno}"], "give FILE or NAME@VERSION=FILE"),
                          (["@1=" + str(himeno)], "give FILE or NAME@VERSION=FILE"),
                          ([str(omb.with_name("README.txt"))], "not an archive")):
        bad = perfguard("spack", "mirror", str(mirror), *argv, env=without_spack())
        assert bad.returncode != 0 and message in bad.stderr, (argv, bad.stderr)


def fake_builtin(tmp_path: Path) -> Path:
    """The layout of a spack/spack-packages checkout (what `--builtin` checks for)."""
    repo = tmp_path / "spack-packages" / "repos" / "spack_repo" / "builtin"
    repo.mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: builtin\n  api: v2.2\n")
    return tmp_path / "spack-packages"


def test_scope_writes_an_offline_scope_that_keeps_the_stacks_own_repository(
        tmp_path: Path) -> None:
    """One colon in repos.yaml (`repos::` given with -C replaced each stack's own
    repository: "himeno does not exist", measured with Spack 1.1), bootstrapping off, the
    mirror; checksums off only when asked; a directory that is no builtin repository is
    refused."""
    scope, mirror, builtin = tmp_path / "scope", tmp_path / "mirror", fake_builtin(tmp_path)
    result = perfguard("spack", "scope", str(scope), "--builtin", str(builtin),
                       "--mirror", str(mirror))
    assert result.returncode == 0, result.stderr
    repos = yaml.safe_load((scope / "repos.yaml").read_text())["repos"]
    assert list(repos.items()) == [  # each stack's own first: our recipe of OMB wins
        ("perfguard", "$env/../spack_repo/perfguard"),
        ("builtin", str(tmp_path / "spack-packages/repos/spack_repo/builtin"))]
    assert "repos::" not in (scope / "repos.yaml").read_text().replace("`repos::`", "")
    assert yaml.safe_load((scope / "bootstrap.yaml").read_text()) == {
        "bootstrap": {"enable": False}}
    assert yaml.safe_load((scope / "mirrors.yaml").read_text()) == {
        "mirrors": {"perfguard": f"file://{mirror}"}}
    assert not (scope / "config.yaml").exists()
    assert perfguard("spack", "scope", str(scope), "--builtin", str(builtin),
                     "--no-checksum").returncode == 0
    assert yaml.safe_load((scope / "config.yaml").read_text()) == {
        "config": {"checksum": False}}
    assert not (scope / "mirrors.yaml").exists()  # the scope is what the last call said
    assert perfguard("spack", "scope", str(scope), "--builtin", str(builtin)).returncode == 0
    assert not (scope / "config.yaml").exists()
    bad = perfguard("spack", "scope", str(scope), "--builtin", str(tmp_path))
    assert bad.returncode == 2 and "not Spack's builtin package repository" in bad.stderr
    missing = perfguard("spack", "check", "-C", str(tmp_path / "nowhere"), env=without_spack())
    assert missing.returncode == 2 and "no such directory (make one with `perfguard spack " \
        "scope DIR --builtin PACKAGES`" in missing.stderr


# --- `perfguard spack check` on a login node: said as it goes, one stack, interruptible --
def test_check_says_each_stack_as_it_goes_and_sigterm_removes_its_scratch(
        envs_copy: Path, tmp_path: Path) -> None:
    """The syntax check (what runs without Spack, as in CI): a line when each stack starts
    and its result as it finishes, read while the command still runs; SIGTERM then stops
    it cleanly: its scratch directory is gone, a one-line message says so, exit 143. (A
    check with Spack said nothing for 25 min and left /tmp/perfguard-spack-* behind.)"""
    for n in range(40):  # enough stacks that the command is still running at the first result
        shutil.copytree(envs_copy / "gcc-system-openmpi", envs_copy / f"copy-{n:02d}")
    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    process = subprocess.Popen(
        [*perfguard_command("spack", "check", "--envs", str(envs_copy))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **without_spack(), "TMPDIR": str(scratch_parent)})
    try:
        first = process.stdout.readline()
        assert first.startswith(f"scratch directory {scratch_parent}/perfguard-spack-"), first
        scratch = Path(first.split()[2])
        assert scratch.is_dir()
        started = process.stdout.readline()
        assert started.startswith(f"---- {envs_copy / 'copy-00'} (1 of 45, started "), started
        result = process.stdout.readline()
        assert result == f"ok   {envs_copy / 'copy-00'}\n", result
        assert process.poll() is None  # the result was read while it still runs
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, (stdout, stderr)
    assert not scratch.exists() and list(scratch_parent.iterdir()) == []
    assert stderr.startswith("perfguard: error: stopped by SIGTERM while checking "), stderr
    assert f"scratch directory {scratch} removed" in stderr and "Traceback" not in stderr
    assert "note: spack is not on PATH" not in stdout  # it did not run to the end


def test_check_takes_only_the_stacks_named(tmp_path: Path) -> None:
    documented = perfguard("spack", "check", "--stack", "gcc-system-openmpi",
                           env=without_spack())  # as docs/spack.md shows it
    assert documented.returncode == 0, documented.stdout + documented.stderr
    assert "1 stack(s)" in documented.stdout and "gcc-mvapich2" not in documented.stdout
    result = perfguard("spack", "check", "--stack", "gcc-system-openmpi", "--stack",
                       "gcc-mvapich2", env={**without_spack(), "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line.split(" (")[0] for line in result.stdout.splitlines()
            if line.startswith(("----", "ok", "FAIL"))]
    assert said[:4] == [f"---- {SPACK_ENVS / 'gcc-system-openmpi'}",
                        f"ok   {SPACK_ENVS / 'gcc-system-openmpi'}",
                        f"---- {SPACK_ENVS / 'gcc-mvapich2'}",
                        f"ok   {SPACK_ENVS / 'gcc-mvapich2'}"]
    assert said[4:] == [f"ok   {recipe}" for recipe in recipes()]  # what every stack builds
    assert "2 stack(s): syntax and structure (no Spack)" in result.stdout
    assert list(tmp_path.iterdir()) == []
    bad = perfguard("spack", "check", "--stack", "gcc-openmpi-ucx5", env=without_spack())
    assert bad.returncode == 2 and "--stack gcc-openmpi-ucx5: no such stack under " in \
        bad.stderr and "(known: gcc-mvapich2, gcc-openmpi-ucx, " in bad.stderr, bad.stderr


def test_spack_commands_get_a_user_cache_under_the_install_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spack's user cache is ~/.spack of whoever runs it (root's, for a root-run service)
    unless SPACK_USER_CACHE_PATH says otherwise: perfguard's Spack commands name
    ROOT/user-cache, and keep one the caller set."""
    monkeypatch.delenv("SPACK_USER_CACHE_PATH", raising=False)
    assert spack.spack_environ(tmp_path)["SPACK_USER_CACHE_PATH"] == str(tmp_path / "user-cache")
    assert spack.spack_environ()["SPACK_USER_CACHE_PATH"] == \
        str(spack.default_root() / "user-cache")
    monkeypatch.setenv("SPACK_USER_CACHE_PATH", "/shared/spack-cache")
    assert spack.spack_environ(tmp_path)["SPACK_USER_CACHE_PATH"] == "/shared/spack-cache"


# --- the Himeno archive of an offline site, as docs/spack.md makes it ------------------
HIMENO_RECIPE = SPACK_ENVS / "spack_repo" / "perfguard" / "packages" / "himeno" / "package.py"


def recipe_function(name: str):
    """A plain function of the Himeno recipe, without Spack (the recipe's module imports
    Spack's): its source compiled alone."""
    tree = ast.parse(HIMENO_RECIPE.read_text())
    [node] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    scope: dict = {"os": os, "re": re}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(HIMENO_RECIPE), "exec"), scope)
    return scope[name]


def doc_blocks(heading: str, doc: Path = OFFLINE) -> list[str]:
    """The ``sh`` blocks of the doc's section ``heading`` (docs/spack.md's)."""
    section = doc.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


@pytest.mark.skipif(not (shutil.which("jlha") and shutil.which("zip")), reason="needs jlha "
                    "(Debian's jlha-utils) and zip: ./install.sh installs them")
def test_the_himeno_archive_recipe_and_a_non_release_archive(tmp_path: Path) -> None:
    """docs/spack.md's Himeno archive recipe run verbatim on files named as the public copy
    names them (the `git clone` needs a network: a stand-in directory holds the two
    files): an LHA that bsdtar, as the recipe runs it, unpacks, inside the ZIP; the sha256
    line; the recipe finds the source whatever its case. Then the doc's block for archives
    that are not the release, verbatim but for the paths, files both into the mirror."""
    public = tmp_path / "himeno-cr"
    public.mkdir()
    (public / "himenobmtxps.c").write_text("/* stand-in for RIKEN's himenoBMTxps.c */\n")
    (public / "paramset.sh").write_text("#!/bin/sh\n")
    clone, recipe = doc_blocks("The Himeno archive, offline")[:2]
    assert "git clone https://github.com/kento/himeno-cr" in clone
    made = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    archive = tmp_path / "cc_himenobmtxp_mpi.zip"
    assert f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  {archive.name}" in made.stdout
    stage = tmp_path / "stage"  # what Spack's stage holds: the ZIP unpacked, then the LHA
    stage.mkdir()
    subprocess.run(["unzip", "-q", str(archive)], cwd=stage, check=True)
    [lha] = stage.glob("*.lzh")
    subprocess.run(["bsdtar", "-xf", lha.name], cwd=stage, check=True)
    found = recipe_function("_riken_source")(str(stage))
    assert found == str(stage / "himenobmtxp_mpi" / "himenobmtxps.c")
    assert Path(found).read_text().startswith("/* stand-in for RIKEN's")
    (stage / "himenobmtxp_mpi" / "himenobmtxps.c").rename(stage / "himenoBMTxps.c")
    assert recipe_function("_riken_source")(str(stage)) == str(stage / "himenoBMTxps.c")
    assert recipe_function("_riken_source")(str(tmp_path / "himeno-cr" / "none")) is None

    omb = tmp_path / "osu-micro-benchmarks-7.4.tar.gz"  # a tarball that is not the release
    omb.write_bytes(b"packed from a git copy of OMB 7.4")
    [block] = doc_blocks("An archive that is not the release")
    scope, mirror = tmp_path / "scope", tmp_path / "mirror"
    for doc_path, ours in {"/shared/perfguard-spack-scope": scope,
                           "/shared/perfguard-mirror": mirror,
                           "/shared/spack-packages": fake_builtin(tmp_path)}.items():
        block = block.replace(doc_path, str(ours))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={
                              **os.environ, **without_spack(),
                              "PATH": f"{Path(sys.executable).parent}:{without_spack()['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert yaml.safe_load((scope / "config.yaml").read_text()) == {"config": {"checksum": False}}
    assert (mirror / "himeno" / "himeno-2002.02.21.zip").read_bytes() == archive.read_bytes()
    sha = hashlib.sha256(omb.read_bytes()).hexdigest()
    assert (mirror / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz").is_file()
