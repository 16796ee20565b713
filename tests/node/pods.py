"""Pods the node tests run, all from the Gatehouse proxy image (the node needs no other besides
pause, CoreDNS and the store's): an upstream that records what it received, the dev
authorization server (its aiohttp is the image's), and clients that fetch through the proxy
Service or knock on the store. Their scripts are mounted from ConfigMaps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.node.images import chart_image_references
from gatehouse_dev.waiting import wait_for

# The proxy's image: the smaller one, and its Python runs the scripts.
IMAGE = chart_image_references()["proxy"]
DEV_PACKAGE = Path(__file__).resolve().parents[2] / "dev" / "gatehouse_dev"
# The dev authorization server's modules, run in a Pod as the package gatehouse_dev (its
# __init__ empty: the proxy image holds none of the rest).
TOKEN_ENDPOINT_MODULES = ("token_endpoint.py", "authorization_code.py")

UPSTREAM_SCRIPT = """
import http.server, json

class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        received = {"path": self.path, "x-api-key": self.headers.get("X-API-Key")}
        print(json.dumps(received), flush=True)
        body = json.dumps({"received": received}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("", 8080), Recorder).serve_forever()
"""

# Fetches through the proxy for SECONDS (one request every 50 ms, each on a new connection, so
# each is balanced anew), printing every failure, each minute's latency percentiles, and then a
# summary line.
CLIENT_SCRIPT = """
import json, os, time, urllib.request

def percentile(values, share):
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1000, 1)

url, token = os.environ["URL"], os.environ["TOKEN"]
ok = failed = 0
end = time.monotonic() + float(os.environ["SECONDS"])
window, window_end, took = 0, time.monotonic() + 60, []
print(json.dumps({"started": True}), flush=True)
while time.monotonic() < end:
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            last = json.loads(reply.read())
            ok += 1
            took.append(time.monotonic() - started)
    except Exception as error:
        failed += 1
        print(json.dumps({"failure": repr(error), "at": time.time()}), flush=True)
    if time.monotonic() >= window_end and took:
        print(json.dumps({"window": window, "requests": len(took), "p50_ms": percentile(took, 0.5),
                          "p99_ms": percentile(took, 0.99)}), flush=True)
        window, window_end, took = window + 1, window_end + 60, []
    time.sleep(0.05)
print(json.dumps({"ok": ok, "failed": failed, "last": last if ok else None}), flush=True)
"""

PAGE_SCRIPT = """
import json, os, urllib.request

pages = {}
for url in os.environ["URLS"].split():
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            pages[url] = [reply.status, reply.read().decode(errors="replace")[:4000]]
    except Exception as error:
        pages[url] = [0, repr(error)]
print(json.dumps({"ok": True, "pages": pages}), flush=True)
"""

# Posts a review straight to a webhook's URL, as any Pod could, trusting whatever certificate the
# server shows and presenting none of its own; prints the answer, or why there was none.
FORGED_REVIEW_SCRIPT = """
import json, os, ssl, urllib.request

context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
request = urllib.request.Request(
    os.environ["URL"], data=os.environ["REVIEW"].encode(),
    headers={"Content-Type": "application/json"},
)
try:
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        answer = {"status": reply.status, "body": reply.read().decode(errors="replace")[:4000]}
    print(json.dumps({"ok": True, **answer}), flush=True)
except Exception as error:
    print(json.dumps({"ok": False, "error": repr(error)}), flush=True)
"""

# Sends COUNT requests one after the other, each on a new connection (so each is balanced anew
# over the proxy Pods), and prints how many got each status, the last answer that passed and the
# first refusals' bodies.
COUNTING_SCRIPT = """
import json, os, urllib.error, urllib.request

url, token, statuses, last = os.environ["URL"], os.environ["TOKEN"], {}, None
refused = []
for _ in range(int(os.environ["COUNT"])):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            status, last = reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        status = error.code
        refused.append(error.read().decode(errors="replace")[:500])
    except Exception as error:
        status = repr(error)
    statuses[str(status)] = statuses.get(str(status), 0) + 1
print(json.dumps({"ok": True, "statuses": statuses, "last": last, "refused": refused[:3]}),
      flush=True)
"""

# Opens a TCP connection to HOST:PORT and says PING, as any Pod could; prints whether it
# connected and what the server answered.
KNOCK_SCRIPT = """
import json, os, socket

try:
    with socket.create_connection((os.environ["HOST"], int(os.environ["PORT"])), timeout=5) as c:
        c.settimeout(5)
        c.sendall(b"PING\\r\\n")
        answer = {"connected": True, "reply": c.recv(200).decode(errors="replace").strip()}
