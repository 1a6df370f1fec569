"""The Python client's side of its overhead over the Swift API (docs/benchmarks.md, "contract"):
a new account, a room, and N sends through the Python client one after the other, timed until the
last returns. `symorva-bench contract-send` times the same through the Swift API.

    SYMORVA_FFI_LIB=.build/release/libSymorvaFFI.so python3 clients/python/bench_send.py MANIFEST [N]
"""

import asyncio
import sys
import tempfile
import time
import uuid

import symorva


async def main(manifest, count):
    client = await symorva.Client.open(manifest, tempfile.mkdtemp(prefix="symorva-py-bench-"))
    await client.session.register("bp" + uuid.uuid4().hex[:8], uuid.uuid4().hex)
    room_id = await client.chat.create_room(name="Bench")
    conversation = await client.chat.conversation(room_id)
    start = time.perf_counter()
    for index in range(count):
        await conversation.send(f"message {index}")
    elapsed = time.perf_counter() - start
    print(f"contract-send: Python client, {count} sends: {elapsed * 1000:.1f} ms, {elapsed * 1e6 / count:.1f} µs per message")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000))
