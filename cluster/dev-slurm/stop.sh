#!/usr/bin/env bash
# Stop the local SLURM that cluster/dev-slurm/start.sh started under SLURM_ROOT (default
# ./.slurm-local): cancel its jobs, then stop slurmd, slurmctld and its private munged by the PID
# files in SLURM_ROOT. A PID is signalled only if it still belongs to the expected program, so
# nothing this script did not start is touched. State stays in SLURM_ROOT (delete it for a clean
# cluster; job ids then restart at 1). Pass --purge to delete SLURM_ROOT afterwards.
set -uo pipefail

log() { echo "dev-slurm: $*" >&2; }

SLURM_ROOT="${SLURM_ROOT:-$PWD/.slurm-local}"
if ! [ -d "$SLURM_ROOT" ]; then
    log "nothing to stop: $SLURM_ROOT does not exist"
    exit 0
fi
SLURM_ROOT="$(cd "$SLURM_ROOT" && pwd)"
export SLURM_CONF="$SLURM_ROOT/etc/slurm.conf"

# PID from a PID file, only if that process is still the program we started.
owned_pid() {
    local file="$1" program="$2" pid
    [ -s "$file" ] || return 1
    pid="$(cat "$file")"
    [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm")" = "$program" ] || return 1
    echo "$pid"
}

stop_pid() {
    local pid="$1" name="$2"
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || { log "stopped $name ($pid)"; return 0; }; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null && log "killed $name ($pid) after 15 s"
}

# Our cluster's jobs first (their processes would outlive slurmd otherwise).
if owned_pid "$SLURM_ROOT/run/slurmctld.pid" slurmctld >/dev/null; then
    if [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
        scancel --full $(squeue -h -o %i) 2>/dev/null
        for _ in $(seq 60); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
        log "cancelled the cluster's jobs"
    fi
fi

pid="$(owned_pid "$SLURM_ROOT/run/slurmd.pid" slurmd)" && stop_pid "$pid" slurmd
pid="$(owned_pid "$SLURM_ROOT/run/slurmctld.pid" slurmctld)" && stop_pid "$pid" slurmctld
pid="$(owned_pid "$SLURM_ROOT/munge/munged.pid" munged)" && stop_pid "$pid" munged

if [ "${1:-}" = "--purge" ]; then
    rm -rf "$SLURM_ROOT"
    log "removed $SLURM_ROOT"
fi
exit 0
