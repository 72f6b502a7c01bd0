"""`perfguard site`, `topology` and `spack`: the site directory and what it builds on."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _add_topology(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("topology", help="describe nodes: NUMA, HCAs, GPUs and affinity")
    actions = top.add_subparsers(dest="action", required=True, metavar="ACTION")
    det = actions.add_parser(
        "detect", help="write a topology file for the node this runs on",
        description="Reads lscpu -p, ibv_devinfo -v (+ sysfs) and nvidia-smi topo -m; a "
                    "missing tool leaves its part empty with a note. Run it on a compute node "
                    "(e.g. through srun) and commit the result under site_config/systems/.")
    det.add_argument("--system", default="mycluster",
                     help="system name to write (default: mycluster)")
    det.add_argument("--partition", default="gpu", help="partition name to write (default: gpu)")
    det.add_argument("--mpi", default=None,
                     help="MPI flavour (a key of site_config/mpi_flavours.yaml; default: what "
                          "ompi_info and the HCAs say: openmpi-ucx, openmpi-openib or "
                          "openmpi-tcp)")
    det.add_argument("--nodes", type=int, default=None,
                     help="nodes the multi-node checks span (default: 2)")
    det.add_argument("-o", "--output", type=Path, help="file (default: stdout)")
    det.set_defaults(func=cmd_topology_detect)


def cmd_topology_detect(args: argparse.Namespace) -> int:
    from perfguard.site.detect import as_topology_yaml, detect

    found = detect()
    text = as_topology_yaml(found, args.system, args.partition, args.mpi, args.nodes)
    for note in found.notes:
        print(f"perfguard: {note}", file=sys.stderr)
    if args.output:
        args.output.write_text(text)
    else:
        print(text, end="")
    return 0


def _add_site(sub: argparse._SubParsersAction) -> None:
    site = sub.add_parser("site", help="the site directory: where each setting comes from")
    actions = site.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="the site directory and, for each setting file, "
                                           "whether the site's or the shipped one is used")
    show.set_defaults(func=cmd_site_show)
    chk = actions.add_parser(
        "check", help="check every setting file, and a system's topology against Slurm",
        description="Loads every topology file (schema: unknown or misspelled keys, types; "
                    "meaning: CPU lists, HCAs, GPU affinity), the thresholds and verdict rules; "
                    "then the system's partitions against Slurm: the partition exists, has "
                    "the nodes and the CPUs the file names. `perfguard run` does the same "
                    "before it submits anything. Exit 0: right; 2: a problem, named.")
    chk.add_argument("--system", default=None, help="the system to check against Slurm "
                     "(sys or sys:part; default: local where an embedded cluster runs, "
                     "else files only)")
    chk.set_defaults(func=cmd_site_check)
    init = actions.add_parser(
        "init", help="write a starting site directory",
        description="Creates systems/ and thresholds/ and a README; on a Slurm cluster it "
                    "prints (or with --detect runs) `perfguard topology detect` through "
                    "srun on one node of each partition.")
    init.add_argument("directory", type=Path, help="the site directory to create")
    init.add_argument("--system", default="mycluster", help="the system's name")
    init.add_argument("--detect", action="store_true",
                      help="run the topology detection now (one node per partition)")
    init.add_argument("--partition", action="append", default=[],
                      help="a partition to describe (repeatable; default: every partition "
                           "Slurm has; leave out service and login partitions)")
    init.set_defaults(func=cmd_site_init)


def cmd_site_show(args: argparse.Namespace) -> int:
    from perfguard.site import directory as site

    print(site.describe(args.ctx.state))
    return 0


def cmd_site_check(args: argparse.Namespace) -> int:
    from perfguard.workflows import site_check as check

    system = args.system or ("local" if args.ctx.embedded is not None else None)
    files = check.check(args.ctx, system)
    files.problems += check.thresholds_of_no_check(files)
    for path in files.read:
        print(f"read {path}")
    for problem in files.problems:
        print(f"problem: {problem}")
    if files.problems:
        return 2
    print(f"ok: {len(files.read)} files" + (f"; system {system} fits Slurm's partitions, "
                                         f"nodes and CPUs" if system else
                                         "; no system checked against Slurm (--system)"))
    return 0


def cmd_site_init(args: argparse.Namespace) -> int:
    from perfguard.site import directory as site

    for note in site.init(args.ctx, args.directory.resolve(), args.system, args.detect,
                          args.partition):
        print(note)
    return 0


def _add_scope_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-C", "--config-scope", dest="scope", default=None, metavar="SCOPE",
                        help="Spack configuration scope for every Spack call (`spack -C "
                             "SCOPE`; default $PERFGUARD_SPACK_CONFIG): an offline site's "
                             "repos, mirror and bootstrap settings")


def _add_spack(sub: argparse._SubParsersAction) -> None:
    spk = sub.add_parser("spack", help="the project's Spack stacks: check and install")
    actions = spk.add_subparsers(dest="action", required=True, metavar="ACTION")
    chk = actions.add_parser(
        "check", help="validate every environment and recipe (concretize when spack exists)")
    chk.add_argument("--envs", type=Path, default=None,
                     help="directory of environments (default: spack_envs/ of the checkout)")
    chk.add_argument("--stack", action="append", default=None, metavar="NAME",
                     help="check only this stack (repeatable; the recipes are always checked)")
    _add_scope_option(chk)
    chk.set_defaults(func=cmd_spack_check)
    ins = actions.add_parser("install", help="spack -e ROOT/envs/STACK install")
    ins.add_argument("env", help="stack name, e.g. gcc-openmpi-ucx-cuda")
    ins.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    _add_scope_option(ins)
    ins.set_defaults(func=cmd_spack_install)
    env = actions.add_parser("env", help="render a stack under the root and print the "
                                         "directory to give `spack -e`")
    env.add_argument("env", help="stack name, e.g. gcc-openmpi-ucx-cuda")
    env.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    env.set_defaults(func=cmd_spack_env)
    arc = actions.add_parser("archives", help="every source archive an install of STACK "
                                              "fetches (what an offline mirror must hold)")
    arc.add_argument("env", help="stack name, e.g. gcc-system-openmpi")
    arc.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    arc.add_argument("--mirror", type=Path, default=None,
                     help="a source mirror: mark each archive it holds or lacks")
    _add_scope_option(arc)
    arc.set_defaults(func=cmd_spack_archives)
    mirror = actions.add_parser("mirror", help="put source archives copied in by hand into a "
                                               "Spack source mirror (offline sites)")
    mirror.add_argument("mirror", type=Path, help="the mirror's directory")
    mirror.add_argument("archives", nargs="+", metavar="[NAME@VERSION=]FILE",
                        help="archives as downloaded; NAME@VERSION= where the file name does "
                             "not say them (himeno@2002.02.21=cc_himenobmtxp_mpi.zip)")
    mirror.add_argument("--no-checksum", action="store_true",
                        help="last resort: file an archive whose sha256 is not its recipe's "
                             "(installs then need `checksum: false` in the scope)")
    _add_scope_option(mirror)
    mirror.set_defaults(func=cmd_spack_mirror)
    scope = actions.add_parser("scope", help="write an offline site's Spack configuration "
                                             "scope (repos, bootstrap off, mirror)")
    scope.add_argument("directory", type=Path, help="the scope's directory")
    scope.add_argument("--builtin", type=Path, required=True,
                       help="a checkout of spack/spack-packages (tag v2025.11.0 for Spack 1.1)")
    scope.add_argument("--mirror", type=Path, default=None, help="the source mirror")
    scope.add_argument("--no-checksum", action="store_true",
                       help="last resort: `config: {checksum: false}` (archives that are not "
                            "the recipes' own bytes)")
    scope.set_defaults(func=cmd_spack_scope)


ROOT_HELP = ("install root: installs in ROOT/opt, views in ROOT/views/STACK, the environment "
             "Spack works on in ROOT/envs/STACK (default: $STATE/spack; a partition's "
             "binary_provider root)")


def cmd_spack_check(args: argparse.Namespace) -> int:
    """Each stack's line as it starts and its result as it finishes (a concretization
    takes minutes on a loaded login node), flushed: a pipe or a log sees it at once."""
    from perfguard.site import spack

    failed = False

    def say(line: str) -> None:
        print(line, flush=True)

    def done(name: str, findings: spack.Findings) -> None:
        nonlocal failed
        failed |= bool(findings.errors)
        lines = [f"{'FAIL' if findings.errors else 'ok':<4} {name}"]
        lines += [f"     error: {error}" for error in findings.errors]
        lines += [f"     warning: {warning}" for warning in findings.warnings]
        lines += [f"     {note}" for note in findings.notes]
        print("\n".join(lines), flush=True)

    skipped = spack.check_all(args.envs or spack.SPACK_ENVS, spack.config_scope(args.scope),
                              args.stack, say, done)
    if skipped:
        print(f"note: {skipped}")
    return 1 if failed else 0


def cmd_spack_install(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    return spack.install(args.env, args.root and args.root.resolve(),
                         spack.config_scope(args.scope))


def cmd_spack_archives(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    found = spack.archives(args.env, spack.config_scope(args.scope),
                           args.root and args.root.resolve())
    missing = 0
    for archive in found:
        where = archive["path"]
        local = str(archive["url"] or "").startswith("file:")  # a file of the recipe's own
        if local:
            where = "no mirror needed (a file of the package repository)"
        elif args.mirror is not None:
            held = (args.mirror / where).is_file()
            missing += not held
            where = f"{'in mirror' if held else 'MISSING'}  {where}"
        installed = "  (installed)" if archive["installed"] else ""
        print(f"{archive['name']}@{archive['version']}  {archive['url']}  {where}{installed}")
    if args.mirror is not None:
        print(f"{len(found) - missing} of {len(found)} archives in {args.mirror}")
    return 1 if missing else 0


def cmd_spack_mirror(args: argparse.Namespace) -> int:
    from perfguard.errors import UsageError
    from perfguard.site import spack

    wanted = []
    for entry in args.archives:
        named, equals, path = entry.rpartition("=")
        if equals and (not named or "@" not in named.strip("@") or not path):
            raise UsageError(f"{entry!r}: give FILE or NAME@VERSION=FILE "
                             f"(himeno@2002.02.21=cc_himenobmtxp_mpi.zip)")
        wanted.append((Path(path), named or None))
    mirror = args.mirror.resolve()
    entries = spack.mirror_entries(mirror, wanted, spack.config_scope(args.scope),
                                   args.no_checksum)
    for entry in entries:
        print(f"{entry.archive} -> {spack.add_to_mirror(entry)}")
        if entry.warning:
            print(f"  warning: {entry.warning}")
    print(f"mirror ready: `perfguard spack scope SCOPE --builtin PACKAGES --mirror {mirror}` "
          f"writes the scope that names it (docs/spack.md)")
    return 0


def cmd_spack_scope(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    written = spack.write_scope(args.directory.resolve(), args.builtin.resolve(),
                                args.mirror and args.mirror.resolve(), args.no_checksum)
    for path in written:
        print(f"wrote {path}")
    print(f"use it: `perfguard spack check -C {args.directory}`, or export "
          f"PERFGUARD_SPACK_CONFIG={args.directory} (a site's partitions: binary_provider "
          f"config: {args.directory})")
    return 0


def cmd_spack_env(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    print(spack.environment(args.env, args.root and args.root.resolve()))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    _add_topology(sub)
    _add_site(sub)
    _add_spack(sub)
