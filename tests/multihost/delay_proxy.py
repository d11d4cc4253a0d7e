"""A TCP relay that delays every chunk by a fixed time in both directions: a slow link between two hosts.

    python delay_proxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

Order is kept per direction; a connection's round trip grows by twice DELAY_MS. Used where `tc netem` is missing.
"""

from __future__ import annotations

import asyncio
import sys
import time


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if not chunk:
                writer.close()
                return
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while chunk := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay_s, chunk))
    finally:
        queue.put_nowait((time.monotonic() + delay_s, b""))
        await sender


async def main(listen: str, port: int, target: str, target_port: int, delay_s: float) -> None:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(target, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, delay_s),
            pump(server_reader, client_writer, delay_s),
            return_exceptions=True,
        )

    server = await asyncio.start_server(relay, listen, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    host, port, target, target_port, delay_ms = sys.argv[1:6]
    asyncio.run(main(host, int(port), target, int(target_port), float(delay_ms) / 1000))
