"""The trusted end of the candidate's channel: requests under the test's clock and a bound on
each reply, the candidate's functions as proxies, its exceptions rebuilt as builtin ones (never
a type the candidate defined), and the names a test borrows bound into its namespace. Used by
the checker (:mod:`.harness`), in the checker's process."""
from __future__ import annotations

import builtins
import socket
import time
from typing import Any, Callable

from .messages import printable
from .scoping import trusted_module
from .timing import CaseClock
from .wire import (MAX_MESSAGE_BYTES, MAX_NODES, MessageTooLarge, WireError, from_tree, recv_msg,
                   send_msg, to_tree)

#: Exceptions never rebuilt as themselves on the trusted side: raised out of a call inside
#: ``map``/``all``/a generator, they would end the test's iteration early (a silent pass).
_CONTROL_FLOW = {"StopIteration", "StopAsyncIteration"}


class CandidateGone(BaseException):
    """The candidate process ended, hung up, or broke the protocol. A BaseException so that a
    test's ``except Exception`` cannot swallow it into a pass."""


class CandidateTimeout(BaseException):
    """The candidate did not answer within the test's time limit."""


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin one (its type name and message
    are in the text)."""


def _rebuild(kind: str, message: str) -> Exception:
    """The candidate's exception on the trusted side: the same builtin type when it is one (a
    test may expect ``ValueError``), else :class:`CandidateError`. Never a type the candidate
    defined."""
    cls = getattr(builtins, kind, None) if kind not in _CONTROL_FLOW else None
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - some builtin exceptions take other arguments
            pass
    return CandidateError(f"{kind}: {message}")


class Channel:
    """The trusted end of the candidate's channel, with the current test's clock (shared with
    the channel of the prompt's helper process, which runs in the same sandboxed run)."""

    def __init__(self, sock: socket.socket, clock: CaseClock,
                 max_reply_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.sock = sock
        self.clock = clock
        self.gone: str | None = None
        self.calls = 0
        self.max_reply_bytes = max_reply_bytes
        # A bound on values in proportion to the bytes keeps the decoded size in proportion to
        # the reply bound: a value costs up to ~50 bytes decoded (a small str or int object and
        # its pointer) for as little as 2 bytes of JSON; 16 MiB allows 512 Ki values.
        self.max_nodes = min(MAX_NODES, max(1024, max_reply_bytes // 32))

    def _backstop_passed(self) -> CandidateTimeout:
        self.gone = "the candidate timed out"
        return CandidateTimeout(f"time limit of {self.clock.limit:g} s exceeded: the wall-clock "
                                "backstop was reached")

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send ``message`` and read the reply, by the test's wall-clock backstop at the latest
        (a reply trickled a byte at a time cannot stretch it); the checker's timer signal
        stops it sooner, at its time limit."""
        if self.gone:
            raise CandidateGone(self.gone)
        deadline = self.clock.backstop
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._backstop_passed()
        try:
            self.sock.settimeout(remaining)
            send_msg(self.sock, message)
            return recv_msg(self.sock, max_bytes=self.max_reply_bytes, deadline=deadline,
                            max_nodes=self.max_nodes)
        except socket.timeout:
            raise self._backstop_passed() from None
        except MemoryError:
            self.gone = "the candidate's reply exceeded the checker's memory limit"
            raise CandidateGone(self.gone) from None
        except MessageTooLarge as exc:
            self.gone = f"the candidate's reply was refused unread: {exc} (option max_reply_mb)"
            raise CandidateGone(self.gone) from None
        except (WireError, OSError) as exc:
            self.gone = f"the candidate process ended or hung up ({exc})"
            raise CandidateGone(self.gone) from None

    def spawn_helper(self) -> "Channel | None":
        """Ask the stub, before the candidate's code is loaded, for a helper process of its own
        (see ``candidate_stub.py``); its channel, or None when it could not be started."""
        if self.gone:
            return None
        remaining = self.clock.backstop - time.monotonic()
        if remaining <= 0:
            return None
        try:
            self.sock.settimeout(remaining)
            send_msg(self.sock, {"op": "spawn"})
            data, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        except (OSError, WireError):
            self.gone = "the candidate process ended or hung up"
            return None
        if data != b"H" or len(fds) != 1:
            for fd in fds:
                _close(fd)
            return None
        helper = socket.socket(fileno=fds[0])
        if helper.family != socket.AF_UNIX or helper.type != socket.SOCK_STREAM:
            helper.close()
            return None
        return Channel(helper, self.clock, self.max_reply_bytes)

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        try:
            message = {"op": "call", "name": name, "args": to_tree(list(args)),
                       "kwargs": to_tree(dict(kwargs))}
        except WireError as exc:
            raise TypeError(f"cannot pass this argument to the candidate's {name}(): {exc}") \
                from None
        self.calls += 1
        reply = self.request(message)
        if reply.get("ok") is True:
            try:
                return from_tree(reply.get("value"))
            except MemoryError:
                self.gone = "the candidate's value exceeded the checker's memory limit"
                raise CandidateGone(self.gone) from None
            except WireError as exc:
                self.gone = f"the candidate sent a malformed value ({exc})"
                raise CandidateGone(self.gone) from None
        kind, text = error_fields(reply.get("error"))
        if reply.get("fatal"):
            self.gone = f"the candidate exited ({kind}: {text})"
            raise CandidateGone(self.gone)
        raise _rebuild(kind, text)


def _close(fd: int) -> None:
    try:
        socket.socket(fileno=fd).close()
    except OSError:
        pass


def error_fields(error: Any) -> tuple[str, str]:
    if isinstance(error, list) and len(error) == 2 and all(isinstance(e, str) for e in error):
        return printable(error[0][:200]), printable(error[1][:2000])
    return "Error", "the candidate reported a malformed error"


def proxy(channel: Channel, name: str) -> Callable[..., Any]:
    """A trusted-side stand-in for the candidate's function ``name``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return channel.call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def bind_names(namespace: dict[str, Any], channel: Channel, names: Any, wanted: set[str],
          kinds: tuple[str, ...]) -> set[str]:
    """Put the names in ``wanted`` that a ``load`` reply described (and whose kind is one of
    ``kinds``) into ``namespace``: a callable as a proxy, a value as plain data, a module as
    the real standard-library module. The names bound."""
    bound: set[str] = set()
    for name, spec in (names.items() if isinstance(names, dict) else ()):
        if name not in wanted or not isinstance(spec, dict) or spec.get("kind") not in kinds:
            continue
        kind = spec["kind"]
        if kind == "callable":
            namespace[name] = proxy(channel, name)
        elif kind == "value":
            try:
                namespace[name] = from_tree(spec.get("value"))
            except (WireError, MemoryError):
                continue
        else:
            module = trusted_module(spec.get("module"))
            if module is None:
                continue
            namespace[name] = module
        bound.add(name)
    return bound
