"""Confined warm pool for untrusted code (see pool.py, worker.py, policy.py, protocol.py).

Layers, outermost first (each one reported by ``ToolSandbox.describe()``):

1. A fresh interpreter per pool slot (never a fork of pytest) with a scrubbed environment: only
   PATH/locale/TZ plus HOME/TMPDIR pointing at its temp dir; no API key anywhere in it or on its
   command line. ``bwrap`` (bubblewrap) wraps it when it is on PATH (new mount/pid/user/net
   namespaces with only the Python installation, the package and the temp dir mounted).
2. The slot process (the zygote) enters a private network namespace (plus IPC/UTS), sets
   rlimits (address space, file size, no core dumps), imports the jobs, then forks a fresh child
   for every call; the zygote itself never runs untrusted code.
3. Each child, before the untrusted code: Landlock (read-only: the Python installation, the
   package and system library/time-zone paths; read-write: the call's own directory; nothing
   else, so no ``/proc/<pid>/environ``/``cmdline``, no project, cache, ``../shared`` or home; no
   execve, no TCP, scoped signals), seccomp (no sockets, exec, fork, ptrace, process_vm_*,
   setsid/setpgid, mount/namespace/keyring/bpf calls), a CPU-time rlimit, death with the zygote;
   and before those a ``chroot`` into the zygote's jail, where only what Landlock lets it read
   exists (read-only binds at the same paths) beside its own directory, so no other path can
   even be ``stat``ed (``describe()["isolation"]["filesystem_view"]``: ``jail`` or ``host``).
   The child exits after the call, so threads and any state it changed die with it.
4. A Python audit hook (clear early errors; a second line only, bypassable in principle).

Landlock and seccomp are required: at start-up a probe child checks that they hold (it tries to
read ``/proc/1/environ``, the parent's command line, the project and home, to open a socket and to
write outside). Where they do not, the pool refuses to run tools (``SandboxStartError``, the run
stops) unless ``SandboxLimits.insecure`` (``--sandbox-insecure``); then ``describe()["insecure"]``
is true, and the run's report (``run.sandbox``, from ``ToolSandbox.isolation_state()``) and
its terminal summary say so. Each call's directory is a size- and inode-limited tmpfs
(``SandboxLimits.disk_mb``/``disk_inodes``; a watchdog where no mount namespace is possible).
A zygote whose pool went away removes its own folder; a pool that starts removes the folders
that no live pool or zygote holds locked (``pool.sweep_stale_folders``).
The zygote forwards payloads and replies as opaque bytes; the pool parses each reply, checks
its shape and caps the whole result and error text at ``SandboxLimits.output_cap`` characters.

A benchmark sees the pool as ``env.sandbox``, typed :class:`~pytest_toolbench.sandbox.interface.SandboxRunner`;
its jobs are this package's or functions of the modules it declares (``sandbox_modules``), which
every zygote imports before any call and whose folders calls may read.

Exports are lazy so that the worker process, which imports this package, does not pay for
pydantic and the harness config it never uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_toolbench.sandbox.interface import SandboxRunner
    from pytest_toolbench.sandbox.pool import SandboxOutcome, SandboxStartError, ToolSandbox

__all__ = ["SandboxOutcome", "SandboxRunner", "SandboxStartError", "ToolSandbox"]


def __getattr__(name: str) -> Any:
    if name == "SandboxRunner":  # what a benchmark sees as env.sandbox (interface.py)
        from pytest_toolbench.sandbox.interface import SandboxRunner

        return SandboxRunner
    if name in __all__:
        from pytest_toolbench.sandbox import pool

        return getattr(pool, name)
    raise AttributeError(name)
