#!/usr/bin/python3
"""Prints the expected digest of HmacSha256.MatchesPythonAcrossBlockBoundaries
(tests/unit/sha256_test.cpp), computed with Python's own hashlib and hmac."""
import hashlib
import hmac

acc = hashlib.sha256()
for L in range(200):
    msg = bytes((i * 7 + L) % 256 for i in range(L))
    key = bytes((i * 13 + 5) % 256 for i in range((L * 11) % 150))
    acc.update(hmac.new(key, msg, hashlib.sha256).digest())
    acc.update(hashlib.sha256(msg).digest())
print(acc.hexdigest())
