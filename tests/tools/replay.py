#!/usr/bin/python3
"""Authenticates once with the shared secret, then replays the same client
lines on a second connection. Prints the host's answer to each attempt.
Usage: replay.py HOST PORT SECRET_FILE"""
import hashlib, hmac, socket, sys

host, port, secret_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
secret = open(secret_file).read().strip().encode()
cn = "00112233445566778899aabbccddeeff"


def session(lines_to_send=None):
    s = socket.create_connection((host, port), timeout=5)
    f = s.makefile("rwb")
    f.write(f"HELLO v=1 host=replay pid=1 nonce={cn}\n".encode()); f.flush()
    hello = f.readline().decode().strip()
    fields = dict(t.split("=", 1) for t in hello.split()[1:] if "=" in t)
    if lines_to_send is None:
        proof = hmac.new(secret, f"tfbarrier-client-proof\n{cn}\n{fields['nonce']}".encode(), hashlib.sha256).hexdigest()
        sk = hmac.new(secret, f"tfbarrier-session-key\n{cn}\n{fields['nonce']}".encode(), hashlib.sha256).hexdigest()
        mac = hmac.new(sk.encode(), b"to-host\n0\nPING", hashlib.sha256).hexdigest()[:32]
        auth = f"AUTH proof={proof}\nPING mac={mac}\n"
    else:
        auth = lines_to_send
    f.write(auth.encode()); f.flush()
    answer = f.readline().decode().strip()
    s.close()
    return auth, answer


auth, first = session()
print("first:", first)
_, second = session(auth)
print("replayed:", second)
