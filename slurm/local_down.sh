#!/usr/bin/env bash
# Stop the local single-node Slurm started by slurm/local_up.sh: slurmd, slurmctld, slurmdbd, mariadbd,
# munged, in that order. Each daemon is stopped by the PID recorded in ${SLURM_LOCAL_STATE}/<daemon>.pid
# (falling back to the daemon's own pid file), never by process name. A PID is only signalled when
# /proc/<pid>/comm is the expected daemon name, so a stale or recycled PID is never hit.
# SIGTERM first, SIGKILL after SLURM_LOCAL_STOP_TIMEOUT seconds (default 30). Idempotent.
# Then the slurm.conf local_up.sh wrote is moved aside (kept as slurm.conf.local-down; local_up
# writes it again): with it, every client command (scontrol, squeue) waits ~9 s for the stopped
# controller, and Snakemake's Slurm executor plugin runs `scontrol show config` when it is
# imported, i.e. at every `snakemake` start on the machine, Slurm used or not. Without it they
# fail at once.
#
# Environment: SLURM_LOCAL_STATE (/var/run/cb-slurm), SLURM_LOCAL_STOP_TIMEOUT (30).
set -euo pipefail

STATE_DIR=${SLURM_LOCAL_STATE:-/var/run/cb-slurm}
STOP_TIMEOUT=${SLURM_LOCAL_STOP_TIMEOUT:-30}
START=$SECONDS
failed=0

[[ ${EUID} -eq 0 ]] || {
    echo "local_down: FAILED: must run as root" >&2
    exit 1
}
[[ ${STOP_TIMEOUT} =~ ^[0-9]+$ ]] || {
    echo "local_down: FAILED: SLURM_LOCAL_STOP_TIMEOUT must be an integer" >&2
    exit 1
}

log() { printf 'local_down: [%3ds] %s\n' "$((SECONDS - START))" "$*"; }

# live_pid NAME PIDFILE: print the PID in PIDFILE if that process is alive and its comm is NAME.
live_pid() {
    local name=$1 file=$2 pid comm
    [[ -r ${file} ]] || return 1
    pid=$(tr -dc '0-9' <"${file}" 2>/dev/null || true)
    [[ -n ${pid} && -r /proc/${pid}/comm ]] || return 1
    comm=$(cat "/proc/${pid}/comm" 2>/dev/null || true)
    [[ ${comm} == "${name}" ]] || return 1
    echo "${pid}"
}

# alive PID NAME: the process exists, is not a zombie, and still has the expected name.
alive() {
    local stat
    [[ -r /proc/$1/stat ]] || return 1
    [[ $(cat "/proc/$1/comm" 2>/dev/null || true) == "$2" ]] || return 1
    stat=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null || true)
    [[ ${stat} != Z ]]
}

# stop NAME DAEMON_PIDFILE
stop() {
    local name=$1 daemon_pidfile=$2 pid deadline
    if ! pid=$(live_pid "${name}" "${STATE_DIR}/${name}.pid") &&
        ! pid=$(live_pid "${name}" "${daemon_pidfile}"); then
        log "${name}: not running"
        rm -f "${STATE_DIR}/${name}.pid"
        return 0
    fi
    kill -TERM "${pid}" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "${pid}" "${name}" && ((SECONDS < deadline)); do
        sleep 0.2
    done
    if alive "${pid}" "${name}"; then
        log "${name}: pid ${pid} still alive after ${STOP_TIMEOUT}s, sending SIGKILL"
        kill -KILL "${pid}" 2>/dev/null || true
        deadline=$((SECONDS + 10))
        while alive "${pid}" "${name}" && ((SECONDS < deadline)); do
            sleep 0.2
        done
        if alive "${pid}" "${name}"; then
            echo "local_down: FAILED: ${name} (pid ${pid}) survived SIGKILL" >&2
            failed=1
            return 0
        fi
    fi
    log "${name}: stopped (pid ${pid})"
    rm -f "${STATE_DIR}/${name}.pid"
}

stop slurmd /run/slurmd.pid
stop slurmctld /run/slurmctld.pid
stop slurmdbd /run/slurmdbd.pid
stop mariadbd /run/mysqld/mysqld.pid
stop munged /run/munge/munged.pid

if ((failed)); then
    exit 1
fi
CONF=/etc/slurm/slurm.conf
if [[ -f ${CONF} ]] && head -1 "${CONF}" | grep -q '^# Written by slurm/local_up.sh'; then
    mv -f "${CONF}" "${CONF}.local-down"
    log "moved ${CONF} aside to ${CONF}.local-down (local_up.sh writes it again)"
fi
log "all daemons stopped; elapsed $((SECONDS - START)) s"
