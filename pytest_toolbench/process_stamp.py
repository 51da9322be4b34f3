"""Which process a pid named when it was written down, so a pid reused later is not taken for it.

A run's ``run.json`` keeps its controller's pid while it runs; ``toolbench runs`` lists a run whose
process is alive as running, and ``toolbench finish`` refuses to finish it. After a reboot (the
OOM killer's usual sequel on a laptop) or in a long-lived CI host, that pid soon names another
process: the killed run read as running for good, and nothing, ``--force`` included, would finish
it. A stamp, the boot's id and the process's start time since boot (Linux ``/proc``), tells the
two apart. No third-party import: a run's start writes one.
"""

from __future__ import annotations

import os


def process_stamp(pid: int | None = None) -> str | None:
    """``<boot id>/<start time in clock ticks since boot>`` of ``pid`` (default: this process);
    None where ``/proc`` does not say (another system, a pid that is gone)."""
    pid = os.getpid() if pid is None else pid
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # After the command name, which may itself hold spaces and parentheses: field 22, starttime.
    fields = stat[stat.rfind(b")") + 2:].split()
    if len(fields) < 20 or not boot:
        return None
    return f"{boot}/{fields[19].decode('ascii', 'replace')}"


def same_process(pid: int, stamp: str | None) -> bool:
    """Whether ``pid`` still names the process ``stamp`` was taken of; True when either stamp is
    unknown (a run recorded before stamps were kept, a system without ``/proc``)."""
    if stamp is None:
        return True
    now = process_stamp(pid)
    return now is None or now == stamp


__all__ = ["process_stamp", "same_process"]
