#!/usr/bin/env bash
# Bring up a single-node Slurm cluster with accounting on this machine (Debian 12, root, no systemd):
# munge -> MariaDB -> slurmdbd -> slurmctld -> slurmd, following shared/notes/slurm-local.md.
#
# Idempotent: packages are installed only if missing, daemons that are already running (PID in their
# pid file alive and named as expected) are adopted, not restarted. Every daemon this script starts is
# recorded as ${SLURM_LOCAL_STATE}/<daemon>.pid so that slurm/local_down.sh can stop it by PID.
#
# Environment (defaults follow the notes):
#   SLURM_LOCAL_STATE    pid/state folder                   (/var/run/cb-slurm)
#   SLURM_LOCAL_LOG_DIR  daemon logs                        (/var/log/slurm)
#   SLURM_LOCAL_SPOOL    parent of slurmctld/ and slurmd/   (/var/spool)
#   SLURM_LOCAL_CLUSTER  ClusterName                        (ci)
#   SLURM_LOCAL_TIMEOUT  seconds to wait for each daemon    (60)
#   SLURM_LOCAL_NO_APT   set to 1 to never call apt-get     (unset)
# /etc/slurm is fixed: client commands (sinfo, sbatch, ...) read /etc/slurm/slurm.conf.
#
# Exit status 0 when the node is idle; otherwise non-zero with one line "local_up: FAILED: <reason>".
set -Eeuo pipefail

STATE_DIR=${SLURM_LOCAL_STATE:-/var/run/cb-slurm}
LOG_DIR=${SLURM_LOCAL_LOG_DIR:-/var/log/slurm}
SPOOL=${SLURM_LOCAL_SPOOL:-/var/spool}
CLUSTER=${SLURM_LOCAL_CLUSTER:-ci}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
CONF_DIR=/etc/slurm
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)

# Pid files written by the daemons themselves.
MUNGED_PIDFILE=/run/munge/munged.pid
MARIADB_PIDFILE=/run/mysqld/mysqld.pid
SLURMDBD_PIDFILE=/run/slurmdbd.pid
SLURMCTLD_PIDFILE=/run/slurmctld.pid
SLURMD_PIDFILE=/run/slurmd.pid

START=$SECONDS
CURRENT_STEP="start"

die() {
    echo "local_up: FAILED: $*" >&2
    exit 1
}
on_err() {
    local rc=$? line=$1
    echo "local_up: FAILED: step '${CURRENT_STEP}': '${BASH_COMMAND}' exited ${rc} (line ${line})" >&2
    exit "${rc}"
}
trap 'on_err ${LINENO}' ERR

log() { printf 'local_up: [%3ds] %s\n' "$((SECONDS - START))" "$*"; }

[[ ${EUID} -eq 0 ]] || die "must run as root"
[[ ${TIMEOUT} =~ ^[0-9]+$ ]] || die "SLURM_LOCAL_TIMEOUT must be an integer (got '${TIMEOUT}')"

# ---------------------------------------------------------------- helpers
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

# running_pid NAME DAEMON_PIDFILE: our record first, then the daemon's own pid file.
running_pid() {
    live_pid "$1" "${STATE_DIR}/$1.pid" || live_pid "$1" "$2"
}

# record_pid NAME DAEMON_PIDFILE: wait (daemons write their pid file after forking) and record it.
record_pid() {
    local pid deadline=$((SECONDS + 15))
    until pid=$(live_pid "$1" "$2"); do
        ((SECONDS < deadline)) || die "$1 is not running after start (pid file $2; see ${LOG_DIR})"
        sleep 0.2
    done
    echo "${pid}" >"${STATE_DIR}/$1.pid"
}

# wait_for SECONDS DESCRIPTION CMD...: poll CMD until it succeeds (probes bound their own time).
wait_for() {
    local limit=$1 what=$2
    shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "timed out after ${limit}s waiting for ${what}"
        sleep 0.5
    done
}

munge_ok() { timeout 5 munge -n | timeout 5 unmunge; }
db_ok() { timeout 5 mariadb-admin ping; }
dbd_ok() { timeout 10 sacctmgr -n list cluster; }
ctld_up() { timeout 10 scontrol ping | grep -q 'is UP'; }
node_state() { timeout 10 sinfo -h -N -o '%t' 2>/dev/null | head -n1; }
node_ready() { [[ $(node_state) =~ ^(idle|mix|alloc|comp)$ ]]; }

