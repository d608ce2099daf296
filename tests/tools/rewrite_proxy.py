#!/usr/bin/python3
"""A proxy on the path: listens on 127.0.0.1 (a free port, printed as
"PORT=N" on stdout), forwards every connection to TARGET_HOST:TARGET_PORT,
and rewrites the first line each client sends (its HELLO) with the regular
expression FROM -> TO, as an attacker between participant and host would
(docs/security.md, "someone on the path"). Each rewrite is logged on stderr
as "rewrote: OLD -> NEW". Runs until killed.
Usage: rewrite_proxy.py TARGET_HOST TARGET_PORT FROM TO"""
import re, socket, sys, threading

target = (sys.argv[1], int(sys.argv[2]))
pattern, replacement = re.compile(sys.argv[3].encode()), sys.argv[4].encode()


def pump(src, dst, rewrite_first_line):
    buf = b""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if rewrite_first_line:
                buf += data
                if b"\n" not in buf:
                    continue
                line, rest = buf.split(b"\n", 1)
                new = pattern.sub(replacement, line, count=1)
                print(f"rewrote: {line.decode(errors='replace')} -> {new.decode(errors='replace')}",
                      file=sys.stderr, flush=True)
                data, rewrite_first_line = new + b"\n" + rest, False
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(f"PORT={listener.getsockname()[1]}", flush=True)
while True:
    client, _ = listener.accept()
    host = socket.create_connection(target)
    threading.Thread(target=pump, args=(client, host, True), daemon=True).start()
    threading.Thread(target=pump, args=(host, client, False), daemon=True).start()
