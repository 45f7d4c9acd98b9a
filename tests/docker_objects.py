"""What the Docker daemon still holds of a run: the containers and volumes labelled with its id.

Through the low-level API, which lists without inspecting each container: while a run is live, a
container can go between docker-py's `containers.list()` and its inspect of it, which then fails."""

from __future__ import annotations

import docker

from agent_eval_sandbox.sandbox import labels as L


def _label(run_id: str) -> dict[str, str]:
    return {"label": f"{L.RUN_ID}={run_id}"}


def containers_of_run(run_id: str, *, running_only: bool = False) -> list[str]:
    """The names of the run's containers (only the running ones with `running_only`)."""
    api = docker.from_env().api
    return [c["Names"][0].lstrip("/") for c in api.containers(all=not running_only, filters=_label(run_id))]


def paused_containers_of_run(run_id: str) -> list[str]:
    """The names of the run's containers that are paused (frozen at a deadline)."""
    api = docker.from_env().api
    return [c["Names"][0].lstrip("/") for c in api.containers(filters={**_label(run_id), "status": "paused"})]


def objects_of_run(run_id: str) -> list[str]:
    """Containers (running or not) and volumes still labelled with the run id, as `container NAME` /
    `volume NAME of CASE` (a sandbox's volumes are anonymous: their case is in their labels)."""
    api = docker.from_env().api
    volumes = api.volumes(filters=_label(run_id)).get("Volumes") or []
    return ([f"container {name}" for name in containers_of_run(run_id)]
            + [f"volume {v['Name']} of {(v.get('Labels') or {}).get(L.CASE_ID)}" for v in volumes])
