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
    det.add_argument("--system", default="mycluster")
    det.add_argument("--partition", default="gpu")
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
    init.add_argument("directory", type=Path)
    init.add_argument("--system", default="mycluster", help="the system's name")
    init.add_argument("--detect", action="store_true",
                      help="run the topology detection now (one node per partition)")
    init.add_argument("--partition", action="append", default=[],
                      help="a partition to describe (repeatable; default: every partition "
                           "Slurm has; leave out service and login partitions)")
    init.set_defaults(func=cmd_site_init)


def cmd_site_show(args: argparse.Namespace) -> int:
    from perfguard.site import directory as site

    print(site.describe())
    return 0


def cmd_site_check(args: argparse.Namespace) -> int:
    from perfguard.site import check

    system = args.system or ("local" if args.ctx.embedded is not None else None)
    files = check.check(args.ctx, system)
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


def _add_spack(sub: argparse._SubParsersAction) -> None:
    spk = sub.add_parser("spack", help="the project's Spack stacks: check and install")
    actions = spk.add_subparsers(dest="action", required=True, metavar="ACTION")
    chk = actions.add_parser(
        "check", help="validate every environment and recipe (concretize when spack exists)")
    chk.add_argument("--envs", type=Path, default=None,
                     help="directory of environments (default: spack_envs/ of the checkout)")
    chk.set_defaults(func=cmd_spack_check)
    ins = actions.add_parser("install", help="spack -e ROOT/envs/STACK install")
    ins.add_argument("env", help="stack name, e.g. gcc-openmpi-ucx-cuda")
    ins.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    ins.set_defaults(func=cmd_spack_install)
    env = actions.add_parser("env", help="render a stack under the root and print the "
                                         "directory to give `spack -e`")
    env.add_argument("env", help="stack name, e.g. gcc-openmpi-ucx-cuda")
    env.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    env.set_defaults(func=cmd_spack_env)
    mirror = actions.add_parser("mirror", help="put source archives copied in by hand into a "
                                               "Spack source mirror (offline sites)")
    mirror.add_argument("mirror", type=Path, help="the mirror's directory")
    mirror.add_argument("archives", type=Path, nargs="*", help="archives whose versions have "
                        "a sha256 in their recipe (found by checksum)")
    mirror.add_argument("--named", action="append", default=[], metavar="NAME@VERSION=FILE",
                        help="an archive of a version without a checksum (himeno), found by "
                             "name and version; repeatable")
    mirror.set_defaults(func=cmd_spack_mirror)


ROOT_HELP = ("install root: installs in ROOT/opt, views in ROOT/views/STACK, the environment "
             "Spack works on in ROOT/envs/STACK (default: $STATE/spack; a partition's "
             "binary_provider root)")


def cmd_spack_check(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    results, skipped = spack.check_all(args.envs or spack.SPACK_ENVS)
    failed = False
    for name, findings in results.items():
        state = "FAIL" if findings.errors else "ok"
        failed |= bool(findings.errors)
        print(f"{state:<4} {name}")
        for error in findings.errors:
            print(f"     error: {error}")
        for warning in findings.warnings:
            print(f"     warning: {warning}")
        for note in findings.notes:
            print(f"     {note}")
    if skipped:
        print(f"note: {skipped}")
    return 1 if failed else 0


def cmd_spack_install(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    return spack.install(args.env, args.root and args.root.resolve())


def cmd_spack_mirror(args: argparse.Namespace) -> int:
    from perfguard.errors import UsageError
    from perfguard.site import spack

    wanted = [(archive, None) for archive in args.archives]
    for entry in args.named:
        named, equals, path = entry.partition("=")
        if not equals or not path:
            raise UsageError(f"--named {entry!r}: give NAME@VERSION=FILE")
        wanted.append((Path(path), named))
    if not wanted:
        raise UsageError("name at least one archive (or --named NAME@VERSION=FILE)")
    mirror = args.mirror.resolve()
    for archive, named in wanted:
        print(f"{archive} -> {spack.add_to_mirror(mirror, archive, named)}")
    print(f"mirror ready: `spack mirror add perfguard file://{mirror}` (or a mirrors.yaml in "
          f"the scope of the partition's binary_provider; docs/spack.md)")
    return 0


def cmd_spack_env(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    print(spack.environment(args.env, args.root and args.root.resolve()))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    _add_topology(sub)
    _add_site(sub)
    _add_spack(sub)
