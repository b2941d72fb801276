"""uvicorn settings of ``lcpo serve``: its httptools protocol with one socket write per answer.

uvicorn's HTTP/1.1 protocol writes an answer's status line and headers (at ``http.response.start``) and its body
(at ``http.response.body``) in two ``transport.write`` calls, and so in two ``send`` system calls. Over loopback
the sender pays for the receiver's TCP processing and wake-up in each of them. Profiling the server under
``benchmarks/serve_latency.py`` put these two writes at about a quarter of the server's Python time per
decision. :class:`OneWriteHttpToolsProtocol` is uvicorn's httptools protocol with its transport wrapped in
:class:`OneWriteTransport`, which holds an answer's header block until the body arrives and writes both at
once. The bytes on the wire and their order are unchanged.
"""

from __future__ import annotations

import asyncio

__all__ = ["OneWriteTransport", "http_protocol"]


class OneWriteTransport:
    """A transport proxy that sends an HTTP response's header block together with the write that follows it.

    A write that starts with ``HTTP/`` and ends with the blank line that closes a header block is held; the
    next write (the body, possibly empty) goes out joined to it. A held block that no write follows in the same
    event-loop iteration is flushed on its own from a ``call_soon`` callback, and ``close()`` flushes first, so
    nothing is ever delayed past the current iteration or lost. Everything else is the wrapped transport's.

    Args:
        transport: the connection's ``asyncio.Transport``.
        loop: the event loop (for the flush callback).
    """

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport, self._loop, self._held = transport, loop, None

    def write(self, data: bytes) -> None:
        """Write ``data`` (joined to a held header block), or hold it if it is a header block."""
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data[-4:] == b"\r\n\r\n" and data[:5] == b"HTTP/":
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def close(self) -> None:
        """Flush a held header block, then close."""
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


def http_protocol():
    """uvicorn's ``http`` setting: :class:`OneWriteHttpToolsProtocol` where httptools is installed (the
    ``serve`` extra), else ``"auto"`` (uvicorn's h11 protocol, unchanged)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return "auto"

    class OneWriteHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, each answer sent in one write (:class:`OneWriteTransport`)."""

        def connection_made(self, transport) -> None:  # noqa: D102 - uvicorn's, on the wrapped transport
            super().connection_made(OneWriteTransport(transport, self.loop))

    return OneWriteHttpToolsProtocol
