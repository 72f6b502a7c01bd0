#!/usr/bin/env bash
# perfguard set-up: Debian packages for the embedded cluster, then the Python package
# in .venv. Idempotent: a second run installs nothing and takes a second or two.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(slurm-wlm slurmdbd munge mariadb-server mariadb-client openmpi-bin libopenmpi-dev
          ucx-utils perftest ibverbs-utils numactl hwloc postgresql postgresql-client
          util-linux iproute2 python3-venv gcc make
          libarchive-tools  # bsdtar: the Spack stacks' external libarchive (Himeno's LHA)
          jlha-utils zip  # docs/spack.md's Himeno archive for an offline site (LHA in a ZIP)
          lmod  # environment modules: a provider's modules (HPC-X's) in the embedded jobs
          chromium)  # the HTML report's browser test (Playwright drives Debian's Chromium)

missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ $EUID -ne 0 ]]; then
        echo "install.sh: Debian packages missing: ${missing[*]}; run as root (sudo ./install.sh)" >&2
        exit 1
    fi
    echo "install.sh: installing ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
# Reinstall only when the package metadata changed since the last install.
if [[ ! -f .venv/.perfguard-installed || pyproject.toml -nt .venv/.perfguard-installed ]]; then
    .venv/bin/pip install -q --upgrade pip >/dev/null
    # setuptools notes on every editable install that folders named like the package may
    # shadow it: the checkout's data folders are mapped into it on purpose (pyproject.toml)
    PYTHONWARNINGS="ignore:Editable installation:UserWarning" \
        .venv/bin/pip install -q -e '.[test]'
    touch .venv/.perfguard-installed
fi
echo "install.sh: ready (.venv/bin/perfguard)"
