"""An air-gapped base image: debootstrap a minimal Debian, then `docker import` it.

For hosts that reach a Debian mirror but no container registry. The base
already holds every package the sandbox image needs, so building the sandbox
image from it needs no network at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import docker
from rich.console import Console

from agent_eval_sandbox.errors import ImageError
from agent_eval_sandbox.sandbox.docker_errors import connect, docker_errors
from agent_eval_sandbox.sandbox.locks import host_lock
from agent_eval_sandbox.sandbox.progress import Progress

DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPOSITORY = "agent-eval-sandbox-base"
# What sandbox-setup.sh would otherwise install from the network.
BASE_PACKAGES = ("python3", "git", "procps", "ca-certificates")
_SCHEMES = ("http://", "https://", "file:/")


def local_base_ref(suite: str = DEFAULT_SUITE) -> str:
    return f"{BASE_REPOSITORY}:{suite}"


def _deb822_stanzas(text: str) -> Iterable[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, None
        elif line[0] in " \t" and key is not None:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            stanza[key] = value.strip()


def mirror_from_deb822(text: str, suite: str) -> str | None:
    """The first enabled `deb` URI serving `suite` in a .sources file."""
    for stanza in _deb822_stanzas(text):
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in stanza.get("types", "").split() or suite not in stanza.get("suites", "").split():
            continue
        for uri in stanza.get("uris", "").split():
            if uri.startswith(_SCHEMES):
                return uri.rstrip("/")
    return None


def mirror_from_one_line(text: str, suite: str) -> str | None:
    """The first `deb URI suite ...` line (options in [...] allowed) of a .list file."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("deb ") and "[" in line:
            head, _, tail = line.partition("]")
            line = head.split("[", 1)[0] + tail
        words = line.split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == suite and words[1].startswith(_SCHEMES):
            return words[1].rstrip("/")
    return None


def find_mirror(suite: str = DEFAULT_SUITE, apt_dir: Path = Path("/etc/apt")) -> str:
    """The host's own Debian mirror for `suite` (it is known to be reachable), else deb.debian.org."""
    candidates = [apt_dir / "sources.list"]
    if (apt_dir / "sources.list.d").is_dir():
        candidates += sorted((apt_dir / "sources.list.d").iterdir())
    for path in candidates:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if path.name.endswith(".sources"):
            found = mirror_from_deb822(text, suite)
        elif path.name.endswith(".list"):
            found = mirror_from_one_line(text, suite)
        else:
            continue  # e.g. *.disabled
        if found:
            return found
    return DEFAULT_MIRROR


def bootstrap_base(
    *,
    suite: str = DEFAULT_SUITE,
    mirror: str | None = None,
    client: docker.DockerClient | None = None,
    console: Console | None = None,
) -> str:
    """Build `agent-eval-sandbox-base:<suite>` with debootstrap; returns its ref. Needs root."""
    if shutil.which("debootstrap") is None:
        raise ImageError(
            "debootstrap is not installed",
            fix="install it (`apt-get install debootstrap`), or set sandbox.base_image to an image you have",
        )
    if os.geteuid() != 0:
        raise ImageError(
            "bootstrapping a base image needs root (debootstrap creates device files and chroots)",
            fix="run `sudo agent-eval-sandbox image bootstrap-base`",
        )
    mirror = mirror or find_mirror(suite)
    ref = local_base_ref(suite)
    client = client or connect()
    with host_lock("bootstrap-base"), Progress(console, f"bootstrapping {ref} from {mirror}") as progress:
        work = Path(tempfile.mkdtemp(prefix="agent-eval-rootfs-", dir="/var/tmp"))
        try:
            rootfs = work / "rootfs"
            _run_logged(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    suite,
                    str(rootfs),
                    mirror,
                ],
                progress,
                what="debootstrap",
                fix=f"check that {mirror} is reachable, or pass another mirror",
            )
            for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (rootfs / cache).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            archive = work / "rootfs.tar"
            progress.note("packing the root filesystem")
            _run_logged(
                ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
                progress,
                what="tar",
                fix="check free space in /var/tmp",
            )
            progress.note(f"importing as {ref}")
            with docker_errors(f"importing {ref}"):
                client.api.import_image(
                    src=str(archive),
                    repository=BASE_REPOSITORY,
                    tag=suite,
                    changes=[
                        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "ENV LANG=C.UTF-8",
                        'CMD ["bash"]',
                        'LABEL agent-eval-sandbox.image="base"',
                        f'LABEL agent-eval-sandbox.base-suite="{suite}"',
                        f'LABEL agent-eval-sandbox.base-mirror="{mirror}"',
                    ],
                )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return ref


def _run_logged(cmd: list[str], progress: Progress, *, what: str, fix: str) -> None:
    """Run `cmd`, showing its output as progress; on failure, an ImageError with its last lines."""
    tail: deque[str] = deque(maxlen=5)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.strip())
            progress.update(line)
    if proc.returncode != 0:
        raise ImageError(f"{what} failed (exit {proc.returncode}): {' | '.join(tail)}", fix=fix)
