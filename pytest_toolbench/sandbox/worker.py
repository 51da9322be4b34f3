"""Sandbox worker process: ``python -m pytest_toolbench.sandbox.worker CONFIG_JSON``.

Started by :mod:`pytest_toolbench.sandbox.pool` as a fresh interpreter (never a fork of pytest,
which has threads). It confines itself (see :mod:`policy`), reports what is in force, then serves
jobs forever: read a request from the request fd, call the named trusted job function with the
payload, write the JSON reply to the reply fd. Anything the untrusted code prints goes to
/dev/null, so it can never corrupt the channel.

Stdlib only, plus the job modules named in the config (imported before confinement).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import traceback
from typing import Any, Callable

from pytest_toolbench.sandbox import policy, protocol

JOB_PREFIX = "pytest_toolbench."


def resolve_job(job: str) -> Callable[[dict], Any]:
    """Only trusted harness code: ``pytest_toolbench.<module>:<function>``."""
    module_name, sep, func_name = job.partition(":")
    if not sep or not module_name.startswith(JOB_PREFIX) or not func_name.isidentifier():
        raise ValueError(f"job must be 'pytest_toolbench.<module>:<function>', got {job!r}")
    func = getattr(importlib.import_module(module_name), func_name)
    if not callable(func):
        raise TypeError(f"job {job!r} is not callable")
    return func


def _confine(config: dict[str, Any]) -> dict[str, Any]:
    tmpdir = config["tmpdir"]
    info: dict[str, Any] = {}
    if config.get("network_isolation", True):
        info["network_namespace"], info["network_namespace_note"] = policy.enter_network_namespace()
    else:
        info["network_namespace"], info["network_namespace_note"] = False, "disabled by caller"
    limits = config["limits"]
    info["rlimits"] = policy.apply_rlimits(limits["memory_mb"], limits["file_size_mb"])
    info["landlock_abi"], info["landlock_note"] = policy.apply_landlock(tmpdir)
    info["seccomp"], info["seccomp_note"] = policy.apply_seccomp()
    # Self-checks, so describe() reports what is really in force rather than what was attempted.
    probe = os.path.join(os.path.dirname(tmpdir), f".toolbench-probe-{os.getpid()}")
    info["verified_write_outside_tmpdir_refused"] = not policy.is_regular_writable_probe(probe)
    try:
        import socket

        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        info["verified_socket_refused"] = False
    except OSError:
        info["verified_socket_refused"] = True
    policy_hook = policy.install_audit_hook(tmpdir)
    info["audit_hook"] = True
    info["_policy"] = policy_hook
    return info


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    fd_in, fd_out = config["fd_in"], config["fd_out"]
    os.chdir(config["tmpdir"])
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdin = None  # type: ignore[assignment]
    try:
        for module in config.get("preload", ()):
            importlib.import_module(module)
        info = _confine(config)
    except BaseException as exc:  # report why, then die: the pool turns this into an error
        protocol.send(fd_out, {"type": "fatal", "detail": "".join(traceback.format_exception(exc))})
        return 1
    hook: policy.AuditPolicy = info.pop("_policy")
    protocol.send(
        fd_out,
        {"type": "ready", "pid": os.getpid(), "python": sys.version, "isolation": info},
    )
    cpu_seconds = float(config["limits"]["cpu_seconds"])
    jobs: dict[str, Callable[[dict], Any]] = {}
    while True:
        try:
            request = protocol.recv(fd_in)
        except protocol.ChannelClosed:
            return 0
        reply: dict[str, Any] = {"id": request.get("id")}
        try:
            hook.trusted_call(policy.set_cpu_budget, cpu_seconds)
            job = request["job"]
            if job not in jobs:
                jobs[job] = resolve_job(job)
            with contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(devnull):
                value = jobs[job](request["payload"])
            reply.update(ok=True, value=value)
            data = protocol.encode(reply)
        except BaseException as exc:  # the job is trusted; if it raises, the pool recycles us
            reply = {
                "id": request.get("id"),
                "ok": False,
                "detail": f"{type(exc).__name__}: {exc}",
            }
            data = protocol.encode(reply)
        protocol.write_all(fd_out, data)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
