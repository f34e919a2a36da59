#!/usr/bin/env python3
"""What one fdatasync of a small append costs on this machine, and whether flushing several
files from one thread makes it cheaper (issue 18: the bound of durable acks=all).

Each round appends 16 KiB (a producer batch) to each of N files in a directory under $TMPDIR
(default /tmp: keep it on the disk the broker uses), then makes them durable in one of three
ways, as a broker could for N partitions:
  parallel    one fdatasync per file, on N threads at once (Weir: one blocking-pool task per
              partition, so ext4's journal commits them together);
  sequential  one fdatasync per file, one after another on one thread;
  batched     on one thread, sync_file_range(SYNC_FILE_RANGE_WRITE) of every file first, then
              one fdatasync per file (in the hope that the first journal commit covers all).
Prints, per mode, milliseconds per round, CPU microseconds (user + system of this process,
threads included) and context switches per fdatasync.

Usage: scripts/fsync_cost.py [--files N] [--rounds R]
Measured on the 2-core development VM (ext4, virtio) on 2026-12-04, beside a CI run: parallel
0.4-1.0 ms a round of 8 files, 72-102 us of CPU and 7-9 context switches per fdatasync;
sequential and batched 85-122 us of CPU per fdatasync (fewer switches) but 18-29 ms a round:
ext4 records the new on-disk size when the write completes, in a new journal transaction, so
each file's fdatasync still waits for a commit of its own. So the CPU of durable acks=all is
about 100 us per fdatasync whichever way they are issued, and only fewer fdatasyncs per GB
would lower it.
"""

import argparse
import ctypes
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

SYNC_FILE_RANGE_WRITE = 2
BATCH = 16384


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=8, help="files (partitions) per round")
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]

    def start_writeback(fd):
        if libc.sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "sync_file_range")

    work = tempfile.mkdtemp(prefix="weir-fsync-cost-", dir=os.environ.get("TMPDIR", "/tmp"))
    fds = [os.open(f"{work}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
           for i in range(args.files)]
    pool = ThreadPoolExecutor(max_workers=args.files)

    def parallel():
        list(pool.map(os.fdatasync, fds))

    def sequential():
        for fd in fds:
            os.fdatasync(fd)

    def batched():
        for fd in fds:
            start_writeback(fd)
        for fd in fds:
            os.fdatasync(fd)

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw

    payload = os.urandom(BATCH)
    try:
        # Alternating, so that the machine's drift hits every mode alike.
        for name, sync in [("parallel", parallel), ("sequential", sequential),
                           ("batched", batched)] * 2:
            cpu0, switches0 = usage()
            t0 = time.monotonic()
            for _ in range(args.rounds):
                for fd in fds:
                    os.write(fd, payload)
                sync()
            cpu1, switches1 = usage()
            syncs = args.files * args.rounds
            print(f"{name:10s} files={args.files}: "
                  f"{1000 * (time.monotonic() - t0) / args.rounds:6.2f} ms/round, "
                  f"{1e6 * (cpu1 - cpu0) / syncs:6.1f} us CPU and "
                  f"{(switches1 - switches0) / syncs:5.2f} context switches per fdatasync")
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
