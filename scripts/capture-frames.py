#!/usr/bin/env python3
"""Capturing TCP proxy for Kafka request frames (issue 5, point 6).

Usage: capture-frames.py LISTEN_PORT UPSTREAM_PORT OUTDIR

Listens on 127.0.0.1:LISTEN_PORT, forwards every connection to a broker on
127.0.0.1:UPSTREAM_PORT, and writes each request frame (without its 4-byte
size prefix) to OUTDIR/<seq>_<api key>_v<version>_<client id>.bin. Start
Weir with advertised.listeners=PLAINTEXT://127.0.0.1:LISTEN_PORT so clients
keep talking through the proxy after bootstrap. This is how the captured
vectors in protocol-compat/tests/vectors/ were made (see their README)."""
import os, socket, struct, sys, threading

listen_port, upstream_port, outdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
seq = [0]

def pump_responses(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass

def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf

def handle(client):
    upstream = socket.create_connection(("127.0.0.1", upstream_port))
    threading.Thread(target=pump_responses, args=(upstream, client), daemon=True).start()
    try:
        while True:
            size = recv_exact(client, 4)
            frame = recv_exact(client, struct.unpack(">i", size)[0])
            key, ver = struct.unpack(">hh", frame[:4])
            cid_len = struct.unpack(">h", frame[8:10])[0]
            cid = frame[10:10 + cid_len].decode(errors="replace") if cid_len > 0 else "null"
            cid = "".join(c if c.isalnum() or c in "-." else "-" for c in cid)
            with lock:
                seq[0] += 1
                n = seq[0]
            with open(os.path.join(outdir, f"{n:04d}_{key}_v{ver}_{cid}.bin"), "wb") as f:
                f.write(frame)
            upstream.sendall(size + frame)
    except (EOFError, OSError):
        pass
    finally:
        for s in (client, upstream):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass

srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(64)
while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
