#!/usr/bin/python3
"""A plain TCP relay on loopback: listens on 127.0.0.1 (a free port, printed
as "PORT=N" on stdout), and forwards every connection to
TARGET_HOST:TARGET_PORT. The tests put one between a single tfbarrier host
and etcd, and freeze it (SIGSTOP) to cut that host alone off from etcd while
the other hosts keep it: connections stay open and carry nothing, new ones
are taken by the kernel and answered by no one, as behind a dead link.
SIGCONT lets everything through again. Runs until killed.
Usage: tcp_relay.py TARGET_HOST TARGET_PORT"""
import socket, sys, threading

target = (sys.argv[1], int(sys.argv[2]))


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client):
    try:
        upstream = socket.create_connection(target)
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(128)
print(f"PORT={listener.getsockname()[1]}", flush=True)
while True:
    conn, _ = listener.accept()
    serve(conn)
