"""What automatic failover will stand on, checked where the tests run: Debian's etcd 3.4 (installed by `make deb`)
with the pinned aetcd over the project's grpcio and protobuf: a lease that expires when not kept alive, and a
compare-and-set transaction that only one of two writers wins."""

from __future__ import annotations

import asyncio

import aetcd

from tests.etcd_process import EtcdProcess


async def test_leases_expire_and_compare_and_set_has_one_winner(tmp_path):
    etcd = EtcdProcess(tmp_path / "etcd")
    try:
        client = aetcd.Client(host="127.0.0.1", port=etcd.client_port)
        try:
            lease = await client.lease(1)
            await client.put(b"/mqgate/test/alive", b"broker-a", lease=lease)
            assert (await client.get(b"/mqgate/test/alive")).value == b"broker-a"
            for _ in range(60):  # a 1 s lease not kept alive is gone within a few seconds
                if await client.get(b"/mqgate/test/alive") is None:
                    break
                await asyncio.sleep(0.1)
            assert await client.get(b"/mqgate/test/alive") is None

            key = b"/mqgate/test/epoch"

            async def claim(epoch: bytes) -> bool:
                compare = [client.transactions.version(key) == 0]
                success = [client.transactions.put(key, epoch)]
                succeeded, _ = await client.transaction(compare=compare, success=success, failure=[])
                return bool(succeeded)

            results = await asyncio.gather(claim(b"1"), claim(b"2"))
            assert sorted(results) == [False, True]
            assert (await client.get(key)).value in (b"1", b"2")
        finally:
            await client.close()
    finally:
        etcd.stop()
