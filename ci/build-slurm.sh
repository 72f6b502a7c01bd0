#!/usr/bin/env bash
# Build Slurm from a source tree and install it under a prefix: what `perfguard cluster up
# --slurm-prefix PREFIX` runs (docs/adopting.md, "Which Slurm", shows these very commands;
# tests/unit/test_build_slurm.py holds the two together). Not run in CI: a build of
# Slurm takes many minutes.
#
#   ci/build-slurm.sh SOURCE_DIR PREFIX           build and install (root installs the
#                                                 Debian packages the build needs)
#   ci/build-slurm.sh --print SOURCE_DIR PREFIX   print the commands, run nothing
#
# SOURCE_DIR is a Slurm source tree with its configure script, e.g. SchedMD's tag
# slurm-25-11-7-1 (git clone -b slurm-25-11-7-1 https://github.com/SchedMD/slurm).
set -euo pipefail

usage="usage: ci/build-slurm.sh [--print] SOURCE_DIR PREFIX"
print=false
if [[ ${1:-} == --print ]]; then
    print=true
    shift
fi
src=${1:?$usage}
prefix=${2:?$usage}

# What the build needs from Debian 12: munge's library (auth/munge), json-c (the
# scontrol/sacct --json and slurmrestd data parsers), MariaDB's client library for
# slurmdbd's accounting storage, D-Bus for cgroup/v2 (slurmd asks systemd for its scope),
# PMIx for srun --mpi=pmix and hwloc for the nodes' topology.
packages=(build-essential pkg-config libmunge-dev libjson-c-dev libmariadb-dev
          libdbus-1-dev libpmix-dev libhwloc-dev)
multiarch="$(uname -m)-linux-gnu"
# --enable-multiple-slurmd: the embedded cluster's virtual nodes are slurmd of one host;
# --with-mysql_config names the directory of MariaDB's mariadb_config (libmariadb-dev).
configure=(./configure "--prefix=$prefix" "--sysconfdir=$prefix/etc"
           --enable-multiple-slurmd "--with-pmix=/usr/lib/$multiarch/pmix2" --with-munge
           --with-hwloc --with-json --with-mysql_config=/usr/bin)

if $print; then
    echo "apt-get install -y --no-install-recommends ${packages[*]}"
    echo "cd $src"
    echo "${configure[*]}"
    echo 'make -j"$(nproc)"'
    echo "make install"
    exit 0
fi

if [[ ! -x $src/configure ]]; then
    echo "build-slurm.sh: $src has no configure script: give a Slurm source tree" \
         "(e.g. SchedMD's tag slurm-25-11-7-1)" >&2
    exit 2
fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" \
        || missing+=("$package")
done
if ((${#missing[@]})); then
    if [[ $EUID -ne 0 ]]; then
        echo "build-slurm.sh: Debian packages missing: ${missing[*]}; run as root" >&2
        exit 1
    fi
    apt-get update -q
    apt-get install -y --no-install-recommends "${packages[@]}"
fi
cd "$src"
"${configure[@]}"
make -j"$(nproc)"
make install
echo "build-slurm.sh: Slurm installed in $prefix: perfguard cluster up --slurm-prefix $prefix"
