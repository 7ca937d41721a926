"""The code that runs inside the sandbox, next to the candidate (sent as source, never imported
on the host).

It serves a tiny RPC over the channel at fd 3: ``load`` runs the candidate's code in a fresh
namespace and describes the names the trusted side asked for; ``call`` calls one of them with
plain-data arguments and answers with a plain-data result or the exception's type and message.
Whatever the candidate does to this process (exit, patch builtins, patch this stub, print pass
markers) can at worst make it answer wrongly or hang up: the verdict is computed elsewhere, from
plain data only. The module ``rk_wire`` is :mod:`rewardkit.verifiers.code.wire`, registered by the
bootstrap the host builds (see ``harness.candidate_program``).
"""
import os
import socket
import sys
import traceback

from rk_wire import WireError, from_tree, recv_msg, send_msg, to_tree

CHANNEL_FD = 3


def plain(value):
    """Convert common non-builtin results (NumPy scalars and arrays) to builtin data. Runs in the
    candidate's process: whatever it yields is still checked by the strict encoder."""
    module = type(value).__module__ or ""
    if module.startswith("numpy"):
        if hasattr(value, "tolist"):
            return value.tolist()
        if hasattr(value, "item"):
            return value.item()
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(plain(v) for v in value)
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
        if callable(value):
            out[name] = {"kind": "callable"}
        else:
            try:
                out[name] = {"kind": "value", "value": to_tree(plain(value))}
            except Exception:
                continue
    return out


def serve(sock):
    namespace = {"__name__": "__candidate__", "__builtins__": __builtins__}
    while True:
        try:
            message = recv_msg(sock)
        except WireError:
            return
        op = message.get("op")
        if op == "load":
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
