"""HTTP replies with a bounded size and a bounded total time, whatever the server does.

httpx bounds each network read, not a whole reply: a server that sends one byte every two seconds, or 200 MB, is
waited for and read in full. `BoundedTransport` counts the bytes of every reply body as they arrive and checks the
time since the request was sent, and stops reading past either bound.

The size bound holds for the body as it is read, once decoded: a compressed body (`Content-Encoding: gzip` or
`deflate`) is inflated here a piece at a time, each piece counted before the next is made, so a 1 MB body that would
inflate to 1 GB is dropped after its first MB. A body in any other encoding is refused unread.
"""

import time
import zlib
from collections.abc import Iterator

import httpx

INFLATE_PIECE_BYTES = 65_536
"""A compressed body is inflated at most this many bytes at a time."""
_WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 32 + zlib.MAX_WBITS}
"""zlib's window bits for each encoding read (deflate: a zlib or gzip header, detected)."""


class ReplyTooLarge(httpx.ReadError):
    """A reply's body went past the size bound; what was read is dropped."""


class ReplyTooSlow(httpx.ReadTimeout):
    """A reply's body was still arriving when the time bound ran out."""


class _BoundedStream(httpx.SyncByteStream):
    def __init__(
        self, stream: httpx.SyncByteStream, request: httpx.Request, max_bytes: int, deadline: float, encoding: str
    ):
        self._stream, self._request = stream, request
        self._max_bytes, self._deadline = max_bytes, deadline
        self._inflater = zlib.decompressobj(_WINDOW_BITS[encoding]) if encoding in _WINDOW_BITS else None

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._stream:
            for piece in self._decoded(chunk):
                received += len(piece)
                if received > self._max_bytes:
                    raise ReplyTooLarge(f"the reply is larger than {self._max_bytes:,} bytes", request=self._request)
                yield piece
            if time.monotonic() > self._deadline:
                raise ReplyTooSlow("the reply was still arriving when the time ran out", request=self._request)

    def _decoded(self, chunk: bytes) -> Iterator[bytes]:
        """The chunk as read, or what it inflates to, INFLATE_PIECE_BYTES at a time."""
        if self._inflater is None:
            yield chunk
            return
        try:
            while chunk:
                yield self._inflater.decompress(chunk, INFLATE_PIECE_BYTES)
                chunk = self._inflater.unconsumed_tail
        except zlib.error as error:
            raise httpx.DecodingError(f"the compressed reply is damaged ({error})", request=self._request) from None

    def close(self) -> None:
        self._stream.close()


class BoundedTransport(httpx.HTTPTransport):
    """An HTTP transport whose reply bodies may hold at most `max_bytes` bytes once decoded and must have arrived
    `total_s` seconds after their request was sent (connecting and each read stay bounded by the client's timeout)."""

    def __init__(self, max_bytes: int, total_s: float) -> None:
        super().__init__()
        self.max_bytes, self.total_s = max_bytes, total_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self.total_s
        request.headers["Accept-Encoding"] = ", ".join(_WINDOW_BITS)
        response = super().handle_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in (*_WINDOW_BITS, "identity", ""):
            response.close()
            raise httpx.DecodingError(f"the reply is in an encoding Prisma does not read ({encoding})", request=request)
        response.headers.pop("content-encoding", None)  # decoded here, within the bound: httpx must not again
        response.stream = _BoundedStream(response.stream, request, self.max_bytes, deadline, encoding)
        return response