# ---------------------------------------------------------------- packages
CURRENT_STEP="packages"
mkdir -p "${STATE_DIR}" "${LOG_DIR}"
missing=()
for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "${p}" 2>/dev/null || true) == installed ]] || missing+=("${p}")
done
if ((${#missing[@]})); then
    [[ -z ${SLURM_LOCAL_NO_APT:-} ]] || die "missing packages (${missing[*]}) and SLURM_LOCAL_NO_APT is set"
    log "installing ${missing[*]} (log: ${LOG_DIR}/apt.log)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >>"${LOG_DIR}/apt.log" 2>&1 || die "apt-get update failed (see ${LOG_DIR}/apt.log)"
    apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${missing[@]}" >>"${LOG_DIR}/apt.log" 2>&1 ||
        die "apt-get install ${missing[*]} failed (see ${LOG_DIR}/apt.log)"
else
    log "packages present"
fi

CURRENT_STEP="setup"
HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(awk '/^MemAvailable:/ {printf "%d", $2 * 0.9 / 1024}' /proc/meminfo)
[[ -n ${HOST} ]] || die "hostname -s is empty"
((MEM > 0)) || die "could not read MemAvailable from /proc/meminfo"

mkdir -p "${CONF_DIR}" "${SPOOL}/slurmctld" "${SPOOL}/slurmd"

# ---------------------------------------------------------------- munge
CURRENT_STEP="munge"
if pid=$(running_pid munged "${MUNGED_PIDFILE}"); then
    log "munged already running (pid ${pid})"
    echo "${pid}" >"${STATE_DIR}/munged.pid"
else
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    # --force: a munged killed earlier may have left its socket behind; we checked none is alive.
    runuser -u munge -- /usr/sbin/munged --force >>"${LOG_DIR}/munged.start.log" 2>&1 ||
        die "munged failed to start (see ${LOG_DIR}/munged.start.log, /var/log/munge/munged.log)"
    record_pid munged "${MUNGED_PIDFILE}"
    wait_for "${TIMEOUT}" "munge -n | unmunge" munge_ok
    log "munged started (pid $(cat "${STATE_DIR}/munged.pid"))"
fi
wait_for "${TIMEOUT}" "munge -n | unmunge" munge_ok

# ---------------------------------------------------------------- MariaDB
CURRENT_STEP="mariadb"
if pid=$(running_pid mariadbd "${MARIADB_PIDFILE}"); then
    log "mariadbd already running (pid ${pid})"
    echo "${pid}" >"${STATE_DIR}/mariadbd.pid"
else
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"${LOG_DIR}/mariadb.log" 2>&1 ||
            die "mariadb-install-db failed (see ${LOG_DIR}/mariadb.log)"
    fi
    setsid /usr/sbin/mariadbd --user=mysql --pid-file="${MARIADB_PIDFILE}" \
        </dev/null >>"${LOG_DIR}/mariadb.log" 2>&1 &
    # Recorded at once (not a forking daemon; its pid file appears only once it is ready),
    # so local_down.sh can stop it even if the wait below fails.
    echo "$!" >"${STATE_DIR}/mariadbd.pid"
    wait_for "${TIMEOUT}" "mariadb-admin ping" db_ok
    record_pid mariadbd "${MARIADB_PIDFILE}"
    log "mariadbd started (pid $(cat "${STATE_DIR}/mariadbd.pid"))"
fi
wait_for "${TIMEOUT}" "mariadb-admin ping" db_ok

# Database and user; the password is kept in slurmdbd.conf (mode 600) and reused on later runs.
DB_PASS=""
if [[ -r ${CONF_DIR}/slurmdbd.conf ]]; then
    DB_PASS=$(sed -n 's/^StoragePass=//p' "${CONF_DIR}/slurmdbd.conf" | head -n1)
fi
if [[ ! ${DB_PASS} =~ ^[A-Za-z0-9]{16,}$ ]]; then
    DB_PASS=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 24 || true)
fi
mariadb -u root <<SQL || die "could not create database slurm_acct_db / user slurm (see ${LOG_DIR}/mariadb.log)"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '${DB_PASS}';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '${DB_PASS}';
GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL

# ---------------------------------------------------------------- config files
CURRENT_STEP="config"
# install_if_changed SRC DEST MODE: replace DEST only when the content differs.
install_if_changed() {
    if ! cmp -s "$1" "$2"; then
        install -m "$3" -o root -g root "$1" "$2"
    fi
    rm -f "$1"
}

tmp=$(mktemp)
cat >"${tmp}" <<EOF
# Written by slurm/local_up.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=${LOG_DIR}/slurmdbd.log
PidFile=${SLURMDBD_PIDFILE}
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=${DB_PASS}
StorageLoc=slurm_acct_db
EOF
install_if_changed "${tmp}" "${CONF_DIR}/slurmdbd.conf" 600
chmod 600 "${CONF_DIR}/slurmdbd.conf"

# slurm.conf is rewritten only while slurmctld is down (a running controller keeps its config).
if running_pid slurmctld "${SLURMCTLD_PIDFILE}" >/dev/null && [[ -s ${CONF_DIR}/slurm.conf ]]; then
    log "slurmctld running: keeping ${CONF_DIR}/slurm.conf"
else
    tmp=$(mktemp)
    cat >"${tmp}" <<EOF
# Written by slurm/local_up.sh: single-node cluster with accounting (see shared/notes/slurm-local.md)
ClusterName=${CLUSTER}
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/filetxt
JobCompLoc=${LOG_DIR}/jobcomp.log
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=300
SlurmctldPidFile=${SLURMCTLD_PIDFILE}
SlurmdPidFile=${SLURMD_PIDFILE}
StateSaveLocation=${SPOOL}/slurmctld
SlurmdSpoolDir=${SPOOL}/slurmd
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    install_if_changed "${tmp}" "${CONF_DIR}/slurm.conf" 644
fi

# ---------------------------------------------------------------- slurmdbd
CURRENT_STEP="slurmdbd"
if pid=$(running_pid slurmdbd "${SLURMDBD_PIDFILE}"); then
    log "slurmdbd already running (pid ${pid})"
    echo "${pid}" >"${STATE_DIR}/slurmdbd.pid"
else
    /usr/sbin/slurmdbd >>"${LOG_DIR}/slurmdbd.start.log" 2>&1 ||
        die "slurmdbd failed to start (see ${LOG_DIR}/slurmdbd.log)"
    record_pid slurmdbd "${SLURMDBD_PIDFILE}"
    wait_for "${TIMEOUT}" "sacctmgr -n list cluster (slurmdbd, see ${LOG_DIR}/slurmdbd.log)" dbd_ok
    log "slurmdbd started (pid $(cat "${STATE_DIR}/slurmdbd.pid"))"
fi
wait_for "${TIMEOUT}" "sacctmgr -n list cluster (slurmdbd, see ${LOG_DIR}/slurmdbd.log)" dbd_ok

# ---------------------------------------------------------------- slurmctld
CURRENT_STEP="slurmctld"
if pid=$(running_pid slurmctld "${SLURMCTLD_PIDFILE}"); then
    log "slurmctld already running (pid ${pid})"
    echo "${pid}" >"${STATE_DIR}/slurmctld.pid"
else
    /usr/sbin/slurmctld >>"${LOG_DIR}/slurmctld.start.log" 2>&1 ||
        die "slurmctld failed to start (see ${LOG_DIR}/slurmctld.log)"
    record_pid slurmctld "${SLURMCTLD_PIDFILE}"
    wait_for "${TIMEOUT}" "scontrol ping UP (see ${LOG_DIR}/slurmctld.log)" ctld_up
    log "slurmctld started (pid $(cat "${STATE_DIR}/slurmctld.pid"))"
fi
wait_for "${TIMEOUT}" "scontrol ping UP (see ${LOG_DIR}/slurmctld.log)" ctld_up

# ---------------------------------------------------------------- slurmd
CURRENT_STEP="slurmd"
if pid=$(running_pid slurmd "${SLURMD_PIDFILE}"); then
    log "slurmd already running (pid ${pid})"
    echo "${pid}" >"${STATE_DIR}/slurmd.pid"
else
    /usr/sbin/slurmd >>"${LOG_DIR}/slurmd.start.log" 2>&1 ||
        die "slurmd failed to start (see ${LOG_DIR}/slurmd.log)"
    record_pid slurmd "${SLURMD_PIDFILE}"
    log "slurmd started (pid $(cat "${STATE_DIR}/slurmd.pid"))"
fi

wait_start=$SECONDS
deadline=$((SECONDS + TIMEOUT))
resumed=0
until node_ready; do
    state=$(node_state || true)
    if ((!resumed && SECONDS - wait_start >= 5)) && [[ ${state} =~ ^(drain|drng|down) ]]; then
        # A node drained/down from an earlier run (e.g. killed jobs) does not return by itself.
        scontrol update NodeName="${HOST}" State=RESUME >/dev/null 2>&1 || true
        resumed=1
    fi
    if ((SECONDS >= deadline)); then
        reason=$(sinfo -h -R -o '%E' 2>/dev/null | head -n1 || true)
        die "node ${HOST} not idle after ${TIMEOUT}s (state '${state:-none}'${reason:+, reason: ${reason}}; see ${LOG_DIR}/slurmd.log)"
    fi
    sleep 0.5
done

CURRENT_STEP="done"
log "cluster '${CLUSTER}' up: node ${HOST} $(node_state) (CPUs=${CPUS}), partition debug; elapsed $((SECONDS - START)) s"
