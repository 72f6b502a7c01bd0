#!/bin/bash
# sweep_agent.sh ROLE TABLE: one task of a sweep round's server step (ROLE server) or
# client step (ROLE client); every node of the round runs one.
#
# One step per role and round, not four per measurement: a 64-node sweep is 2,080 pairs,
# and Slurm's MaxStepCount (40,000 by default) and slurmctld's step RPCs bound how many
# steps one job may start. TABLE, written by the job script in the job's (shared) working
# directory, holds a line per pair, "SLOT INDEX SERVER CLIENT SERVER_ADDR"; a task plays
# its part in the pair its node is in. Pairs of slot S start once every pair of slot S-1
# has ended, which is how `at_once` caps concurrency inside one step.
#
# Rendezvous through two files per pair that the job script created empty before the
# steps started (so that NFS close-to-open consistency shows every appended line):
#   TABLE.INDEX.port  server -> client: "TEST PORT" once the server listens, "TEST failed"
#   TABLE.INDEX.done  client -> server: "TEST done" after each test, "end" after the last
# and TABLE.servers-ended, which the job script creates when the server step has ended
# (a client waiting for a server that will never come stops waiting).
# The client's output (one "# perfguard sweep ..." block per test) goes to TABLE.INDEX.out,
# a server's to TABLE.INDEX.TEST.log; why a server failed goes to TABLE.INDEX.server.
#
# Environment: PG_SWEEP_COMMAND (ucx_perftest and its memory options), PG_SWEEP_TESTS
# ("TEST:SIZE:ITERATIONS ..."), PG_FIRST_PORT, PG_READY_TIMEOUT (s a server has to listen),
# PG_PAIR_TIMEOUT (s a pair may take), PG_TEST_TIMEOUT (s one measurement may take: a
# client whose server died spins for ever over shared memory; seen with a throttled node).
set -u
role=$1 table=$2
me=${SLURMD_NODENAME:-$(hostname -s)}
ready_timeout=${PG_READY_TIMEOUT:-60}
pair_timeout=${PG_PAIR_TIMEOUT:-600}
test_timeout=${PG_TEST_TIMEOUT:-120}

# Waiting costs no process: `read` is a shell builtin, and so is this pause (a read with a
# timeout on a pipe nobody writes). Up to 128 tasks wait at once on a 64-node sweep; a
# `grep` and a `sleep` per poll would be thousands of processes a second.
exec {pause_fd}<> <(:)
pause() {
    read -r -t "$1" -u "$pause_fd" _ || true
}

line_in() {  # FILE WORD: print the first line of FILE whose first word is WORD
    local line
    while IFS= read -r line; do
        case $line in "$2" | "$2 "*) echo "$line"; return 0 ;; esac
    done < "$1"
    return 1
}

wait_line() {  # FILE WORD SECONDS [POLL]: wait for it and print it; fail after SECONDS
    local deadline=$((SECONDS + $3))
    until line_in "$1" "$2"; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        pause "${4:-0.02}"
    done
}

alive() {  # PID: our child, running; never another process the kernel gave that pid since
    local key value state=""
    [ -r "/proc/$1/status" ] || return 1
    while read -r key value _; do
        case $key in
            State:) state=$value ;;
            PPid:) [ "$value" = "$BASHPID" ] && [ "$state" != Z ]; return ;;
        esac
    done < "/proc/$1/status"
    return 1
}

listening() {  # PORT PID: that process listens on the port, not another job's server
    ss -Hltnp "sport = :$1" | grep -q "pid=$2,"
}

in_use() {  # PORT: held by any TCP socket (a connection's local end refuses bind() too)
    ss -Hatn "sport = :$1" | grep -q .
}

wait_for_slot() {  # SLOT: every pair of the slot before it has ended
    local index
    for index in $(awk -v slot="$(($1 - 1))" '$1 == slot { print $2 }' "$table"); do
        wait_line "$table.$index.done" end "$pair_timeout" 0.1 >/dev/null || return 1
    done
}

