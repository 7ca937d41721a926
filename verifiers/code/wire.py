"""Plain data over a socket: the only thing that crosses between the candidate and the judge.

Why a codec of our own: ``pickle`` runs code chosen by the sender and ``marshal`` builds code
objects and is documented as unsafe on crafted input. The trusted side must only ever hold
builtin plain data that the candidate sent, so that no object with a forged ``__eq__`` (the
"AlwaysEqual" trick) can reach a test. JSON (C-accelerated, safe on any input) carries a
tagged tree of the builtin types: None, bool, int, float, complex, str, bytes, list, tuple,
dict, set and frozenset. Anything else fails to encode, and the decoder only builds those types.

Decoding is bounded, because the candidate chooses the bytes: a frame is at most
``max_bytes`` long; before ``json.loads`` builds anything, a count of the frame's separators
bounds how many values it could hold (:data:`MAX_NODES`); nesting deeper than :data:`MAX_DEPTH`
is refused; a whole message must arrive before an absolute deadline (a reply trickled one byte
at a time cannot stretch the time limit, see :func:`recv_msg`). Sets, frozensets and dicts are
still built from the candidate's values, and a crafted set of colliding hashes can make that
quadratic: the trusted side therefore decodes only inside a checker process with CPU and memory
limits that the host kills at the deadline (see ``checkers.py``).

This module is also shipped, as source, into the sandbox next to the candidate, so it uses the
standard library only.
"""
import base64
import json
import socket
import struct
import time

MAX_MESSAGE_BYTES = 64 << 20
#: Most values one message may hold (lists, dicts, strings, numbers... each count one).
MAX_NODES = 2_000_000
#: Deepest nesting of containers a message may hold.
MAX_DEPTH = 200
_HEADER = struct.Struct(">I")
_SAFE_INT = 1 << 53


class WireError(ValueError):
    """A message is not plain data, is malformed, or the peer hung up."""


class MessageTooLarge(WireError):
    """A message's header announces more bytes than the receiver accepts (refused unread)."""


def to_tree(value, _depth=0):
    """``value`` as a JSON-ready tree; :class:`WireError` if it holds a non-builtin type."""
    if _depth > MAX_DEPTH:
        raise WireError(f"value nested too deeply (over {MAX_DEPTH} levels)")
    kind = type(value)
    if value is None or kind is bool or kind is str or kind is float:
        return value
    if kind is int:
        # Big ints travel as hex: decimal strings past 4300 digits are refused by int().
        return value if -_SAFE_INT < value < _SAFE_INT else {"i": format(value, "x")}
    d = _depth + 1
    if kind is list:
        return [to_tree(v, d) for v in value]
    if kind is tuple:
        return {"t": [to_tree(v, d) for v in value]}
    if kind is dict:
        return {"d": [[to_tree(k, d), to_tree(v, d)] for k, v in value.items()]}
    if kind is set:
        return {"s": [to_tree(v, d) for v in value]}
    if kind is frozenset:
        return {"f": [to_tree(v, d) for v in value]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    raise WireError(f"a {kind.__name__} is not plain data (only builtin types may be returned)")


def from_tree(tree, _depth=0):
    """The builtin value a tree describes; only builtin types are ever built. The tree is
    consumed: its lists are reused for the value."""
    if _depth > MAX_DEPTH:
        raise WireError(f"value nested too deeply (over {MAX_DEPTH} levels)")
    kind = type(tree)
    if tree is None or kind is bool or kind is str or kind is float or kind is int:
        return tree
    d = _depth + 1
    if kind is list:
        # In place: the tree was just decoded and is not used again, and a second list of a
        # few million items would double what a large reply costs the receiver.
        for i, v in enumerate(tree):
            if type(v) is list or type(v) is dict:
                tree[i] = from_tree(v, d)
            elif d > MAX_DEPTH:
                raise WireError(f"value nested too deeply (over {MAX_DEPTH} levels)")
        return tree
    if kind is dict and len(tree) == 1:
        (tag, body), = tree.items()
        try:
            if tag == "i" and type(body) is str:
                return int(body, 16)
            if tag == "t" and type(body) is list:
                return tuple(from_tree(v, d) for v in body)
            if tag == "d" and type(body) is list:
                return {from_tree(k, d): from_tree(v, d) for k, v in body}
            if tag == "s" and type(body) is list:
                return {from_tree(v, d) for v in body}
            if tag == "f" and type(body) is list:
                return frozenset(from_tree(v, d) for v in body)
            if tag == "b" and type(body) is str:
                return base64.b64decode(body.encode("ascii"), validate=True)
            if tag == "c" and type(body) is list and len(body) == 2:
                return complex(float(body[0]), float(body[1]))
        except WireError:
            raise
        except (TypeError, ValueError) as exc:
            raise WireError(f"malformed {tag!r} value: {exc}") from None
    raise WireError(f"malformed value of type {kind.__name__}")


def encode(message):
    """One framed message: a 4-byte length, then the JSON text."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(body)) + body


def send_msg(sock, message):
    sock.sendall(encode(message))


def _recv_exact(sock, n, deadline):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("deadline passed")
            sock.settimeout(remaining)
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            raise WireError("the peer closed the channel")
        got += k
    return buf  # json.loads and bytes.count take a bytearray: no second copy


def recv_msg(sock, max_bytes=MAX_MESSAGE_BYTES, deadline=None, max_nodes=MAX_NODES):
    """One message from ``sock``. With ``deadline`` (a ``time.monotonic()`` value) the whole
    message must have arrived by then, however it is split into reads; past it
    ``socket.timeout`` is raised (as it propagates from the socket's own timeout without one).
    Anything malformed, too big, too many values or cut short raises :class:`WireError`."""
    try:
        (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline))
        if size > max_bytes:
            raise MessageTooLarge(f"message of {size} bytes exceeds the {max_bytes}-byte limit")
        body = _recv_exact(sock, size, deadline)
    except socket.timeout:
        raise
    except OSError as exc:
        raise WireError(f"channel error: {exc}") from None
    # Every value but the first follows a ',', a ':', a '[' or a '{': counting those (in
    # C, before anything is built) bounds the values json.loads could create.
    nodes = body.count(b",") + body.count(b"[") + body.count(b"{") + body.count(b":")
    if max_nodes is not None and nodes > max_nodes:
        raise WireError(f"message holds more than {max_nodes} values")
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {type(exc).__name__}") from None
    if type(message) is not dict:
        raise WireError("malformed message: not an object")
    return message
