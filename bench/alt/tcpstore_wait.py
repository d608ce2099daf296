"""One participant of a TCPStore barrier (bench/compare.sh):
    tcpstore_wait.py PORT KEY N
adds 1 to KEY; the one that makes it N sets KEY:go; everyone waits for
KEY:go. As torch.distributed's own store-based barriers do."""
import sys
from datetime import timedelta

from torch.distributed import TCPStore

port, key, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=300))
if store.add(key, 1) == n:
    store.set(key + ":go", "1")
store.wait([key + ":go"])
