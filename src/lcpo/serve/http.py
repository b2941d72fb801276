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


def http_protocol(app=None):
    """uvicorn's ``http`` setting: :class:`OneWriteHttpToolsProtocol` where httptools is installed (the
    ``serve`` extra), else ``"auto"`` (uvicorn's h11 protocol, unchanged).

    Args:
        app: the application of :func:`lcpo.serve.app.create_app`, or None. With it, the protocol also answers
            the decision endpoints through the *direct lane* (below); without it (or for an app without
            ``direct_routes``), every request goes through ASGI.

    **The direct lane.** uvicorn hands each request to the application as an asyncio task that exchanges ASGI
    messages (``http.request``, ``http.response.start``, ``http.response.body``) through awaited callables and
    an ``asyncio.Event``. For ``POST`` to an exact path in ``app.direct_routes`` (``/v1/step``, ``/v1/act``,
    ``/v1/observe``, ``/v1/batch``), when no other request of the connection is in progress and the request
    does not ask for ``100 Continue`` or an upgrade, the protocol instead gathers the body (up to
    ``app.max_body``; beyond it the rest is discarded and the answer is 413) from httptools' callbacks and, when
    the message is complete, calls ``app.direct_answer`` synchronously and writes the answer in one write: the
    same status line, uvicorn's default headers (``date``), ``content-type``, ``content-length``, the app's
    extra headers, and ``connection: close`` where the request did not keep the connection alive. The handlers
    are synchronous in both lanes, so requests are still applied one at a time, in arrival order. Everything
    else (GET endpoints, other methods, pipelined requests behind an ASGI one, percent-encoded paths) takes
    the ASGI lane unchanged.
    """
    try:
        import httptools
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
    except ImportError:
        return "auto"
    routes = getattr(app, "direct_routes", None)
    answer = getattr(app, "direct_answer", None)
    max_body = int(getattr(app, "max_body", 0))

    class OneWriteHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, each answer sent in one write (:class:`OneWriteTransport`), with the
        direct lane for the decision endpoints (:func:`http_protocol`)."""

        _direct: list | None = None  # [handler, body chunks (None once over max_body), size, keep-alive]

        def connection_made(self, transport) -> None:  # noqa: D102 - uvicorn's, on the wrapped transport
            super().connection_made(OneWriteTransport(transport, self.loop))

        if routes:
            def on_message_begin(self) -> None:  # noqa: D102 - uvicorn's
                self._direct = None
                super().on_message_begin()

            def on_headers_complete(self) -> None:  # noqa: D102 - uvicorn's, or the direct lane
                parser = self.parser
                if (parser.get_method() == b"POST" and not self.expect_100_continue and not self.pipeline
                        and (self.cycle is None or self.cycle.response_complete) and not parser.should_upgrade()):
                    handler = routes.get(httptools.parse_url(self.url).path)
                    if handler is not None:
                        keep = parser.get_http_version() != "1.0" and parser.should_keep_alive()
                        self._direct = [handler, [], 0, keep]
                        return
                super().on_headers_complete()

            def on_body(self, body: bytes) -> None:  # noqa: D102 - uvicorn's, or the direct lane
                d = self._direct
                if d is None:
                    super().on_body(body)
                    return
                d[2] += len(body)
                if d[1] is not None:
                    if d[2] > max_body:
                        d[1] = None
                    else:
                        d[1].append(body)

            def on_message_complete(self) -> None:  # noqa: D102 - uvicorn's, or the direct lane
                d = self._direct
                if d is None:
                    super().on_message_complete()
                    return
                self._direct = None
                handler, chunks, _, keep = d
                body = None if chunks is None else (chunks[0] if len(chunks) == 1 else b"".join(chunks))
                try:
                    status, out, extra = answer(handler, dict(self.headers), body)
                except Exception:  # a bug, not a refused request: uvicorn's 500, and the connection closes
                    self.logger.exception("Exception in the direct lane of lcpo serve")
                    status, out, extra, keep = 500, b"Internal Server Error", (), False
                    ctype = b"text/plain; charset=utf-8"
                else:
                    ctype = b"application/json"
                parts = [STATUS_LINE[status]]
                for name, value in self.server_state.default_headers:
                    parts += (name, b": ", value, b"\r\n")
                parts += (b"content-type: ", ctype, b"\r\ncontent-length: ", b"%d" % len(out), b"\r\n")
                for name, value in extra:
                    parts += (name, b": ", value, b"\r\n")
                if not keep:
                    parts.append(b"connection: close\r\n")
                parts += (b"\r\n", out)
                self.transport.write(b"".join(parts))
                if not keep:
                    self.transport.close()
                self.on_response_complete()

    return OneWriteHttpToolsProtocol
