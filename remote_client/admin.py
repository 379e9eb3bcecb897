"""A cluster's administration over remoting, as RocketMQ's mqadmin (MQAdminExt) does it: the NameServers say which
broker groups there are and which serve a topic; each group's master is asked for its part, and the parts are put
together. Every answer is plain JSON-ready data (what `mqgate admin --namesrv ... --json` prints).

    clusters()               GET_BROKER_CLUSTER_INFO, then GET_BROKER_RUNTIME_INFO of each broker
    topics()                 GET_ALL_TOPIC_LIST_FROM_NAMESERVER, then each topic's route
    topic_status(topic)      the route, then GET_TOPIC_STATS_INFO of each group serving it
    create_topic(...)        UPDATE_AND_CREATE_TOPIC to the master of each group of a cluster, or of one group
    delete_topic(topic)      DELETE_TOPIC_IN_BROKER to each group serving it (they register at once without it)
    groups()                 GET_ALL_SUBSCRIPTIONGROUP_CONFIG of each master, merged by group
    consumer_progress(group) GET_CONSUME_STATS of each master, queue by queue, summed
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from core import GroupNotFoundError, TopicNotFoundError
from remote_client.cluster import Cluster
from remote_client.replies import check
from remote_client.topic_route import MASTER_ID, PERM_READ, PERM_WRITE
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.java_json import loads

_PERMS = {"r": PERM_READ, "w": PERM_WRITE, "rw": PERM_READ | PERM_WRITE}


def perm_of(text: str) -> int:
    perm = _PERMS.get(text)
    if perm is None:
        raise ValueError(f"perm {text!r}: give r, w or rw")
    return perm


def perm_text(perm: int) -> str:
    return ("r" if perm & PERM_READ else "") + ("w" if perm & PERM_WRITE else "") or "-"


class ClusterAdmin:
    def __init__(self, namesrv_addr: str | Sequence[str], request_timeout_s: float = 10.0) -> None:
        self.cluster = Cluster(namesrv_addr, instance_name="mqgate-admin", request_timeout_s=request_timeout_s)

    async def __aenter__(self) -> ClusterAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cluster.remoting.close()

    async def _ask(self, address: str, request: RemotingCommand) -> RemotingCommand:
        return check(await self.cluster.invoke_address(address, request), f"broker {address}")

    async def _masters(self) -> dict[str, tuple[str, str]]:
        """broker name -> (cluster, master address), for every group with a master."""
        info = await self.cluster.namesrvs.cluster_info()
        masters = {}
        for name, group in (info.get("brokerAddrTable") or {}).items():
            address = (group.get("brokerAddrs") or {}).get(str(MASTER_ID))
            if address:
                masters[name] = (group.get("cluster", ""), address)
        return masters

    # --- the cluster ---

    async def clusters(self) -> list[dict[str, Any]]:
        """Every broker the NameServers know: cluster, group, id, address, version, when it last registered, and
        its counts (from the broker itself; `error` when it cannot be asked)."""
        info = await self.cluster.namesrvs.cluster_info()
        live = info.get("brokerLiveTable") or {}
        rows = []
        for name, group in sorted((info.get("brokerAddrTable") or {}).items()):
            for broker_id, address in sorted((group.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0])):
                rows.append({
                    "cluster": group.get("cluster", ""), "broker": name, "id": int(broker_id), "address": address,
                    "last_registration_ms": (live.get(address) or {}).get("lastUpdateTimestamp"),
                })  # fmt: skip

        async def runtime(row: dict[str, Any]) -> None:
            try:
                reply = await self._ask(row["address"], RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
                table = loads(reply.body).get("table") or {}
            except Exception as exc:
                row["error"] = str(exc)
                return
            row["version"] = table.get("brokerVersionDesc", "")
            row["role"] = table.get("brokerRole", "ASYNC_MASTER" if row["id"] == MASTER_ID else "SLAVE")
            row["messages_in_today"] = int(table.get("msgPutTotalTodayNow", 0))
            row["messages_out_today"] = int(table.get("msgGetTotalTodayNow", 0))
            row["topics"] = int(table.get("topicCount", 0))
            try:
                reply = await self._ask(row["address"], RemotingCommand(RequestCode.GET_BROKER_HA_STATUS))
                status = loads(reply.body)
            except Exception:  # a broker that does not answer 907 (Apache RocketMQ 4 before 5.0)
                return
            if row["id"] == MASTER_ID:
                row["slaves"] = [_slave_row(entry) for entry in status.get("haConnectionInfo") or []]
            else:
                row["ha_link"] = str((status.get("haClientRuntimeInfo") or {}).get("localAddr") or "")

        await asyncio.gather(*(runtime(row) for row in rows))
        _match_slaves(rows)
        return rows

    # --- topics ---

    async def topics(self) -> list[dict[str, Any]]:
        names = await self.cluster.namesrvs.topic_names()
        routes = await asyncio.gather(*(self.cluster.namesrvs.route(name) for name in names))
        rows = []
        for name, route in zip(names, routes, strict=True):
            if route is None:
                continue  # gone between the two questions
            groups: dict[str, dict[str, Any]] = {
                data.broker_name: {"read_queues": data.read_queue_nums, "write_queues": data.write_queue_nums,
                                   "perm": perm_text(data.perm)}
                for data in route.queue_datas
            }  # fmt: skip
            rows.append({
                "topic": name, "groups": groups,
                "read_queues": sum(g["read_queues"] for g in groups.values()),
                "write_queues": sum(g["write_queues"] for g in groups.values()),
            })  # fmt: skip
        return rows

    async def topic_status(self, topic: str) -> dict[str, Any]:
        route = await self.cluster.namesrvs.route(topic)
        if route is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist: no broker of the cluster serves it")

        async def stats(broker: str) -> list[dict[str, Any]]:
            address = route.master(broker)
            if address is None:
                return []
            reply = await self._ask(
                address, RemotingCommand(RequestCode.GET_TOPIC_STATS_INFO, ext_fields={"topic": topic})
            )
            table = loads(reply.body).get("offsetTable") or {}
            rows = []
            for key, value in table.items():
                queue = json.loads(key)
                rows.append({
                    "broker": queue["brokerName"], "queue_id": queue["queueId"], "min_offset": value["minOffset"],
                    "max_offset": value["maxOffset"], "messages": value["maxOffset"] - value["minOffset"],
                    "last_update_ms": value.get("lastUpdateTimestamp") or None,
                })  # fmt: skip
            return rows

        brokers = sorted({data.broker_name for data in route.queue_datas})
        parts = await asyncio.gather(*(stats(broker) for broker in brokers))
        queues = sorted((row for part in parts for row in part), key=lambda r: (r["broker"], r["queue_id"]))
        return {
            "topic": topic,
            "groups": {d.broker_name: {"read_queues": d.read_queue_nums, "write_queues": d.write_queue_nums,
                                       "perm": perm_text(d.perm), "master": route.master(d.broker_name)}
                       for d in route.queue_datas},
            "queues": queues,
            "messages": sum(row["messages"] for row in queues),
        }  # fmt: skip

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker: str | None = None,
        read_queues: int = 8,
        write_queues: int = 8,
        perm: int = PERM_READ | PERM_WRITE,
        message_type: str | None = None,
    ) -> list[str]:
        """Create (or change) the topic on every group of `cluster`, or on group `broker`; the groups done.
        LookupError names a cluster or group the NameServers do not know."""
        masters = await self._masters()
        if broker is not None:
            if broker not in masters:
                raise LookupError(f"broker group {broker!r} is not registered with a master (known: {sorted(masters)})")
            targets = [broker]
        else:
            targets = sorted(name for name, (owner, _) in masters.items() if owner == cluster)
            if not targets:
                known = sorted({owner for owner, _ in masters.values()})
                raise LookupError(f"cluster {cluster!r} has no broker group with a master (known clusters: {known})")
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read_queues),
                  "writeQueueNums": str(write_queues), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
                  "topicSysFlag": "0", "order": "false"}  # fmt: skip
        if message_type is not None:
            fields["attributes"] = f"+message.type={message_type}"
        await asyncio.gather(
            *(self._ask(masters[name][1], RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=fields))
              for name in targets)
        )  # fmt: skip
        return targets

    async def delete_topic(self, topic: str) -> list[str]:
        route = await self.cluster.namesrvs.route(topic)
        if route is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist: no broker of the cluster serves it")
        targets = sorted(name for name in route.brokers if route.master(name))
        await asyncio.gather(*(
            self._ask(route.master(name) or "", RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER,
                                                                ext_fields={"topic": topic}))
            for name in targets
        ))  # fmt: skip
        return targets

    # --- groups ---

    async def groups(self) -> list[dict[str, Any]]:
        masters = await self._masters()

        async def of(address: str) -> dict[str, Any]:
            reply = await self._ask(address, RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
            table: dict[str, Any] = loads(reply.body).get("subscriptionGroupTable") or {}
            return table

        names = sorted(masters)
        tables = await asyncio.gather(*(of(masters[name][1]) for name in names))
        merged: dict[str, dict[str, Any]] = {}
        for name, table in zip(names, tables, strict=True):
            for group, config in table.items():
                row = merged.setdefault(group, {"group": group, "brokers": [],
                                                "retry_max_times": config.get("retryMaxTimes")})  # fmt: skip
                row["brokers"].append(name)
        return [merged[group] for group in sorted(merged)]

    async def consumer_progress(self, group: str, topic: str | None = None) -> dict[str, Any]:
        masters = await self._masters()

        async def of(address: str) -> list[dict[str, Any]] | None:
            fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
            try:
                reply = await self._ask(address, RemotingCommand(RequestCode.GET_CONSUME_STATS, ext_fields=fields))
            except GroupNotFoundError:
                return None  # a group is made on the brokers its consumers reach: this one has not seen it
            rows = []
            for key, value in (loads(reply.body).get("offsetTable") or {}).items():
                queue = json.loads(key)
                broker_offset, consumer_offset = value["brokerOffset"], value["consumerOffset"]
                rows.append({
                    "topic": queue["topic"], "broker": queue["brokerName"], "queue_id": queue["queueId"],
                    "broker_offset": broker_offset, "consumer_offset": consumer_offset,
                    "lag": max(0, broker_offset - consumer_offset),
                    "last_consume_ms": value.get("lastTimestamp") or None,
                })  # fmt: skip
            return rows

        found = [
            part for part in await asyncio.gather(*(of(address) for _, address in masters.values())) if part is not None
        ]
        if not found:
            raise GroupNotFoundError(f"consumer group {group!r} does not exist on any broker group of the cluster")
        queues = sorted((row for part in found for row in part), key=lambda r: (r["topic"], r["broker"], r["queue_id"]))
        return {"group": group, "queues": queues, "lag": sum(row["lag"] for row in queues)}


def _slave_row(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "address": str(entry.get("addr", "")),
        "lag_bytes": int(entry.get("diff", 0)),
        "lag_s": float(entry.get("lagSeconds", 0.0)),
        "in_sync": bool(entry.get("inSync", False)),
    }


def _match_slaves(rows: list[dict[str, Any]]) -> None:
    """Give each slave's row its lag as its master sees it (the master knows its slaves by the address their HA
    link comes from, which each slave names), and each master's row whether a slave is in sync."""
    masters = {row["broker"]: row for row in rows if row["id"] == MASTER_ID}
    for row in rows:
        master = masters.get(row["broker"])
        if row["id"] == MASTER_ID:
            slaves = row.get("slaves")
            if slaves is not None:
                row["in_sync"] = any(slave["in_sync"] for slave in slaves)
            continue
        if master is None:
            row["replication"] = "no master"
            continue
        links = [slave for slave in master.get("slaves") or [] if row.get("ha_link") == slave["address"]]
        if links:
            link = links[0]
            row["lag_bytes"], row["lag_s"], row["in_sync"] = link["lag_bytes"], link["lag_s"], link["in_sync"]
        else:
            row["replication"] = "not connected"
