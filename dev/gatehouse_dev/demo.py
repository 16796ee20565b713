"""``make demo``: the stack up, examples/demo applied, and one proxied fetch shown end to end."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from gatehouse_dev import stack

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo" / "vendor-api.yaml"
NAMESPACE = "demo"


def manifest(upstream_port: int = stack.DEMO_UPSTREAM_PORT) -> str:
    """The example as applied: its connection's baseURL on the port the stack started the example
    upstream on (GATEHOUSE_DEMO_UPSTREAM_PORT; the file names the default, 18080)."""
    return EXAMPLE.read_text().replace(
        "baseURL: http://127.0.0.1:18080", f"baseURL: http://127.0.0.1:{upstream_port}"
    )


def run(paths: stack.StackPaths) -> None:
    running = stack.up(paths, helm=False)
    cluster = running.cluster
    if cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", NAMESPACE)
    print(f"$ kubectl apply -n {NAMESPACE} -f examples/demo/vendor-api.yaml")
    print(cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=manifest()).stdout)
    cluster.kubectl(
        "wait",
        "-n",
        NAMESPACE,
        "--for=condition=Ready",
        "--timeout=30s",
        "externalconnection/vendor-api",
        "dataapp/sales-dashboard",
    )
    print(f"$ kubectl get externalconnections,dataapps -n {NAMESPACE}")
    print(cluster.kubectl("get", "externalconnections,dataapps", "-n", NAMESPACE).stdout)

    token = cluster.app_token(NAMESPACE, "dataapp-sales-dashboard-gatehouse")
    url = f"{running.proxy_url}/v1/fetch/vendor/echo/v1/orders?page=1"
    print("The app holds only its own proxy credential (Secret dataapp-sales-dashboard-gatehouse):")
    print(f"$ curl -H 'Authorization: Bearer {token[:6]}…' {url}")
    reply = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    echoed = reply.json()
    # Asked of the upstream itself, not through the proxy: what it really received.
    upstream = f"http://127.0.0.1:{stack.DEMO_UPSTREAM_PORT}"
    seen = httpx.get(f"{upstream}/_received/{echoed['id']}", timeout=10).json()
    print(f"HTTP {reply.status_code}; what the upstream received (asked of it directly):")
    print(
        json.dumps(
            {"path": seen["path"], "query": seen["query"], "headers": seen["headers"]}, indent=2
        )
    )
    injected = seen["headers"].get("x-api-key", "")
    print(f"\nX-API-Key {injected!r} was injected by the proxy; the app never held it.")
    print(
        "The upstream echoed it back; the app's copy of that answer reads "
        f"{echoed['headers'].get('x-api-key')!r}."
    )
    print("Headers the app got back:", ", ".join(sorted(reply.headers)))
    print(
        f"\nThe stack keeps running: `source {paths.env_file}` to use it, `make down` to stop it."
    )
