"""The dashboard at /dashboard on mqgate's HTTP port, after the RocketMQ Dashboard: overview (rates over time,
disk, connections), topics, consumer groups with lag, MQTT clients, rules and targets with delivery counts and dead
letters, connectors, and a message search.

It is three static files (mqgate/http/dashboard_files: the page, its script and stylesheet) that read the admin,
EventBridge and connector APIs from the browser; nothing is fetched from elsewhere, so it works offline. The same
access rule as every route of the port applies (mqgate.http.access): with a token or admin users set, the browser
asks for a user and password before the page loads.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

FILES = Path(__file__).with_name("dashboard_files")
INDEX = FILES / "index.html"


def add_routes(app: web.Application) -> None:
    app.router.add_get("/dashboard", _index)
    app.router.add_get("/dashboard/", _index)
    app.router.add_static("/dashboard/static", FILES, show_index=False, follow_symlinks=False)


async def _index(_request: web.Request) -> web.FileResponse:
    # no-cache: the browser revalidates, so an upgraded mqgate serves its new page at once.
    return web.FileResponse(INDEX, headers={"Cache-Control": "no-cache"})
