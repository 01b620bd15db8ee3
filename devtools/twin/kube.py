"""A small Kubernetes API client over HTTPS (`requests`, client certificate), enough for the twin:
discovery, get/list, server-side apply, delete and watch-free polling.

The project's locked environment has no Kubernetes client library, so this speaks the REST API
directly: kinds are mapped to resources through the API server's own discovery documents.
"""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import requests

FIELD_MANAGER = "llmd-fleet-twin"


class ApiError(Exception):
    """The API server refused a request; `status` is its Status object (or the raw text)."""

    def __init__(self, code: int, status: dict[str, Any] | str, what: str):
        self.code = code
        self.status = status
        message = status.get("message", "") if isinstance(status, dict) else status
        super().__init__(f"{what}: HTTP {code}: {message}")


@dataclass(frozen=True)
class Resource:
    group_version: str
    name: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        ns = f"/namespaces/{quote(namespace)}" if self.namespaced and namespace else ""
        tail = f"/{quote(name)}" if name else ""
        return f"{base}{ns}/{self.name}{tail}"


class Kube:
    def __init__(self, server: str, ca: str, cert: str, key: str, timeout: float = 60):
        self.server = server.rstrip("/")
        self.session = requests.Session()
        # Loopback only: no proxies, and no CA bundle from the environment (requests would let
        # REQUESTS_CA_BUNDLE override the twin's own CA).
        self.session.trust_env = False
        self.session.verify = ca
        self.session.cert = (cert, key)
        self.timeout = timeout
        self._resources: dict[str, dict[str, Resource]] = {}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                params: dict[str, str] | None = None) -> Any:  # fmt: skip
        url = self.server + path + (("?" + urlencode(params)) if params else "")
        data = None if body is None else json.dumps(body)
        response = self.session.request(
            method, url, data=data, headers={"Content-Type": content_type}, timeout=self.timeout
        )
        if response.status_code >= 400:
            try:
                status: dict[str, Any] | str = response.json()
            except ValueError:
                status = response.text
            raise ApiError(response.status_code, status, f"{method} {path}")
        return response.json() if response.content else None

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        return self.request("GET", path, params=params)

    def served(self, api_version: str, kind: str) -> "Resource | None":
        """The kind's resource once discovery lists it, None while its group is not served yet
        (a CRD just created answers 404 until it is established: a loaded machine takes seconds)."""
        try:
            return self.resource(api_version, kind, refresh=True)
        except KeyError:
            return None
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def resource(self, api_version: str, kind: str, refresh: bool = False) -> Resource:
        """The resource of a kind, from discovery (refreshed once when missing: a CRD just made)."""
        if refresh or api_version not in self._resources:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = self.get(path)
            self._resources[api_version] = {
                item["kind"]: Resource(api_version, item["name"], item["namespaced"])
                for item in listing["resources"]
                if "/" not in item["name"]
            }
        found = self._resources[api_version].get(kind)
        if found is None and not refresh:
            return self.resource(api_version, kind, refresh=True)
        if found is None:
            raise KeyError(f"the API server serves no {kind} in {api_version}")
        return found

    def object_path(self, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        res = self.resource(obj["apiVersion"], obj["kind"])
        return res.path(meta.get("namespace"), meta["name"])

    def apply(self, obj: dict[str, Any], dry_run: bool = False) -> Any:
        """Server-side apply (create or update), forcing ownership of the fields we set."""
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.request("PATCH", self.object_path(obj), obj, "application/apply-patch+yaml", params)

    def read(self, obj: dict[str, Any]) -> Any:
        return self.get(self.object_path(obj))

    def delete(self, obj: dict[str, Any]) -> None:
        try:
            self.request("DELETE", self.object_path(obj))
        except ApiError as error:
            if error.code != 404:
                raise

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             selector: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
        res = self.resource(api_version, kind)
        items: list[dict[str, Any]] = []
        params = {"limit": "500"}
        if selector:
            params["labelSelector"] = selector
        while True:
            page = self.get(res.path(namespace), params)
            items += page.get("items", [])
            token = page.get("metadata", {}).get("continue")
            if not token:
                return items
            params["continue"] = token

    def ready(self) -> bool:
        try:
            self.session.get(self.server + "/readyz", timeout=5).raise_for_status()
        except requests.RequestException:
            return False
        return True


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    """Poll `check` until it returns something truthy; raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def walk_paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every leaf path of a JSON value (`a.b[].c`); list items are merged under `[]`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk_paths(item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list):
        for item in value:
            yield from walk_paths(item, f"{prefix}[]")
    else:
        yield prefix