except OSError as error:
    answer = {"connected": False, "error": repr(error)}
print(json.dumps({"ok": True, **answer}), flush=True)
"""

# An admin connecting a connection's shared account, as `gatehouse connect` and a browser do:
# the service API's link (with the Pod's ServiceAccount token), the link's page, the click (the
# link's id posted from the page's origin: the page's cookie and the provider's URL), the
# provider's scripted consent as ACCOUNT, and the callback with the cookie. Redirects are not
# followed: each step is checked. Prints the step that failed, or the page's last answer.
CONNECT_SCRIPT = """
import html, json, os, re, urllib.error, urllib.parse, urllib.request

class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None

opener = urllib.request.build_opener(Stay)
page, account = os.environ["PAGE"], os.environ["ACCOUNT"]

def call(step, url, want, data=None, headers=None):
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        reply = opener.open(request, timeout=30)
    except urllib.error.HTTPError as error:
        reply = error
    body = reply.read().decode(errors="replace")
    if reply.status not in want:
        print(json.dumps({"ok": False, "step": step, "status": reply.status, "body": body[:2000]}))
        raise SystemExit(0)
    return reply, body

token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read().strip()
_, body = call("link", page + os.environ["CONNECT_PATH"], (201,), data=b"",
               headers={"Authorization": "Bearer " + token})
link = json.loads(body)["connectUrl"]
call("landing", link.partition("#")[0], (200,))
form = urllib.parse.urlencode({"flow": link.partition("#")[2]}).encode()
begun, body = call("begin", page + "/ui/connect", (200,), data=form,
                   headers={"Origin": page, "Content-Type": "application/x-www-form-urlencoded"})
cookie = begun.headers["Set-Cookie"].partition(";")[0]
found = (re.search(r'id="provider" href="([^"]+)"', body)
         or re.search(r'<a href="([^"]+)" id="provider"', body))
provider = html.unescape(found.group(1))
consented, _ = call("consent", provider + "&consent=approve&user=" + account, (302, 303))
callback = consented.headers["Location"]
_, body = call("callback", callback, (200,), headers={"Cookie": cookie})
print(json.dumps({"ok": True, "callback": callback.partition("?")[0],
                  "connected": "Connected" in body}), flush=True)
