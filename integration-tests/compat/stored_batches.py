"""Reads back the record batches a broker stored, without any client
library: one Fetch v4 request over a socket, returning each batch's base
offset, record count and compression codec. The checks use it to show that
a client really sent the codec it was asked for (a client's consumer
decompresses transparently, so it cannot tell)."""

import socket
import struct

# The codec id in a record batch's attributes (bits 0-2), by name.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_batches(bootstrap, topic, partition, timeout_s=60):
    """The (base offset, record count, codec id) of every whole record batch
    that a Fetch v4 from offset 0 (up to 16 MiB) returns for topic/partition.

    Raises RuntimeError on a partition error or a short response."""
    host, port = bootstrap.rsplit(":", 1)
    name = topic.encode()
    # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level
    body = struct.pack(">iiiib", -1, 100, 1, 16 << 20, 0)
    body += struct.pack(">ih", 1, len(name)) + name
    # partition, fetch_offset, partition_max_bytes
    body += struct.pack(">iiqi", 1, partition, 0, 16 << 20)
    client_id = b"compat-stored-batches"
    # api_key 1 (Fetch), api_version 4, correlation_id 7
    header = struct.pack(">hhih", 1, 4, 7, len(client_id)) + client_id
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        data = _recv_exactly(sock, size)
    pos = 4 + 4 + 4  # correlation_id, throttle_time_ms, topics count
    (name_len,) = struct.unpack_from(">h", data, pos)
    pos += 2 + name_len + 4  # topic name, partitions count
    _part, error, _hw, _lso, aborted = struct.unpack_from(">ihqqi", data, pos)
    if error != 0:
        raise RuntimeError(f"Fetch v4 {topic}/{partition}: error code {error}")
    pos += 4 + 2 + 8 + 8 + 4 + 16 * max(aborted, 0)
    (records_len,) = struct.unpack_from(">i", data, pos)
    pos += 4
    end = pos + records_len
    batches = []
    # A v2 batch: base_offset i64, length i32, leader_epoch i32, magic i8,
    # crc u32, attributes i16 (at 21), ..., records count i32 (at 57).
    while pos + 61 <= end:
        base_offset, batch_len = struct.unpack_from(">qi", data, pos)
        if pos + 12 + batch_len > end:
            break  # a partial batch at the end of the response
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        batches.append((base_offset, count, attributes & 7))
        pos += 12 + batch_len
    return batches


def _recv_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("broker closed the connection mid-response")
        buf += chunk
    return buf
