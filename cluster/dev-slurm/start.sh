#!/usr/bin/env bash
# A single-node SLURM on localhost for development and CI: munged + slurmctld + slurmd, everything
# (config, state, logs, PID files, munge socket) under one directory, nothing in /etc or systemd.
#
#   eval "$(cluster/dev-slurm/start.sh)"       # prints `export SLURM_CONF=...`; logs go to stderr
#   sinfo; seqphase submit ...
#   cluster/dev-slurm/stop.sh                  # stops exactly the daemons this script started
#
# Environment (all optional):
#   SLURM_ROOT        where everything lives (default: ./.slurm-local, made absolute)
#   SLURM_CPUS        CPUs the node declares (default 8, may exceed the real cores: each worker job
#                     takes one; SlurmdParameters=config_overrides keeps the node from draining)
#   SLURM_PARTITION   partition name (default debug)
#   SLURM_NO_INSTALL  1 = never apt-get install; fail if slurm-wlm/munge are missing
#
# Requirements: root (the daemons run as root, munged as user munge), Debian/Ubuntu packages
# slurm-wlm and munge (installed with apt-get when missing). The ports are the first free pair from
# 6817 up, so a second cluster (another checkout, a test run) can run side by side. munged is a
# private instance with its own socket, so a system munged is neither used nor touched.
# Exit codes: 0 running; 3 cannot install or start (reason on stderr); 1 other errors.
set -euo pipefail

log() { echo "dev-slurm: $*" >&2; }
die() { log "$*"; exit 3; }

SLURM_ROOT="${SLURM_ROOT:-$PWD/.slurm-local}"
mkdir -p "$SLURM_ROOT"
SLURM_ROOT="$(cd "$SLURM_ROOT" && pwd)"
SLURM_CPUS="${SLURM_CPUS:-8}"
SLURM_PARTITION="${SLURM_PARTITION:-debug}"
CONF="$SLURM_ROOT/etc/slurm.conf"
RUN="$SLURM_ROOT/run"

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if alive "$RUN/slurmctld.pid" && alive "$RUN/slurmd.pid" && alive "$SLURM_ROOT/munge/munged.pid"; then
    log "already running under $SLURM_ROOT"
    echo "export SLURM_CONF=$CONF"
    exit 0
fi

# -- packages -------------------------------------------------------------------------------------
if ! [ -x /usr/sbin/slurmctld ] || ! [ -x /usr/sbin/slurmd ] || ! [ -x /usr/sbin/munged ] \
        || ! command -v sbatch >/dev/null; then
    [ "${SLURM_NO_INSTALL:-0}" = 1 ] && die "slurm-wlm/munge are not installed and SLURM_NO_INSTALL=1"
    [ "$(id -u)" = 0 ] || die "slurm-wlm/munge are not installed and installing them needs root"
    command -v apt-get >/dev/null || die "slurm-wlm/munge are not installed and there is no apt-get"
    log "installing slurm-wlm and munge with apt-get"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } >&2 \
        || die "apt-get install slurm-wlm munge failed"
fi
[ "$(id -u)" = 0 ] || die "the local SLURM runs its daemons as root; run this script as root"
id munge >/dev/null 2>&1 || die "there is no user munge (is the munge package installed?)"

mkdir -p "$SLURM_ROOT"/{etc,run,log,spool/ctld,spool/d,munge}

# -- a private munged -----------------------------------------------------------------------------
MUNGE="$SLURM_ROOT/munge"
chown munge:munge "$MUNGE"
chmod 0755 "$MUNGE"   # munged wants the socket directory traversable by all
if ! [ -s "$MUNGE/munge.key" ]; then
    if [ -s /etc/munge/munge.key ]; then
        cp /etc/munge/munge.key "$MUNGE/munge.key"
    else
        dd if=/dev/urandom of="$MUNGE/munge.key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$MUNGE/munge.key"
    chmod 0400 "$MUNGE/munge.key"
fi
if ! alive "$MUNGE/munged.pid"; then
    runuser -u munge -- /usr/sbin/munged --socket="$MUNGE/munge.socket" --key-file="$MUNGE/munge.key" \
        --pid-file="$MUNGE/munged.pid" --log-file="$MUNGE/munged.log" --seed-file="$MUNGE/munged.seed" \
        || die "munged did not start (see $MUNGE/munged.log)"
fi
munge -S "$MUNGE/munge.socket" -n | unmunge -S "$MUNGE/munge.socket" >/dev/null \
    || die "munge does not work (see $MUNGE/munged.log)"

# -- slurm.conf -----------------------------------------------------------------------------------
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -s "$CONF" ]; then
    CTLD_PORT="$(sed -n 's/^SlurmctldPort=//p' "$CONF")"
    SLURMD_PORT="$(sed -n 's/^SlurmdPort=//p' "$CONF")"
fi
if [ -z "${CTLD_PORT:-}" ] || ! port_free "$CTLD_PORT" || ! port_free "$SLURMD_PORT"; then
    CTLD_PORT=6817
    until port_free "$CTLD_PORT" && port_free "$((CTLD_PORT + 1))"; do
        CTLD_PORT=$((CTLD_PORT + 2))
        [ "$CTLD_PORT" -lt 7017 ] || die "no free pair of ports between 6817 and 7017"
    done
    SLURMD_PORT=$((CTLD_PORT + 1))
fi
MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
DEF_MEM=$(( MEM_MB / SLURM_CPUS < 1024 ? MEM_MB / SLURM_CPUS : 1024 ))
cat > "$CONF" <<EOF
# written by cluster/dev-slurm/start.sh
ClusterName=seqphasedev
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
StateSaveLocation=$SLURM_ROOT/spool/ctld
SlurmdSpoolDir=$SLURM_ROOT/spool/d
SlurmctldLogFile=$SLURM_ROOT/log/slurmctld.log
SlurmdLogFile=$SLURM_ROOT/log/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/filetxt
JobCompLoc=$SLURM_ROOT/log/jobcomp.txt
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$SLURM_CPUS Sockets=1 CoresPerSocket=$SLURM_CPUS ThreadsPerCore=1 RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$SLURM_PARTITION Nodes=localhost Default=YES MaxTime=INFINITE DefMemPerCPU=$DEF_MEM State=UP
EOF
export SLURM_CONF="$CONF"

# -- daemons --------------------------------------------------------------------------------------
alive "$RUN/slurmctld.pid" || /usr/sbin/slurmctld || die "slurmctld did not start (see $SLURM_ROOT/log/slurmctld.log)"
alive "$RUN/slurmd.pid" || /usr/sbin/slurmd -N localhost || die "slurmd did not start (see $SLURM_ROOT/log/slurmd.log)"
for _ in $(seq 120); do
    if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
        log "running under $SLURM_ROOT (ports $CTLD_PORT/$SLURMD_PORT, $SLURM_CPUS CPUs, partition $SLURM_PARTITION)"
        echo "export SLURM_CONF=$CONF"
        exit 0
    fi
    sleep 0.25
done
die "the node did not become idle within 30 s (see $SLURM_ROOT/log/)"
