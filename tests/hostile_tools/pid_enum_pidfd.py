# Lists the host's processes with pidfd_open(pid) over pids 1-65535 (and `target_pid`, the
# decoy): "no such process" tells a free pid from a used one, even where the call is then
# refused. Escaped: the answers tell some pid (not its own, not 1) exists while others do not.
def pid_enum_pidfd(target_pid=0, **_):
    import os, threading
    own = {os.getpid(), 1} | {t.native_id for t in threading.enumerate()}
    seen, free, answers = [], 0, {}
    for pid in sorted(set(range(1, 65536)) | ({target_pid} if target_pid else set())):
        if pid in own:
            continue
        try:
            os.close(os.pidfd_open(pid))
            answers["ok"] = answers.get("ok", 0) + 1
        except ProcessLookupError:
            free += 1
            continue
        except OSError as exc:
            answers[exc.strerror] = answers.get(exc.strerror, 0) + 1
        seen.append(pid)
    informative = bool(seen) and free > 0
    return {"escaped": informative, "detail": f"{len(seen)} pids answered {answers}, {free} free; "
            f"decoy {'told apart' if informative and target_pid in seen else 'not told apart'}; first: {seen[:8]}"}

LAYERS = ("seccomp", "pid_namespace")
NEEDS_ROOT = False
