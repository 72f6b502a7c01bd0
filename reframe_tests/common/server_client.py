"""Two-sided benchmarks (ucx_perftest, perftest) in one Slurm job.

The server starts on the first node of the allocation, the client on the last
(the same node for loopback). The server's address is its Slurm ``NodeAddr``; the
server step takes the first free TCP port from a window derived from the job id,
the client waits until that server process listens on it (no fixed sleep, never
another process's listener), and the server step is stopped when the client ends,
whether it passed or failed.
"""

from __future__ import annotations

from reframe.core.builtins import parameter, run_after, variable

from reframe_tests.common.base import MeasuredCheck
from reframe_tests.common.launch import HELPER_STEP
from reframe_tests.common.pinning import AUTO_HCA, HCA_CHOICES, map_cpu, partition_topology

#: The server step (``bash -c SERVE pg-serve PAIR FIRST_PORT SERVER_CMD``, on the server
#: node): the first port from FIRST_PORT that no TCP socket holds, SERVER_CMD started with
#: ``$pg_port`` that port, and once that process or one it started (a container runtime's,
#: a site's wrapper script's) listens there (``ss -p``), the port written to PAIR; then its
#: exit code is the step's. A listener whose owner ``ss`` cannot show (another user's; a
#: setuid server, not dumpable) is not taken for ours: a measurement against another
#: job's server would pass unseen, a server never seen fails the pair loudly, and the step
#: names that listener on its standard error after 2 s. A server that ends before it
#: listens (another process took the port between the check and its bind) is started
#: again on the next free port, three tries in all; the step says so on its stderr.
SERVE = r"""
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
ours() {  # PORT PID: a listener on PORT is PID or one of its descendants
    local line p
    while read -r line; do
        p=$(grep -o 'pid=[0-9]*' <<< "$line" | head -n1 | cut -d= -f2)
        while [ "$p" -gt 1 ] 2>/dev/null && [ "$p" != "$2" ]; do
            p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
        done
        [ "$p" = "$2" ] && return 0
    done < <(ss -Hltnp "sport = :$1")
    return 1
}
pg_port=$2
for try in 1 2 3; do
    while ss -Hatn "sport = :$pg_port" | grep -q .; do pg_port=$((pg_port + 1)); done
    eval "$3" &
    server=$!
    waited=0
    until ours "$pg_port" "$server"; do
        alive "$server" || break
        if [ $((waited += 1)) -eq 40 ] && ss -Hltn "sport = :$pg_port" | grep -q .; then
            echo "perfguard: port $pg_port: a listener not this server's:" \
                 "$(ss -Hltnp "sport = :$pg_port")" >&2
        fi
        sleep 0.05
    done
    if alive "$server"; then echo "$pg_port" > "$1"; wait "$server"; exit; fi
    wait "$server"; rc=$?
    echo "perfguard: the server ended (rc=$rc) before it listened on port $pg_port" >&2
    pg_port=$((pg_port + 1))
done
exit "$rc"
""".strip("\n")
#: ``bash -c ANNOUNCED pg-wait PAIR``: waits until the server step has written its port to
#: PAIR (read on the server's node: the job's directory may be NFS), then prints it.
ANNOUNCED = ('until read -r port 2>/dev/null < "$1" && [ -n "$port" ]; do sleep 0.1; done; '
             'echo "$port"')

# Bash defined once at the top of the job script; `run_pair SERVER_CMD CLIENT_CMD` runs
# one measurement. `$srun_server` / `$srun_client` are set by the check. Each job starts
# in its own window of 12 ports below the ephemeral range, so jobs whose nodes share one
# network (the embedded cluster) seldom meet on a port; but two clusters on one host
# number their jobs alike, and their job 30s met in CI: a probe step found a port free,
# the other cluster's server bound it first, and the wait for "a listener on the port"
# took that server for ours (the client measured against it; our server's step failed).
# So the server step takes its own port (SERVE), on its node and just before its server
# binds, and says which once its own server listens there; the client starts then.
PAIR_FUNCTIONS = r"""
pg_nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
pg_server_node=${pg_nodes[0]}
pg_client_node=${pg_nodes[-1]}
pg_server_addr=$(scontrol show node "$pg_server_node" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
pg_port=${PG_FIRST_PORT:-$((20000 + SLURM_JOB_ID % 1000 * 12))}
pg_pairs=0
pg_probe="srun -J perfguard-helper --overlap -N1 -n1 -w $pg_server_node"
pg_serve=$(cat <<'PG_SERVE'
@SERVE@
PG_SERVE
)
pg_announced='@ANNOUNCED@'
pg_wait_listening() {  # PAIR SERVER_PID: true once that server's step said its port
    $pg_probe timeout "${PG_READY_TIMEOUT:-60}" bash -c "$pg_announced" pg-wait "$1" \
        > "$1.port" &
    local waiter=$!
    while kill -0 "$waiter" 2>/dev/null; do
        if ! kill -0 "$2" 2>/dev/null; then kill "$waiter"; wait "$waiter"; return 1; fi
        sleep 0.2
    done
    wait "$waiter"
}
run_pair() {
    local server_cmd=$1 client_cmd=$2 rc server_pid
    local pair=$PWD/pg_pair.$BASHPID.$((pg_pairs += 1))
    local named="-J $(basename "${server_cmd%% *}")"  # srun's own name: the program's
    case " $srun_server " in *" -J"*|*" --job-name"*) named= ;; esac  # a helper's stays
    rm -f "$pair" "$pair.port"
    eval "$srun_server $named -w $pg_server_node" \
        'bash -c "$pg_serve" pg-serve "$pair" "$pg_port" "$server_cmd"' \
        >>server.out 2>>server.err &
    server_pid=$!
    if ! pg_wait_listening "$pair" "$server_pid"; then
        kill "$server_pid" 2>/dev/null; wait "$server_pid"
        rm -f "$pair" "$pair.port"
        echo "perfguard: server on $pg_server_node did not listen (ports from $pg_port;" \
             "see server.err)" >&2
        return 1
    fi
    # the helper step's last number: a site's TaskProlog may print lines before it
    pg_port=$(grep -Ex '[0-9]+' "$pair.port" | tail -n 1)
    echo "# perfguard pair server=$pg_server_node($pg_server_addr)" \
         "client=$pg_client_node port=$pg_port"
    eval "$srun_client -w $pg_client_node $client_cmd"
    rc=$?
    if [ $rc -ne 0 ]; then kill "$server_pid" 2>/dev/null; fi
    wait "$server_pid"
    rm -f "$pair" "$pair.port"
    pg_port=$((pg_port + 1))
    return $rc
}
""".strip("\n").replace("@SERVE@", SERVE).replace(
    "@ANNOUNCED@", ANNOUNCED)


