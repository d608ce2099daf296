#!/usr/bin/python3
"""Authenticates once with the shared secret, then replays the same client
lines on a second connection. Prints the host's answer to each attempt.
A client of protocol 2 written from docs/protocol.md alone: the proofs cover
the transcript of both HELLO lines.
Usage: replay.py HOST PORT SECRET_FILE"""
import hashlib, hmac, socket, sys

host, port, secret_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
secret = open(secret_file).read().strip().encode()
cn = "00112233445566778899aabbccddeeff"


def transcript(client_hello, host_hello):
    """SHA-256 of both HELLO lines (no line endings), the host's without its proof= field."""
    unsigned = " ".join(t for t in host_hello.split(" ") if not t.startswith("proof="))
    return hashlib.sha256(f"{client_hello}\n{unsigned}\n".encode()).hexdigest()


def session(lines_to_send=None):
    s = socket.create_connection((host, port), timeout=5)
    f = s.makefile("rwb")
    hello_line = f"HELLO v=2 host=replay pid=1 nonce={cn}"
    f.write(f"{hello_line}\n".encode()); f.flush()
    hello = f.readline().decode().rstrip("\r\n")
    fields = dict(t.split("=", 1) for t in hello.split()[1:] if "=" in t)
    if lines_to_send is None:
        t = transcript(hello_line, hello)
        hp = hmac.new(secret, f"tfbarrier-host-proof\n{cn}\n{fields['nonce']}\n{t}".encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(hp, fields["proof"]):
            sys.exit(f"the host's proof does not check: {hello}")
        proof = hmac.new(secret, f"tfbarrier-client-proof\n{cn}\n{fields['nonce']}\n{t}".encode(), hashlib.sha256).hexdigest()
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
