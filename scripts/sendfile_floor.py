#!/usr/bin/env python3
"""What the kernel charges a process that only sendfiles page-cached bytes to a loopback socket
(issue 18: the floor under the broker CPU per GB consumed).

Writes a file of SIZE MiB under $TMPDIR (default /tmp; keep it on the disk the broker uses) in
appends of one producer batch (16 KiB), as a partition's segment is written, reads it once so it
is in the page cache, then ROUNDS times: a reader process connects over 127.0.0.1 and drains the
socket (recv_into a buffer of --read-bytes) while this process sends the whole file with
sendfile(2), --chunk bytes per call (Weir sends one partition's records, at most
max.partition.fetch.bytes = 1 MiB by default, per call). Prints per round the sender's and the
reader's CPU per GB (getrusage) and the sender's share.

The sender does nothing in user space but the sendfile loop, so its CPU per GB is the kernel's:
splicing page-cache folios into socket buffers, and the loopback receive path, which runs in the
softirq of the CPU that transmits and so is charged to the sender whenever the reader is not
itself in the kernel to take its share. Weir's Fetch path sends records the same way (one
sendfile per partition's region), so this is the floor under its figure: the broker cannot spend
less per GB consumed than this loop does on the same machine, whatever its own code does.

Usage: scripts/sendfile_floor.py [--mib SIZE] [--rounds ROUNDS] [--chunk BYTES] [--read-bytes N]
Measured on the 2-core development VM (ext4, kernel 6.18) on 2026-12-05, quiet, 1 GiB rounds at
1.7-1.9 GiB/s: sender 0.46-0.54 s/GB, reader 0.21-0.23 s/GB (the sender pays about 70% of the
kernel's work); the same with 64 KiB reads or 256 KiB sendfile calls. With a build running
beside it the sender paid 0.14-0.37 (the reader's side took more of the loopback work). Weir's
broker during ConsumerPerformance: 0.30-0.38 s/GB, 94% of it kernel
(bench/results/profile-consume-p16.txt); the issue-18 target, 0.2x Kafka's 1.3 s/GB, is about
0.26 s/GB: under what this loop pays.
"""

import argparse
import os
import resource
import shutil
import socket
import tempfile
import time
from multiprocessing import Process, Queue

BATCH = 16384


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def drain(port, read_bytes, results):
    """The reader: takes everything the sender sends and reports its CPU."""
    cpu0 = cpu_seconds()
    with socket.create_connection(("127.0.0.1", port)) as s:
        buf = bytearray(read_bytes)
        received = 0
        while True:
            n = s.recv_into(buf)
            if n == 0:
                break
            received += n
    results.put((received, cpu_seconds() - cpu0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="file size in MiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=1 << 20, help="bytes per sendfile call")
    ap.add_argument("--read-bytes", type=int, default=1 << 20, help="reader's buffer")
    args = ap.parse_args()
    size = args.mib << 20
    work = tempfile.mkdtemp(prefix="weir-sendfile-floor-", dir=os.environ.get("TMPDIR", "/tmp"))
    path = f"{work}/00000000000000000000.log"
    try:
        batch = os.urandom(BATCH)
        with open(path, "wb", buffering=0) as f:
            for _ in range(size // BATCH):
                f.write(batch)
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
        fd = os.open(path, os.O_RDONLY)
        for round_ in range(1, args.rounds + 1):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            results = Queue()
            reader = Process(target=drain,
                             args=(listener.getsockname()[1], args.read_bytes, results))
            reader.start()
            conn, _ = listener.accept()
            listener.close()
            cpu0, t0 = cpu_seconds(), time.monotonic()
            sent = 0
            while sent < size:
                sent += os.sendfile(conn.fileno(), fd, sent, min(args.chunk, size - sent))
            conn.close()
            sender_cpu, elapsed = cpu_seconds() - cpu0, time.monotonic() - t0
            received, reader_cpu = results.get()
            reader.join()
            assert received == size, f"reader got {received} of {size} bytes"
            gb = size / 1e9
            print(f"round {round_}: {size / elapsed / (1 << 20):7.1f} MiB/s; sender "
                  f"{sender_cpu / gb:.3f} s/GB, reader {reader_cpu / gb:.3f} s/GB "
                  f"(sender's share {sender_cpu / (sender_cpu + reader_cpu):.0%})")
        os.close(fd)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
