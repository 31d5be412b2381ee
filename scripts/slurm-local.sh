#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for `pqtls batch slurm` to try and to test with
# (docs/batch.md). Run as root.
#
#   scripts/slurm-local.sh start    install slurm-wlm + munge with apt if missing, write the
#                                   configuration, start munged, slurmctld and slurmd, wait
#                                   (≤ 60 s) until `sinfo` says the node is idle. Idempotent:
#                                   a running cluster is left as it is.
#   scripts/slurm-local.sh stop     stop the daemons this script started; nothing is left running.
#   scripts/slurm-local.sh status   what runs, and `sinfo`.
#
# State (configuration, logs, spool, job completion log) lives in $PQTLS_SLURM_DIR
# (default /var/lib/pqtls-slurm). The configuration is also written to /etc/slurm/slurm.conf so
# that sbatch, squeue, sacct and sinfo find it without SLURM_CONF; a slurm.conf there that this
# script did not write is never overwritten (the script refuses: that machine has its own Slurm).
#
# The node: this machine's CPUs and memory as `slurmd -C` reports them, one partition `pqtls`
# (default), SelectType=select/cons_tres (each task gets its own cores),
# ProctrackType=proctrack/linuxproc and TaskPlugin=task/none (no cgroups needed, so it runs in
# containers). Without slurmdbd, job accounting is the job completion log
# (JobCompType=jobcomp/filetxt): `sacct -c` reads it (state and exit code of every finished
# job and array task).
set -euo pipefail

STATE=${PQTLS_SLURM_DIR:-/var/lib/pqtls-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by pqtls scripts/slurm-local.sh"
WAIT_S=60

die() { echo "slurm-local: $*" >&2; exit 1; }
say() { echo "slurm-local: $*" >&2; }

[ "$(id -u)" = 0 ] || die "run as root (the daemons run as root on this one-node cluster)"

install_packages() {
  local need=()
  command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  [ ${#need[@]} -eq 0 ] && return 0
  say "installing ${need[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${need[@]}" >/dev/null; then
    apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${need[@]}" >/dev/null \
      || die "could not install ${need[*]} with apt-get (is the package registry reachable?)"
  fi
}

# The pid in $1 names a live process.
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_config() {
  if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script: this machine has its own Slurm; use it (sinfo) rather than a local cluster"
  fi
  mkdir -p "$STATE"/ctld "$STATE"/d "$STATE"/log /etc/slurm
  local node host
  # "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24152"
  node=$(slurmd -C | head -1) || die "slurmd -C failed"
  case "$node" in NodeName=*) ;; *) die "unexpected output of slurmd -C: $node" ;; esac
  host=$(hostname -s)
  local tmp="$STATE/slurm.conf.tmp"
  cat >"$tmp" <<EOF
$MARK (state in $STATE)
ClusterName=pqtls-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/jobcomp.txt
# A requeued or cancelled task gets SIGTERM, then SIGKILL after KillWait seconds.
KillWait=10
MinJobAge=600
MaxArraySize=10001
$node State=UNKNOWN
PartitionName=pqtls Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$tmp" "$STATE/slurm.conf"
  cp "$STATE/slurm.conf" "$CONF"
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    return 0 # a munged answers (this script's or the system's)
  fi
  [ -f /etc/munge/munge.key ] || { say "creating /etc/munge/munge.key"; mungekey --create >/dev/null 2>&1 || /usr/sbin/create-munge-key -f >/dev/null; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >/dev/null 2>&1 \
    || die "munged did not start (see /var/log/munge/munged.log)"
  echo "/run/munge/munged.pid" >"$STATE/munged.started"
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged does not answer (see /var/log/munge/munged.log)"
}

node_state() { sinfo -h -N -o '%T' 2>/dev/null | head -1; }

start() {
  install_packages
  if alive "$STATE/slurmctld.pid" && alive "$STATE/slurmd.pid" && [ "$(node_state)" = idle ]; then
    say "already running: $(sinfo -h -o '%P %D %T %C' | head -1)"
    return 0
  fi
  write_config
  start_munge
  alive "$STATE/slurmctld.pid" || slurmctld -f "$CONF" || die "slurmctld did not start (see $STATE/log/slurmctld.log)"
  alive "$STATE/slurmd.pid" || slurmd -f "$CONF" || die "slurmd did not start (see $STATE/log/slurmd.log)"
  local t0=$SECONDS s=""
  while [ $((SECONDS - t0)) -lt $WAIT_S ]; do
    s=$(node_state)
    case "$s" in
      idle | mixed | allocated) say "up: partition pqtls, $(sinfo -h -o '%D node, %c CPUs, %T' | head -1) (state in $STATE)"; return 0 ;;
      down* | drain*) scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
  done
  die "the node is not idle after ${WAIT_S} s (sinfo says '${s:-nothing}'); see $STATE/log/slurmctld.log and slurmd.log"
}

# Stops the process whose pid is in file $1 (TERM, then KILL after 10 s).
stop_pid() {
  local f=$1 name=$2 pid
  alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || { rm -f "$f"; say "stopped $name ($pid)"; return 0; }; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
  say "killed $name ($pid)"
}

stop() {
  # Jobs still queued or running are cancelled first (slurmd leaves running steps alone when it
  # stops): nothing of this cluster keeps running.
  if alive "$STATE/slurmctld.pid"; then
    local jobs
    jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      say "cancelling jobs $jobs"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 300); do [ -z "$(squeue -h -o '%A' 2>/dev/null)" ] && break; sleep 0.1; done
    fi
  fi
  stop_pid "$STATE/slurmd.pid" slurmd
  stop_pid "$STATE/slurmctld.pid" slurmctld
  if [ -f "$STATE/munged.started" ]; then
    stop_pid "$(cat "$STATE/munged.started")" munged
    rm -f "$STATE/munged.started"
  fi
}

status() {
  local up=0
  for d in slurmctld slurmd; do
    if alive "$STATE/$d.pid"; then echo "$d: running ($(cat "$STATE/$d.pid"))"; up=$((up + 1)); else echo "$d: not running"; fi
  done
  if [ $up = 2 ]; then sinfo; else return 1; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: scripts/slurm-local.sh start|stop|status" ;;
esac
