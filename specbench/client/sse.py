"""Server-sent events split from raw bytes as the WHATWG rules say (the lean path's reading of a stream).

https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation, for what a
client of generation streams needs, each event's data:
- one leading byte-order mark is ignored; lines end in CRLF, LF or a lone CR (a CR at the end of a read ends
  its line at once; an LF at the start of the next read is then the rest of that CRLF);
- a line starting with ":" is a comment; "name:value" is a field (one space after the colon is dropped), and
  a line without a colon is a field name with an empty value ("data" alone appends an empty data line);
- a blank line dispatches the event, its data lines joined by LF, but only when it had a data field: an
  event of only `id`, `event` or `retry` fields is not dispatched;
- at the end of the stream an event without its blank line is discarded (so is an incomplete line).
Not kept: `event` (every event type is handed over, as httpx-sse does), `id` and `retry` (a generation is not
resumed). The reference path (specbench/client/httpx_transport.py) applies the same rules to httpx-sse's decoders.
"""

from __future__ import annotations

BOM = b"\xef\xbb\xbf"  # U+FEFF in UTF-8


class SSEParser:
    """One stream's events, read by read: `feed` appends the data of each event a read completes to `out`.

    `clean` is True between events (no partial line, no data lines pending, no CR awaiting its LF): then a
    piece that is exactly "data: <data>\\n\\n" (no other LF, no CR) is one event whose data is <data>, which
    the caller may take without `feed` (sse_http's fast path, a vLLM chunk)."""

    __slots__ = ("line", "data", "skip_lf", "bom", "clean")

    def __init__(self) -> None:
        self.line = b""  # the incomplete last line
        self.data: list[bytes] = []  # the data lines of the event being read
        self.skip_lf = False  # the last piece ended in CR: an LF first in the next one belongs to it
        self.bom = True  # the stream's first bytes are still to be checked for a byte-order mark
        self.clean = False

    def feed(self, raw: bytes, out: list[bytes]) -> None:
        if self.bom:
            raw = self.line + raw
            if len(raw) < 3 and BOM.startswith(raw):  # a BOM split across reads, or not yet known
                self.line = raw
                return
            self.bom, self.line = False, b""
            if raw.startswith(BOM):
                raw = raw[3:]
        if self.skip_lf:
            self.skip_lf = False
            if raw[:1] == b"\n":
                raw = raw[1:]
        if b"\r" in raw:
            self.skip_lf = raw[-1:] == b"\r"
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, self.line = (self.line + raw).split(b"\n")
        data = self.data
        for line in lines:
            if not line:
                if data:
                    out.append(b"\n".join(data))
                    data = self.data = []
            elif line[0] != 58:  # 58 = ":", a comment
                name, _, value = line.partition(b":")
                if name == b"data":
                    data.append(value[1:] if value[:1] == b" " else value)
        self.clean = not self.line and not data and not self.skip_lf
