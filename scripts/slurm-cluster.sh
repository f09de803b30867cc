#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for lcx's Slurm executor
# tests: munged, slurmctld and slurmd from the OS packages, with their
# config and state in one folder.
#
#   scripts/slurm-cluster.sh install   # apt-get install munge slurmctld slurmd slurm-client (when missing)
#   scripts/slurm-cluster.sh start     # prints the folder; source "$DIR/env" for SLURM_CONF
#   scripts/slurm-cluster.sh stop
#
# LCX_SLURM_DIR names the folder (default /tmp/lcx-slurm). Runs as root
# (slurmd must, to start jobs as their users); munged runs as `munge`.
set -euo pipefail

dir=${LCX_SLURM_DIR:-/tmp/lcx-slurm}
conf=$dir/slurm.conf

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
    && command -v sbatch >/dev/null && command -v munged >/dev/null; then
    return
  fi
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq \
    munge slurmctld slurmd slurm-client >/dev/null
}

munge_up() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    return
  fi
  as_root mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  if [ ! -s /etc/munge/munge.key ]; then
    as_root dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  as_root chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
  as_root chmod 0700 /etc/munge /var/log/munge /var/lib/munge
  as_root chmod 0400 /etc/munge/munge.key
  as_root chmod 0755 /run/munge
  as_root runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
    sleep 0.1
  done
  echo "slurm-cluster: munged did not start (see /var/log/munge/munged.log)" >&2
  exit 1
}

start() {
  install
  munge_up
  host=$(hostname -s)
  cpus=$(nproc)
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  mkdir -p "$dir/state" "$dir/spool"
  cat >"$conf" <<EOF
# Written by scripts/slurm-cluster.sh: one node, no accounting, no cgroups.
ClusterName=lcx
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=${LCX_SLURM_CTLD_PORT:-6817}
SlurmdPort=${LCX_SLURM_D_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Start a job as soon as it is submitted: by default slurmctld waits up to
# 3 s after a job ends before it schedules the next (measured here).
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=300
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  echo "export SLURM_CONF=$conf" >"$dir/env"
  export SLURM_CONF=$conf
  if ! scontrol ping >/dev/null 2>&1; then
    as_root slurmctld -f "$conf"
  fi
  if ! pgrep -f "slurmd -f $conf" >/dev/null; then
    as_root slurmd -f "$conf" -N "$host"
  fi
  for _ in $(seq 100); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
    case "$state" in
      idle*|mixed*|allocated*) echo "$dir"; return ;;
      down*|drain*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
  done
  echo "slurm-cluster: node $host did not become idle (state: ${state:-none}); logs in $dir" >&2
  exit 1
}

stop() {
  export SLURM_CONF=$conf
  if [ -f "$conf" ]; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    if [ -f "$pidfile" ]; then
      as_root kill "$(cat "$pidfile")" 2>/dev/null || true
    fi
  done
  sleep 0.5
  as_root pkill -f "slurmd -f $conf" 2>/dev/null || true
  as_root pkill -f "slurmctld -f $conf" 2>/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
