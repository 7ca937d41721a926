"""The code that runs inside the sandbox, next to the candidate (sent as source, never imported
on the host).

It serves a tiny RPC over the channel at fd 3: ``load`` runs the candidate's code in a fresh
namespace and describes the names the trusted side asked for (a module as its name only: the
trusted side imports the real one itself); ``call`` calls one of them with plain-data arguments
and answers with a plain-data result or the exception's type and message.

``spawn``, sent before ``load``, forks a helper process that serves the same RPC on a socket of
its own, handed to the trusted side over the channel (SCM_RIGHTS) before the candidate's code
exists in this process. The trusted side runs the dataset's prompt code there (HumanEval's
``encode_cyclic``...): in the sandbox, never on the host, and out of the candidate's reach (its
own process, not dumpable, so no ``/proc/PID/mem`` writes; ptrace is refused by the sandbox's
filter; writable directories dropped from its import path, so no module the candidate plants is
imported by it). The candidate can at worst kill or stop it, which fails the test.
Whatever the candidate does to this process (exit, patch builtins, patch this stub, print pass
markers) can at worst make it answer wrongly or hang up: the verdict is computed elsewhere, from
plain data only. The module ``rk_wire`` is :mod:`rewardkit.verifiers.code.wire`, registered by the
bootstrap the host builds (see ``harness.candidate_program``).
"""
import os
import socket
import sys
import traceback
import types

from rk_wire import WireError, from_tree, recv_msg, send_msg, to_tree

CHANNEL_FD = 3


def plain(value):
    """Convert common non-builtin results to builtin data: NumPy scalars and arrays, and dict
    subclasses (``Counter``, ``defaultdict``, ``OrderedDict``) to a dict of their items, which
    the benchmarks' ``==`` compares them as. Runs in the candidate's process: whatever it
    yields is still checked by the strict encoder."""
    module = type(value).__module__ or ""
    if module.startswith("numpy"):
        if hasattr(value, "tolist"):
            return value.tolist()
        if hasattr(value, "item"):
            return value.item()
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in dict.items(value)}
    return value


def describe_error(exc):
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if f.filename == "<candidate>"]
    where = f" (line {frames[-1].lineno})" if frames else ""
    return [type(exc).__name__, (str(exc)[:2000] + where)]


def resolve(namespace, name):
    """A name defined by the candidate, or a method of a LeetCode-style ``Solution`` class."""
    if name in namespace:
        return namespace[name]
    holder = namespace.get("Solution")
    if isinstance(holder, type) and hasattr(holder, name):
        return getattr(holder(), name)
    raise KeyError(name)


def describe(namespace, names):
    out = {}
    for name in names:
        try:
            value = resolve(namespace, name)
        except Exception:
            continue
        if isinstance(value, types.ModuleType):
            module = getattr(value, "__name__", None)
            if isinstance(module, str):
                out[name] = {"kind": "module", "module": module[:200]}
        elif callable(value):
            out[name] = {"kind": "callable"}
        else:
            try:
                out[name] = {"kind": "value", "value": to_tree(plain(value))}
            except Exception:
                continue
    return out


def _not_dumpable():
    """Make this process's memory unreachable through /proc for processes without
    CAP_SYS_PTRACE (the candidate has none)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _private_import_path():
    """Drop writable directories (the run's own directory, where the candidate can plant a
    module) from the import path of the helper."""
    writable = [os.path.realpath(p) for p in (os.getcwd(), os.environ.get("HOME", ""),
                                               os.environ.get("TMPDIR", "")) if p]
    kept = []
    for entry in sys.path:
        real = os.path.realpath(entry or ".")
        if entry and not any(real == w or real.startswith(w + os.sep) for w in writable):
            kept.append(entry)
    sys.path[:] = kept
    sys.path_importer_cache.clear()


def spawn(sock):
    """Fork the helper (see the module docs) and hand its socket to the trusted side; a
    one-byte message with no descriptor says that it could not be started."""
    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
    except OSError:
        socket.send_fds(sock, [b"H"], [])
        return
    if pid == 0:
        try:
            sock.close()
            mine.close()
            _not_dumpable()
            _private_import_path()
            serve(theirs, helper=True)
        finally:
            os._exit(0)
    theirs.close()
    socket.send_fds(sock, [b"H"], [mine.fileno()])
    mine.close()


def serve(sock, helper=False):
    namespace = {"__name__": "__candidate__", "__builtins__": __builtins__}
    loaded = False
    while True:
        try:
            message = recv_msg(sock)
        except WireError:
            return
        op = message.get("op")
        if op == "spawn" and not loaded and not helper:
            spawn(sock)
        elif op == "load":
            loaded = True
            try:
                exec(compile(message["code"], "<candidate>", "exec"), namespace)
            except BaseException as exc:  # noqa: BLE001 - any failure is reported, then we stop
                send_msg(sock, {"ok": False, "error": describe_error(exc)})
                return
            send_msg(sock, {"ok": True, "names": describe(namespace, message.get("names", []))})
        elif op == "call":
            try:
                fn = resolve(namespace, message["name"])
                args = from_tree(message.get("args", []))
                kwargs = from_tree(message.get("kwargs", {"d": []}))
                result = fn(*args, **kwargs)
                reply = {"ok": True, "value": to_tree(plain(result))}
            except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
                send_msg(sock, {"ok": False, "fatal": True, "error": describe_error(exc)})
                return
            except BaseException as exc:  # noqa: BLE001 - reported to the trusted side
                reply = {"ok": False, "error": describe_error(exc)}
            send_msg(sock, reply)
        else:
            return


if __name__ == "__main__":
    serve(socket.socket(fileno=CHANNEL_FD))
    sys.stdout.flush()
    os._exit(0)  # threads the candidate left running must not keep the process alive
