"""A one-node SLURM cluster on this host for the ``cluster`` tests: munged, slurmctld and
slurmd (Debian's ``slurm-wlm``, ``munge``) in the foreground under a temporary folder, with
their own key, socket, ports, state and logs, so nothing of the host's (``/etc/slurm``,
``/etc/munge``, ``/run/munge``) is read or changed.  Clients (``sbatch``, ``squeue``,
``scancel``, submitit) find the cluster through ``SLURM_CONF``.

The configuration is the one docs/gpu-nodes.md gives for a single container host: root runs
every daemon (``SlurmUser=root``, ``SlurmdUser=root``), processes are tracked by their parent
ids (``proctrack/linuxproc``: no cgroups in a container), no task affinity (``task/none``),
cores are allocated by ``select/cons_tres``, and the one node, ``localhost``, has the CPUs
and memory ``slurmd -C`` finds.  ``KillWait=5``: a cancelled job's processes get SIGTERM,
then SIGKILL 5 s later.

On exit every job is cancelled and waited for, the daemons are stopped, and any process
still carrying the cluster's marker in its environment (a job's, a ``slurmstepd``) is killed."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from tests.mlflow_server import free_port
from tests.services import log_tails, require, start_daemon, stop_daemon, wait_until

#: Set in every daemon's environment (so in slurmstepd's) and in jobs': finds leftovers at the end.
MARKER = "SWIZZLEBENCH_TEST_SLURM"
BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
#: ``slurmd -C``'s fields that describe the node's hardware, copied into its NodeName line.
HARDWARE_FIELDS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
#: Seconds the cluster has to drain its jobs at the end (KillWait=5, plus slack).
DRAIN_TIMEOUT_S = 30.0


def node_hardware(slurmd: str) -> str:
    """The node's ``CPUs=.. Boards=.. ... RealMemory=..`` as ``slurmd -C`` reports them."""
    out = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
    found = dict(re.findall(r"(\w+)=(\S+)", out))
    missing = [f for f in HARDWARE_FIELDS if f not in found]
    if missing:
        raise RuntimeError(f"slurmd -C gave no {', '.join(missing)}: {out!r}")
    return " ".join(f"{f}={found[f]}" for f in HARDWARE_FIELDS)


def slurm_conf(root: Path, hardware: str, munge_socket: Path, ctld_port: int, slurmd_port: int) -> str:
    """slurm.conf of a one-node cluster on localhost whose files all live under ``root``."""
    return f"""\
ClusterName=swizzlebench
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class SlurmCluster:
    """A running one-node cluster: ``env`` points clients at it (``SLURM_CONF``)."""

    root: Path
    conf: Path
    bins: dict[str, str]
    daemons: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The variables a client (sbatch, a sweep with hydra/launcher=submitit_slurm) needs."""
        return {"SLURM_CONF": str(self.conf), MARKER: str(self.root)}

    @property
    def logs(self) -> list[Path]:
        return [self.root / name for name in ("munged.log", "slurmctld.log", "slurmd.log")]

    def run(self, name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A client command (``squeue``, ``scancel``...) against this cluster."""
        proc = subprocess.run([self.bins[name], *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **self.env})
        if check and proc.returncode:
            raise AssertionError(f"{name} {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}\n"
                                 f"{log_tails(self.logs)}")
        return proc

    def jobs(self) -> list[tuple[str, str, str]]:
        """(job id, name, state) of every job the controller still lists, ended ones included."""
        out = self.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T").stdout
        return [tuple(line.split("|")) for line in out.splitlines() if line]  # type: ignore[misc]

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-n", "localhost", "-o", "%T", check=False).stdout.strip()


def _start(cluster: SlurmCluster) -> None:
    root, bins = cluster.root, cluster.bins
    for sub in ("state", "spool", "munge"):
        (root / sub).mkdir(mode=0o700)
    key, socket = root / "munge" / "munge.key", root / "munge" / "munge.socket"
    subprocess.run([bins["mungekey"], "--create", "--keyfile", str(key)], check=True, capture_output=True)
    daemon_env = {**os.environ, MARKER: str(root)}
    munged = start_daemon([bins["munged"], "--foreground", "--force", f"--key-file={key}", f"--socket={socket}",
                           f"--pid-file={root}/munge/munged.pid", f"--seed-file={root}/munge/munged.seed",
                           f"--log-file={root}/munged.log"], root / "munged.log", env=daemon_env)
    cluster.daemons.append(munged)
    wait_until(socket.exists, "munged", cluster.logs, [munged])
    cluster.conf.write_text(slurm_conf(root, node_hardware(bins["slurmd"]), socket, free_port(), free_port()))
    daemon_env["SLURM_CONF"] = str(cluster.conf)
    ctld = start_daemon([bins["slurmctld"], "-D", "-c", "-f", str(cluster.conf)], root / "slurmctld.out",
                        env=daemon_env)
    cluster.daemons.append(ctld)
    slurmd = start_daemon([bins["slurmd"], "-D", "-N", "localhost", "-f", str(cluster.conf)], root / "slurmd.out",
                          env=daemon_env)
    cluster.daemons.append(slurmd)
    wait_until(lambda: cluster.node_state() == "idle", "slurm (node localhost idle)",
               [*cluster.logs, root / "slurmctld.out", root / "slurmd.out"], [munged, ctld, slurmd])


def _drain(cluster: SlurmCluster) -> None:
    """Cancel every job and wait until none is pending, running or completing."""
    cluster.run("scancel", "--user", "root", check=False)
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        live = [j for j in cluster.jobs() if j[2] in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")]
        if not live:
            return
        time.sleep(0.5)


def _kill_leftovers(root: Path) -> list[int]:
    """SIGKILL every process whose environment carries this cluster's marker; their pids."""
    marker, killed = f"{MARKER}={root}".encode(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


@contextlib.contextmanager
def running_slurm(root: Path) -> Iterator[SlurmCluster]:
    """Start a one-node cluster under ``root`` (skips without slurm-wlm and munge); stop it after."""
    bins = require(BINARIES, "slurm-wlm")
    if os.geteuid() != 0:
        pytest.skip("the one-node SLURM cluster runs its daemons as root (SlurmUser=root, SlurmdUser=root): "
                    "run the cluster tests as root, as .ci/run does")
    root.mkdir(parents=True, exist_ok=True)
    cluster = SlurmCluster(root, root / "slurm.conf", bins)
    try:
        _start(cluster)
        yield cluster
    finally:
        if len(cluster.daemons) == 3 and cluster.daemons[1].poll() is None:
            with contextlib.suppress(Exception):
                _drain(cluster)
        for daemon in reversed(cluster.daemons):    # slurmd, slurmctld, munged
            stop_daemon(daemon)
        time.sleep(0.2)
        _kill_leftovers(root)
