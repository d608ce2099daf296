"""The host of the TCPStore barrier (bench/compare.sh): a PyTorch TCPStore
master on 127.0.0.1. Prints TCPSTORE_ADDR=127.0.0.1:PORT, then serves until
killed."""
import signal
import sys
import time
from datetime import timedelta

from torch.distributed import TCPStore

port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
store = TCPStore("127.0.0.1", port, None, True, timedelta(seconds=600), wait_for_workers=False)
print(f"TCPSTORE_ADDR=127.0.0.1:{store.port}", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
