"""HTTP replies with a bounded size and a bounded total time, whatever the server does.

httpx bounds each network read, not a whole reply: a server that sends one byte every two seconds, or 200 MB, is
waited for and read in full. `BoundedTransport` counts the bytes of every reply body as they arrive and checks the
time since the request was sent, and stops reading past either bound.
"""

import time
from collections.abc import Iterator

import httpx


class ReplyTooLarge(httpx.ReadError):
    """A reply's body went past the size bound; what was read is dropped."""


class ReplyTooSlow(httpx.ReadTimeout):
    """A reply's body was still arriving when the time bound ran out."""


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, request: httpx.Request, max_bytes: int, deadline: float):
        self._stream, self._request = stream, request
        self._max_bytes, self._deadline = max_bytes, deadline

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._stream:
            received += len(chunk)
            if received > self._max_bytes:
                raise ReplyTooLarge(f"the reply is larger than {self._max_bytes:,} bytes", request=self._request)
            if time.monotonic() > self._deadline:
                raise ReplyTooSlow("the reply was still arriving when the time ran out", request=self._request)
            yield chunk

    def close(self) -> None:
        self._stream.close()


class BoundedTransport(httpx.HTTPTransport):
    """An HTTP transport whose reply bodies may hold at most `max_bytes` bytes and must have arrived `total_s`
    seconds after their request was sent (connecting and each read stay bounded by the client's timeout)."""

    def __init__(self, max_bytes: int, total_s: float) -> None:
        super().__init__()
        self.max_bytes, self.total_s = max_bytes, total_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self.total_s
        response = super().handle_request(request)
        response.stream = _BoundedStream(response.stream, request, self.max_bytes, deadline)
        return response
