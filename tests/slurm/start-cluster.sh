#!/usr/bin/env bash
# A single-node SLURM test cluster from Debian's packages (slurmctld, slurmd, munge),
# with 4 GPUs of type a100 declared on FAKE device files (symlinks to /dev/null):
# SLURM schedules and isolates them like real GPUs, but there is no GPU behind them.
# Partitions: cpu (default) and gpu. Needs root. Idempotent: each start is a new, empty cluster.
set -euo pipefail
host=$(hostname -s)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
for i in 0 1 2 3; do ln -sfn /dev/null "/dev/servelab-fake-gpu$i"; done
mem_mb=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 2048 ))

# the config lives at /etc/slurm: the executor plugin's job step clears SLURM_CONF
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=servelab-test
SlurmctldHost=${host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=3600
GresTypes=gpu
NodeName=${host} CPUs=$(nproc) RealMemory=${mem_mb} Gres=gpu:a100:4 State=UNKNOWN
PartitionName=cpu Nodes=${host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=${host} MaxTime=INFINITE State=UP
CONF
cat > /etc/slurm/gres.conf <<CONF
NodeName=${host} Name=gpu Type=a100 File=/dev/servelab-fake-gpu[0-3]
CONF

if ! pgrep -x munged >/dev/null; then
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; }
  chown munge:munge /etc/munge/munge.key /run/munge 2>/dev/null || true
  chmod 400 /etc/munge/munge.key
  su -s /bin/sh munge -c "munged" 2>/dev/null || munged --force
fi
# start empty: jobs kept in the saved state of an earlier, killed run (a session's
# machine outlives its processes) would hold the node and leave new jobs pending
for daemon in slurmctld slurmd; do
  pkill -x "$daemon" || true
  for _ in $(seq 1 40); do pgrep -x "$daemon" >/dev/null || break; sleep 0.25; done
done
rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*
slurmctld -c
slurmd -c
for _ in $(seq 1 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -1 || true)
  case "$state" in idle*|mix*|alloc*) echo "slurm test cluster up: node $host $state"; exit 0 ;; esac
  sleep 0.5
done
echo "slurm test cluster did not come up (node state: ${state:-none}):" >&2
tail -5 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