not_listening() {  # PID PORT TEST LOG: why a server never listened, its output with it
    local why="still not listening after ${ready_timeout}s"
    if ! alive "$1"; then wait "$1"; why="ucx_perftest exited with rc=$?"; fi
    echo "perfguard: $3 server on $me did not listen on port $2: $why" >&2
    sed 's/^/    /' "$4" >&2
}

serve() {  # SLOT INDEX: a server per test, each announced once it listens
    local port=$((PG_FIRST_PORT + $2 * 4)) spec test size iterations pid started
    wait_for_slot "$1"
    for spec in $PG_SWEEP_TESTS; do
        IFS=: read -r test size iterations <<< "$spec"
        while in_use "$port"; do port=$((port + 1)); done
        $PG_SWEEP_COMMAND -t "$test" -s "$size" -n "$iterations" -p "$port" </dev/null \
            > "$table.$2.$test.log" 2>&1 &
        pid=$! started=$SECONDS
        until listening "$port" "$pid"; do
            if ! alive "$pid" || [ $((SECONDS - started)) -ge "$ready_timeout" ]; then
                not_listening "$pid" "$port" "$test" "$table.$2.$test.log"
                break
            fi
            pause 0.02
        done
        if listening "$port" "$pid"; then
            echo "$test $port" >> "$table.$2.port"
            # the client's end (or its own) ends the server; it serves one connection
            while alive "$pid" && [ $((SECONDS - started)) -lt "$pair_timeout" ] \
                    && ! line_in "$table.$2.done" "$test" >/dev/null; do pause 0.02; done
            for _ in 1 2 3 4 5 6 7 8 9 10; do  # a server ends by itself once served
                alive "$pid" || break
                pause 0.1
            done
        else
            echo "$test failed" >> "$table.$2.port"
        fi
        if alive "$pid"; then kill "$pid"; fi
        wait "$pid" 2>/dev/null
        port=$((port + 1))
    done
}

wait_port() {  # INDEX TEST: the server's line for TEST; "failed" once the servers ended
    local deadline=$((SECONDS + pair_timeout))
    until line_in "$table.$1.port" "$2"; do
        if [ -e "$table.servers-ended" ]; then  # read again: it may have come just before
            line_in "$table.$1.port" "$2" || echo "$2 failed"
            return 0
        fi
        [ "$SECONDS" -ge "$deadline" ] && return 1
        pause 0.02
    done
}

measure() {  # INDEX SERVER CLIENT ADDR: each test's block, a failure marker if it failed
    local spec test size iterations port rc
    for spec in $PG_SWEEP_TESTS; do
        IFS=: read -r test size iterations <<< "$spec"
        echo "# perfguard sweep server=$2 client=$3 test=$test size=$size"
        port=$(wait_port "$1" "$test") || port="$test timeout"
        port=${port#* }
        case $port in
            failed) echo "# perfguard sweep failed rc=1" ;;
            timeout) echo "# perfguard sweep failed rc=124"
                     echo "perfguard: no server for $2-$3 $test in ${pair_timeout}s" >&2 ;;
            *) timeout -k 5 "$test_timeout" \
                   $PG_SWEEP_COMMAND -t "$test" -s "$size" -n "$iterations" -p "$port" "$4" \
                   </dev/null
               rc=$?
               [ $rc -ne 0 ] && echo "# perfguard sweep failed rc=$rc" ;;
        esac
        echo "$test done" >> "$table.$1.done"
    done
    echo end >> "$table.$1.done"
}

while read -r slot index server client addr <&3; do
    if [ "$role" = server ] && [ "$server" = "$me" ]; then
        serve "$slot" "$index" >> "$table.$index.server" 2>&1
    elif [ "$role" = client ] && [ "$client" = "$me" ]; then
        measure "$index" "$server" "$client" "$addr" > "$table.$index.out" 2> "$table.$index.err"
    fi
done 3< "$table"
