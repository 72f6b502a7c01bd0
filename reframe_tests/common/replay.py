#!/usr/bin/env python3
"""Replay of recorded real benchmark output, in place of a benchmark that cannot run here.

Used by the ``replay`` binary provider only (tests and CI: no OMB source, no RDMA
device). The check's real job script runs unchanged — srun, binding, server and
client steps — with this program where the benchmark would be::

    replay.py CATALOGUE_DIR PROGRAM [the benchmark's own arguments ...]

``CATALOGUE_DIR/recordings.json`` lists what was recorded::

    [{"program": "osu_latency", "nnodes": 2, "ntasks": 2,
      "args_contain": ["-c"], "variant": "XS-1x2x2",
      "stdout": ["osu_latency.txt"], "stderr": "osu_latency.stderr.txt", "exit": 0}]

The first entry whose given fields all match (program name; the step's node and
task counts from Slurm; arguments it must contain; ``$PERFGUARD_REPLAY_VARIANT``
for shapes fixed at build time; environment variables the job must set, ``env``, or
must not set to a value, ``env_not``: what the recorded run was started with) is
replayed: rank 0 prints its stdout and stderr (srun's own cpu-bind lines are left
out: srun prints the real ones), every rank exits with its code (a failing one only
once rank 0 has printed). A list of stdouts is replayed in order, one per call in the
same directory (the same measurement taken twice); ``hold_s`` keeps the program
running that long after its output (a rank that hangs in MPI_Finalize); ``crash``
(``{"rank": 0, "signal": "SIGSEGV"}``) kills that rank with the signal after its output
while the others hold: a crashed rank, as a segfault in a real benchmark. A recording
of several sizes marked ``# perfguard size=N`` (``per_size``) replays the block of the
``-s`` size asked for.
Two-sided programs (perftest,
ucx_perftest): the server listens on ``-p PORT`` until its client has connected;
the client (last argument: the server's address) connects, then prints.
No matching recording: exit 127 with what was asked and what exists.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path


def slurm_shape() -> dict[str, int]:
    env = os.environ
    return {"nnodes": int(env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or 1),
            "ntasks": int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1)}


def matches(entry: dict, program: str, args: list[str], shape: dict[str, int]) -> bool:
    return (entry["program"] == program
            and all(entry.get(k, v) == v for k, v in shape.items())
            and all(a in args for a in entry.get("args_contain", []))
            and entry.get("variant", "") == os.environ.get("PERFGUARD_REPLAY_VARIANT", "")
            and all(os.environ.get(k) == v for k, v in entry.get("env", {}).items())
            and all(os.environ.get(k) != v for k, v in entry.get("env_not", {}).items()))


def size_block(text: str, size: str | None) -> str:
    """The block of a ``# perfguard size=N`` recording that ``-s size`` asks for (the job
    script prints the marker itself)."""
    blocks = text.split("# perfguard size=")
    for block in blocks[1:]:
        number, _, body = block.partition("\n")
        if number.strip() == size:
            return body
    return ""


def client_address(args: list[str]) -> str | None:
    """Two-sided programs: the client's last argument is the server's address."""
    if not args:
        return None
    try:
        ipaddress.ip_address(args[-1])
        return args[-1]
    except ValueError:
        return None


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


def serve_once(port: int, timeout: float = 120) -> None:
    with socket.create_server(("0.0.0.0", port), reuse_port=False) as server:
        server.settimeout(timeout)
        connection, _ = server.accept()
        with connection:
            while connection.recv(4096):
                pass


def connect(address: str, port: int, timeout: float = 60) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((address, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def next_stdout(entry: dict, index: int) -> str:
    """Recordings listed in order are replayed one per call (counter in the cwd)."""
    files = entry["stdout"] if isinstance(entry["stdout"], list) else [entry["stdout"]]
    counter = Path(f".replay-{index}.count")
    calls = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(calls + 1))
    return files[min(calls, len(files) - 1)]


def main(argv: list[str]) -> int:
    catalogue_dir, program, args = Path(argv[1]), Path(argv[2]).name, argv[3:]
    catalogue = json.loads((catalogue_dir / "recordings.json").read_text())
    shape = slurm_shape()
    found = [(i, e) for i, e in enumerate(catalogue) if matches(e, program, args, shape)]
    if not found:
        known = sorted({f"{e['program']} ({e.get('nnodes', '*')} nodes, "
                        f"{e.get('ntasks', '*')} tasks)" for e in catalogue})
        print(f"replay: no recording of {program} for {shape['nnodes']} nodes, "
              f"{shape['ntasks']} tasks, args {args}, variant "
              f"{os.environ.get('PERFGUARD_REPLAY_VARIANT', '')!r}; recorded: {known}",
              file=sys.stderr)
        return 127
    index, entry = found[0]
    port = option(args, "-p")
    address = client_address(args)
    if port and entry.get("pair") and address is None:
        serve_once(int(port))
        return entry.get("exit", 0)
    link = connect(address, int(port)) if port and entry.get("pair") else None
    if os.environ.get("SLURM_PROCID", "0") == "0":
        text = (catalogue_dir / next_stdout(entry, index)).read_text()
        sys.stdout.write(size_block(text, option(args, "-s")) if entry.get("per_size")
                         else text)
        sys.stdout.flush()
        if entry.get("stderr"):
            text = (catalogue_dir / entry["stderr"]).read_text()
            sys.stderr.write("".join(line for line in text.splitlines(keepends=True)
                                     if not line.startswith("cpu-bind=")))
            sys.stderr.flush()
        PRINTED.touch()
    rank = os.environ.get("SLURM_PROCID", "0")
    crash = entry.get("crash")
    crashes = bool(crash) and rank == str(crash["rank"])
    if crashes or entry.get("exit", 0):
        sys.stdout.flush()
        wait_for_rank0()  # the recorded failure came after rank 0's output
    if crashes:
        signal.signal(getattr(signal, crash["signal"]), signal.SIG_DFL)
        os.kill(os.getpid(), getattr(signal, crash["signal"]))
    time.sleep(entry.get("hold_s", 0))
    if link is not None:
        duration = option(args, "-D")
        if duration:  # a timed run (an interfering pair) holds the link like the real one
            time.sleep(float(duration))
        link.close()
    return entry.get("exit", 0)


#: Rank 0 has printed its recorded output (this job step's marker in the job's directory,
#: which every node shares).
PRINTED = Path(f".replay-printed-{os.environ.get('SLURM_JOB_ID', '0')}."
               f"{os.environ.get('SLURM_STEP_ID', '0')}")


def wait_for_rank0(limit_s: float = 30.0) -> None:
    """A recorded crash or failing exit of another rank came after rank 0's output (OMB's
    title): wait for it, or srun kills rank 0 on the failure before a slow start has
    printed anything and the replay is of another failure than the recording's."""
    deadline = time.monotonic() + limit_s
    while not PRINTED.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
