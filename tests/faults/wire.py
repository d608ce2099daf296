#!/usr/bin/python3
"""Raw protocol client for tests: sends bytes, prints what comes back.

    wire.py ADDR [--hold S] [--lines]  LINE...     send each LINE + "\\n", print the replies
    wire.py ADDR --silent N [--hold S]             open N connections that never speak, hold them S s
    wire.py ADDR --half-open TEXT [--hold S]       send TEXT (no newline) and hold the connection
    wire.py ADDR --no-read [--hold S]              HELLO, then STATUS requests forever, reading nothing
    wire.py ADDR --long BYTES [LINE...]            send the LINEs, then one line of BYTES bytes, reading
                                                   the replies meanwhile

Replies are printed one per line, then "<closed>" if the host closed the
connection, or "<open>" if it was still open after --hold seconds (default 3).
--silent and --half-open print "<ready>" once their connections are open
(so a test can go on) and exit when killed or after --hold.
--no-read prints "<dropped after N bytes>" when the host drops it.
"""
import argparse
import resource
import socket
import sys
import time


def connect(addr, rcvbuf=None):
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((host, int(port)))
    return s


def send_all(s, data):
    """sendall that tolerates the socket's read timeout (another thread reads it meanwhile)."""
    view = memoryview(data)
    while view:
        try:
            n = s.send(view)
        except socket.timeout:
            continue
        view = view[n:]


def read_until_close(s, hold):
    s.settimeout(0.2)
    buf = b""
    deadline = time.monotonic() + hold
    closed = False
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
    for line in buf.split(b"\n"):
        if line:
            print(line.decode("utf-8", "replace"))
    print("<closed>" if closed else "<open>")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("lines", nargs="*")
    ap.add_argument("--hold", type=float, default=3.0)
    ap.add_argument("--silent", type=int)
    ap.add_argument("--half-open")
    ap.add_argument("--no-read", action="store_true")
    ap.add_argument("--long", type=int)
    a = ap.parse_intermixed_args()

    if a.silent:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < a.silent + 64:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.silent + 64), hard))
        socks = [connect(a.addr) for _ in range(a.silent)]
        print("<ready> %d" % len(socks), flush=True)
        time.sleep(a.hold)
        return 0
    if a.half_open is not None:
        s = connect(a.addr)
        s.sendall(a.half_open.encode())
        print("<ready>", flush=True)
        read_until_close(s, a.hold)
        return 0
    if a.no_read:
        s = connect(a.addr, rcvbuf=4096)
        s.sendall(b"HELLO v=2 host=noreader pid=1\n")
        req = b"STATUS scope=* name=- detail=1\n" * 64
        sent = 0
        deadline = time.monotonic() + a.hold
        s.settimeout(1.0)
        try:
            while time.monotonic() < deadline:
                try:
                    sent += s.send(req)
                except socket.timeout:
                    continue
        except (BrokenPipeError, ConnectionResetError):
            print("<dropped after %d bytes>" % sent, flush=True)
            return 0
        print("<not dropped after %d bytes>" % sent, flush=True)
        return 1
    if a.long:
        import threading
        s = connect(a.addr)
        reader = threading.Thread(target=read_until_close, args=(s, a.hold))
        reader.start()
        try:
            send_all(s, b"".join(l.encode() + b"\n" for l in a.lines))
            chunk = b"a" * (1 << 20)
            left = a.long
            while left > 0:
                send_all(s, chunk[:left])
                left -= len(chunk)
            send_all(s, b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the host closed it, as it should
        reader.join()
        return 0
    s = connect(a.addr)
    data = b"".join(l.encode("utf-8", "surrogateescape") + b"\n" for l in a.lines)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    read_until_close(s, a.hold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