"""

SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _script_volume(config_map: str) -> dict[str, Any]:
    return {"name": "script", "configMap": {"name": config_map}}


def upstream(namespace: str, cluster_ip: str) -> list[dict[str, Any]]:
    labels = {"app": "upstream"}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "upstream", "namespace": namespace},
            "data": {"upstream.py": UPSTREAM_SCRIPT},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "upstream", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": SECURITY,
                        "containers": [
                            {
                                "name": "upstream",
                                "image": IMAGE,
                                "imagePullPolicy": "Never",
                                "args": ["python", "/script/upstream.py"],
                                "ports": [{"containerPort": 8080}],
                                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                                "volumeMounts": [{"name": "script", "mountPath": "/script"}],
                            }
                        ],
                        "volumes": [_script_volume("upstream")],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "upstream", "namespace": namespace},
            "spec": {
                "selector": labels,
                "clusterIP": cluster_ip,
                "ports": [{"port": 80, "targetPort": 8080}],
            },
        },
    ]


def token_endpoint(namespace: str, cluster_ip: str) -> list[dict[str, Any]]:
    """The dev authorization server (``gatehouse_dev.token_endpoint``) behind the Service
    ``authz`` at ``cluster_ip``: clients are registered through the API server's Service proxy
    (POST /clients), its /api opens to the tokens it issued, /stats counts token requests."""
    labels = {"app": "authz"}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "authz", "namespace": namespace},
            "data": {
                "__init__.py": "",
                **{name: (DEV_PACKAGE / name).read_text() for name in TOKEN_ENDPOINT_MODULES},
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "authz", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": SECURITY,
                        "containers": [
                            {
                                "name": "authz",
                                "image": IMAGE,
                                "imagePullPolicy": "Never",
                                "args": [
                                    "python",
                                    "-m",
                                    "gatehouse_dev.token_endpoint",
                                    "--host=0.0.0.0",
                                    "--port=8080",
                                ],
                                "workingDir": "/script",
                                "ports": [{"containerPort": 8080}],
                                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                                "volumeMounts": [{"name": "script", "mountPath": "/script"}],
                            }
                        ],
                        "volumes": [
                            {
                                "name": "script",
                                "configMap": {
                                    "name": "authz",
                                    "items": [
                                        {"key": name, "path": f"gatehouse_dev/{name}"}
                                        for name in ("__init__.py", *TOKEN_ENDPOINT_MODULES)
                                    ],
                                },
                            }
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "authz", "namespace": namespace},
            "spec": {
                "selector": labels,
                "clusterIP": cluster_ip,
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
            },
        },
    ]


def _script_pod(
    namespace: str, name: str, script: str, env: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A one-shot Pod of the chart's image that runs ``script`` from a ConfigMap of its own."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"script.py": script},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": SECURITY,
                "containers": [
                    {
                        "name": "script",
                        "image": IMAGE,
                        "imagePullPolicy": "Never",
                        "args": ["python", "/script/script.py"],
                        "env": env,
                        "volumeMounts": [{"name": "script", "mountPath": "/script"}],
                    }
                ],
                "volumes": [_script_volume(name)],
            },
        },
    ]


def client(
    namespace: str, name: str, *, url: str, token_secret: str, seconds: float
) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "URL", "value": url},
        {"name": "SECONDS", "value": str(seconds)},
        # The app's credential for the proxy, from the Secret the operator issued: what a data
        # app's Pod would mount.
        {
            "name": "TOKEN",
            "valueFrom": {"secretKeyRef": {"name": token_secret, "key": "token"}},
        },
    ]
    return _script_pod(namespace, name, CLIENT_SCRIPT, env)


def counting_client(
    namespace: str, name: str, *, url: str, token_secret: str, count: int
) -> list[dict[str, Any]]:
    """A Pod that fetches ``count`` times, each on a new connection, and prints the statuses."""
    env: list[dict[str, Any]] = [
        {"name": "URL", "value": url},
        {"name": "COUNT", "value": str(count)},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": token_secret, "key": "token"}}},
    ]
    return _script_pod(namespace, name, COUNTING_SCRIPT, env)


def knock(namespace: str, name: str, host: str, port: int) -> list[dict[str, Any]]:
    """A Pod that connects to ``host``:``port`` and says PING."""
    env = [{"name": "HOST", "value": host}, {"name": "PORT", "value": str(port)}]
    return _script_pod(namespace, name, KNOCK_SCRIPT, env)


def page_reader(namespace: str, name: str, urls: list[str]) -> list[dict[str, Any]]:
    """A Pod that GETs each URL once and prints the statuses and the start of each body."""
    return _script_pod(namespace, name, PAGE_SCRIPT, [{"name": "URLS", "value": " ".join(urls)}])


def forged_review(
    namespace: str, name: str, url: str, review: dict[str, Any]
) -> list[dict[str, Any]]:
    """A Pod that posts ``review`` to the webhook at ``url`` and prints what came back."""
    env = [{"name": "URL", "value": url}, {"name": "REVIEW", "value": json.dumps(review)}]
    return _script_pod(namespace, name, FORGED_REVIEW_SCRIPT, env)


def shared_connect(
    namespace: str, name: str, *, page: str, connection: str, user: str, service_account: str
) -> list[dict[str, Any]]:
    """A Pod, as ``service_account`` (which may update ``connection``), that connects the
    connection's shared account as ``user`` through the page at ``page``."""
    path = f"/api/v1/namespaces/{namespace}/connections/{connection}/connect"
    env = [
        {"name": "PAGE", "value": page},
        {"name": "CONNECT_PATH", "value": path},
        {"name": "ACCOUNT", "value": user},
    ]
    objects = _script_pod(namespace, name, CONNECT_SCRIPT, env)
    objects[1]["spec"]["serviceAccountName"] = service_account
    return objects


def apply(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))


def log_lines(cluster: Cluster, namespace: str, pod: str) -> list[dict[str, Any]]:
    logs = cluster.kubectl("logs", pod, "-n", namespace, check=False).stdout
    return [json.loads(line) for line in logs.splitlines() if line.startswith("{")]


def wait_started(cluster: Cluster, namespace: str, pod: str, timeout: float = 60) -> None:
    wait_for(
        lambda: any(line.get("started") for line in log_lines(cluster, namespace, pod)),
        timeout=timeout,
        interval=0.5,
        what=f"client {pod} to start",
    )


def summary(cluster: Cluster, namespace: str, pod: str, timeout: float) -> dict[str, Any]:
    """The client's closing line, once its Pod has finished."""

    def finished() -> dict[str, Any] | None:
        phase = cluster.kubectl(
            "get", "pod", pod, "-n", namespace, "-o", "jsonpath={.status.phase}", check=False
        ).stdout
        if phase not in ("Succeeded", "Failed"):
            return None
        lines = log_lines(cluster, namespace, pod)
        return next((line for line in reversed(lines) if "ok" in line), {"phase": phase})

    return wait_for(finished, timeout=timeout, interval=1, what=f"client {pod} to finish")