#: Inside a subshell: its `run_pair` steps are named as helpers (background load that is
#: stopped once the measurement is done), so their end is not the benchmark's.
HELPER_SRUNS = (f'srun_server="$srun_server -J {HELPER_STEP}"; '
                f'srun_client="$srun_client -J {HELPER_STEP}"')


def pair_prologue(srun_server: str, srun_client: str) -> list[str]:
    """Job-script lines that define the node roles and the `run_pair` function."""
    return [f"srun_server='{srun_server}'", f"srun_client='{srun_client}'",
            *PAIR_FUNCTIONS.splitlines()]


#: What a command line writes for the pair's port: expanded by `run_pair`'s eval,
#: after the free-port probe, never when the line is written.
PORT = "\\$pg_port"


def pair_line(command: str) -> str:
    """`run_pair` with identical options on both sides; the client adds the server."""
    return f'run_pair "{command}" "{command} \\$pg_server_addr"'


def per_size(sizes: list[int], line_for_size) -> str:
    """One pair per message size, each output block headed ``# perfguard size=N``."""
    return "; ".join(f'echo "# perfguard size={size}"; {line_for_size(size)} || exit $?'
                     for size in sizes)


class ServerClientCheck(MeasuredCheck):
    """A two-sided benchmark: server and client steps composed by the job script."""

    #: The HCA the pair is pinned to (``auto`` where a partition has none).
    hca = parameter(HCA_CHOICES)

    uses_mpi = False
    self_launched = True
    #: First TCP port to try; 0 derives it from the job id (busy ports are skipped).
    first_port = variable(int, value=0)
    #: Tasks per node of the job: 1 (server and client on two nodes), 2 for a loopback.
    pair_tasks_per_node = 1

    @run_after("setup")
    def the_pair_fixes_the_shape(self):
        self.num_tasks_per_node = self.steerable(
            "num_tasks_per_node", self.pair_tasks_per_node,
            fixed="a node runs one side of a server/client pair (both for a loopback): the "
                  "pairs fix the job's shape")

    def users_options(self) -> list[str]:
        """The user's options (``-S executable_opts``) for both sides' command lines; the
        job runs composed steps, after which no options go."""
        self.executable_opts = []
        return self.steerable("executable_opts", [])

    def pair_steps(self, srun: str) -> None:
        """Define the roles and `run_pair`; one task per step on its node."""
        if self.first_port:
            self.env_vars["PG_FIRST_PORT"] = str(self.first_port)
        server, client = self.pair_sruns(srun)
        self.prerun_cmds += pair_prologue(f"{server} -N1 -n1", f"{client} -N1 -n1")

    def pair_sruns(self, srun: str) -> tuple[str, str]:
        """The server's and the client's srun, without node or task counts.

        ``--overlap``: server and client steps share a node's cores in a loopback run (a
        pinned step owns all of them). Where virtual nodes share the host's cores (the
        embedded cluster), the server takes another core than the client, or the two
        busy-polling sides would take turns on one core.
        """
        server = client = f"{srun} --overlap"
        if self.current_partition.extras.get("nodes_share_host") and self.pinned_cores:
            node = partition_topology(self.current_partition).node
            order = node.cores_near(node.hca(self.hca), node.cores) if self.hca != AUTO_HCA \
                else [c for domain in node.numa for c in domain.cpus]
            others = [c for c in order if c not in self.pinned_cores]
            if others:
                server = server.replace(self.cpu_bind, map_cpu(others[:1]))
        return server, client
