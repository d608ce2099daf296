#!/usr/bin/python3
"""A TCP proxy whose existing connections can be turned into a dead link.

    blackhole.py LISTEN_PORT TARGET_HOST:TARGET_PORT [--lifetime S]

Prints "<ready>" once it listens on 127.0.0.1:LISTEN_PORT. On SIGUSR1 every
connection open at that moment goes dead: nothing more is carried in either
direction and nothing is closed, as when a cable is pulled. Connections made
later are carried normally. Exits after --lifetime seconds (default 60) or on
SIGTERM.
"""
import argparse
import asyncio
import signal
import sys


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("target")
    ap.add_argument("--lifetime", type=float, default=60)
    a = ap.parse_args()
    host, port = a.target.rsplit(":", 1)
    pairs = []  # [dead flag holder]

    async def pump(reader, writer, state):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if state["dead"]:
                    # The link is dead: hold everything, forever.
                    await asyncio.Event().wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        if not state["dead"]:
            writer.close()

    async def handle(creader, cwriter):
        try:
            sreader, swriter = await asyncio.open_connection(host, int(port))
        except OSError:
            cwriter.close()
            return
        state = {"dead": False}
        pairs.append(state)
        await asyncio.gather(pump(creader, swriter, state), pump(sreader, cwriter, state))

    def kill_links():
        for st in pairs:
            st["dead"] = True
        print("<dead> %d" % len(pairs), flush=True)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, kill_links)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await asyncio.start_server(handle, "127.0.0.1", a.port)
    print("<ready>", flush=True)
    try:
        await asyncio.wait_for(stop.wait(), a.lifetime)
    except asyncio.TimeoutError:
        pass
    server.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
