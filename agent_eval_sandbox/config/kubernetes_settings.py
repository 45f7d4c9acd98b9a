"""The Kubernetes keys of the `sandbox:` block, checked at load (pure; no kubernetes import).

    sandbox:
      backend: kubernetes
      image: registry.example/agent-eval-sandbox:2.1.332-…   # required: the cluster pulls it
      namespace: agent-eval
      runtime_class: gvisor
      node_selector: {pool: sandboxes}
      tolerations: [{key: sandboxes, operator: Exists, effect: NoSchedule}]
      image_pull_secrets: [registry-credentials]
      controller: {host: agent-eval-controller, port: 8470}

Names follow the API server's own rules, so a typo is one line at load
rather than a rejected Pod mid-run.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# RFC 1123 label (namespaces) and subdomain (RuntimeClasses, Secrets), as the API server checks them.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A label value, or the name part of a label key.
LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DEFAULT_RELAY_PORT = 8470
# The keys only the kubernetes backend reads (an error with any other backend).
KUBERNETES_KEYS = ("namespace", "runtime_class", "node_selector", "tolerations", "image_pull_secrets", "controller")


def is_dns_label(value: str) -> bool:
    return len(value) <= 63 and bool(DNS_LABEL.match(value))


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(DNS_SUBDOMAIN.match(value))


def is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (prefix and is_dns_subdomain(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(LABEL_NAME.match(name))


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(LABEL_NAME.match(value))


class Toleration(BaseModel):
    """One entry of `sandbox.tolerations`, as a Pod's `tolerations` takes it."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds", ge=0)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is not None and not is_label_key(value):
            raise ValueError(f"sandbox.tolerations: {value!r} is not a valid taint key")
        return value

    def manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = {"operator": self.operator}
        if self.key is not None:
            data["key"] = self.key
        if self.value is not None:
            data["value"] = self.value
        if self.effect is not None:
            data["effect"] = self.effect
        if self.toleration_seconds is not None:
            data["tolerationSeconds"] = self.toleration_seconds
        return data


class ControllerAddress(BaseModel):
    """`sandbox.controller`: where a case Pod reaches this controller's relay (gateway and broker).

    `host` is resolved by the controller itself (the Pods get an address, so they need no DNS);
    unset, the controller's own Pod IP is used when it runs in the cluster.
    """

    model_config = ConfigDict(extra="forbid")

    host: str | None = None
    port: int = Field(default=DEFAULT_RELAY_PORT, ge=1, le=65535)
    # Where the relay listens in the controller (all interfaces of its Pod by default).
    listen: str = "0.0.0.0"

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", value):
            raise ValueError(f"sandbox.controller.host {value!r} is not a host name or an IP address")
        return value


def check_namespace(value: str | None) -> str | None:
    if value is not None and not is_dns_label(value):
        raise ValueError(f"sandbox.namespace {value!r} is not a valid namespace name (lowercase letters, digits "
                         "and '-', at most 63)")
    return value


def check_runtime_class(value: str | None) -> str | None:
    if value is not None and not is_dns_subdomain(value):
        raise ValueError(f"sandbox.runtime_class {value!r} is not a valid RuntimeClass name")
    return value


def check_node_selector(value: dict[str, str]) -> dict[str, str]:
    for key, label in value.items():
        if not is_label_key(key):
            raise ValueError(f"sandbox.node_selector: {key!r} is not a valid label key")
        if not is_label_value(label):
            raise ValueError(f"sandbox.node_selector.{key}: {label!r} is not a valid label value")
    return value


def check_pull_secrets(value: list[str]) -> list[str]:
    for name in value:
        if not is_dns_subdomain(name):
            raise ValueError(f"sandbox.image_pull_secrets: {name!r} is not a valid Secret name")
    return value
