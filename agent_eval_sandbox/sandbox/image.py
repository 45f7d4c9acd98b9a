"""The sandbox image: choose a base, tag by a hash of every input, build only when missing.

The tag is `agent-eval-sandbox:<claude version>-<hash>` where the hash covers
the Dockerfile, the setup script, the `inside/` scripts, the Claude Code
version and its registry integrity, the base image's *ID* and the
architecture. An image whose inputs did not change is never rebuilt; a new
base image (even under the same name) gives a new tag.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tarfile
import tempfile
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import docker.errors
from rich.console import Console

from agent_eval_sandbox.errors import ImageError
from agent_eval_sandbox.sandbox.bootstrap import bootstrap_base, local_base_ref
from agent_eval_sandbox.sandbox.claude_binary import (
    DEFAULT_CLAUDE_VERSION,
    ClaudeBinary,
    ClaudeRelease,
    claude_release,
    ensure_claude_binary,
)
from agent_eval_sandbox.sandbox.docker_errors import connect, docker_errors
from agent_eval_sandbox.sandbox.locks import host_lock
from agent_eval_sandbox.sandbox.progress import Progress
from agent_eval_sandbox.sandbox.runtimes import on_host_kernel

SANDBOX_REPOSITORY = "agent-eval-sandbox"
REGISTRY_BASE = "debian:bookworm-slim"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
IMAGES_DIR = PACKAGE_DIR / "images"
INSIDE_DIR = PACKAGE_DIR / "inside"
DOCKERFILE = "sandbox.Dockerfile"
INPUTS_LABEL = "agent-eval-sandbox.inputs"
BASE_LABEL = "agent-eval-sandbox.base"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageSettings:
    """The `sandbox:` settings that decide the image (eval.yaml or flags)."""

    image: str | None = None  # a prebuilt image, used as-is
    base_image: str | None = None
    claude_version: str = DEFAULT_CLAUDE_VERSION
    # Execute-only binaries for the CLI and the hook client: the kernel then runs
    # them non-dumpable, so the agent's own tools (same uid) can neither ptrace
    # them nor read or write their memory through /proc. gVisor refuses to exec
    # a binary it cannot read (and confines ptrace itself): build with False there.
    exec_only: bool = True


@dataclass(frozen=True)
class ImageInputs:
    files: tuple[tuple[str, str], ...]  # (path in the build context, sha256) except the binary
    claude_version: str
    claude_integrity: str
    base_image_id: str
    arch: str
    exec_only: bool = True


@dataclass(frozen=True)
class SandboxImage:
    ref: str
    built: bool  # False: it was already there (or is a prebuilt `image`)
    base: str | None = None


def image_tag(inputs: ImageInputs) -> str:
    digest = hashlib.sha256(json.dumps(asdict(inputs), sort_keys=True).encode()).hexdigest()
    return f"{SANDBOX_REPOSITORY}:{inputs.claude_version}-{digest[:16]}"


def context_files(images_dir: Path = IMAGES_DIR, inside_dir: Path = INSIDE_DIR) -> dict[str, Path]:
    """Build-context path -> host file, for everything but the claude binary."""
    files = {DOCKERFILE: images_dir / DOCKERFILE, "sandbox-setup.sh": images_dir / "sandbox-setup.sh"}
    for path in sorted(inside_dir.rglob("*")):
        rel = path.relative_to(inside_dir)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix != ".pyc":
            files[f"inside/{rel.as_posix()}"] = path
    return files


def image_inputs(
    files: Mapping[str, Path], claude: ClaudeBinary | ClaudeRelease, base_image_id: str, arch: str, *,
    exec_only: bool = True,
) -> ImageInputs:
    return ImageInputs(
        exec_only=exec_only,
        files=tuple((name, hashlib.sha256(path.read_bytes()).hexdigest()) for name, path in sorted(files.items())),
        claude_version=claude.version,
        claude_integrity=claude.integrity,
        base_image_id=base_image_id,
        arch=arch,
    )


def _local_id(client: docker.DockerClient, ref: str) -> str | None:
    with docker_errors(f"looking up image {ref}"):
        try:
            image_id: str = client.images.get(ref).id
            return image_id
        except docker.errors.ImageNotFound:
            return None


def _pull(client: docker.DockerClient, ref: str, progress: Progress) -> str | None:
    progress.note(f"pulling {ref}")
    with docker_errors(f"pulling {ref}"):
        try:
            image_id: str = client.images.pull(ref).id
            return image_id
        except docker.errors.APIError:
            return None  # no registry, no such image, no credentials: the caller explains


def resolve_base(
    client: docker.DockerClient, base_image: str | None, *, pull: bool = True, console: Console | None = None
) -> tuple[str, str]:
    """(ref, image ID) of the base: the configured one, else the bootstrapped one, else Debian's."""
    candidates = [base_image] if base_image else [local_base_ref(), REGISTRY_BASE]
    for ref in candidates:
        found = _local_id(client, ref)
        if found:
            return ref, found
    if pull:
        with Progress(console, "finding a base image") as progress:
            pulled = _pull(client, candidates[-1], progress)
        if pulled:
            return candidates[-1], pulled
    if base_image:
        raise ImageError(
            f"the base image {base_image} (sandbox.base_image) is not present and cannot be pulled",
            fix="pull or load it, or unset sandbox.base_image to use a base made by "
            "`agent-eval-sandbox image bootstrap-base`",
        )
    raise NoBaseImageError(
        f"no base image for the sandbox: {local_base_ref()} does not exist and {REGISTRY_BASE} cannot be pulled",
        fix="run `agent-eval-sandbox image bootstrap-base` (offline Debian base), or set sandbox.base_image",
    )


def exec_only_binaries(runtime: str | None) -> bool:
    """Execute-only binaries on the host's kernel (runc, Docker's default, or crun); readable ones elsewhere.

    Other runtimes (gVisor) read a binary to run it, and confine ptrace themselves.
    """
    return on_host_kernel(runtime)


class NoBaseImageError(ImageError):
    """Neither a configured, a bootstrapped nor a pullable base image exists."""


def can_bootstrap_base() -> bool:
    """debootstrap needs root and the tool itself."""
    return os.geteuid() == 0 and shutil.which("debootstrap") is not None


def ensure_sandbox_image(
    settings: ImageSettings = ImageSettings(),
    *,
    rebuild: bool = False,
    bootstrap_missing_base: bool = False,
    client: docker.DockerClient | None = None,
    console: Console | None = None,
) -> SandboxImage:
    """The image to run cases in, built (with progress) only if missing, or if `rebuild`.

    With `bootstrap_missing_base`, a host with no base image and no registry
    gets one made with debootstrap (when it can: root, debootstrap installed)
    instead of an error.
    """
    client = client or connect()
    if settings.image:
        log.debug("sandbox.image %s is given: it is used as is, never built", settings.image)
        if _local_id(client, settings.image) is None:
            with Progress(console, f"fetching {settings.image}") as progress:
                if _pull(client, settings.image, progress) is None:
                    raise ImageError(
                        f"the sandbox image {settings.image} (sandbox.image) is not present and cannot be pulled",
                        fix="pull or load it, or unset sandbox.image to build one",
                    )
        return SandboxImage(ref=settings.image, built=False)

    with host_lock("sandbox-image"):
        try:
            base_ref, base_id = resolve_base(client, settings.base_image, console=console)
        except NoBaseImageError:
            if not (bootstrap_missing_base and can_bootstrap_base()):
                raise
            bootstrap_base(client=client, console=console)
            base_ref, base_id = resolve_base(client, settings.base_image, pull=False, console=console)
        with docker_errors("asking the daemon for its architecture"):
            arch = client.api.info().get("Architecture") or "x86_64"
        with Progress(console, f"looking up Claude Code {settings.claude_version}"):
            release = claude_release(settings.claude_version, arch)
        files = context_files()
        ref = image_tag(image_inputs(files, release, base_id, arch, exec_only=settings.exec_only))
        log.debug("image inputs: base %s (%s), Claude Code %s for %s, exec-only %s -> %s", base_ref, base_id[:19],
                  settings.claude_version, arch, settings.exec_only, ref)
        if not rebuild and _local_id(client, ref) is not None:
            log.debug("%s is present: no build", ref)
            return SandboxImage(ref=ref, built=False, base=base_ref)
        log.debug("%s: building (%s)", ref, "--rebuild" if rebuild else "no image of these inputs yet")
        with Progress(console, f"fetching Claude Code {settings.claude_version}"):
            claude = ensure_claude_binary(settings.claude_version, arch)
        if claude.integrity != release.integrity:
            raise ImageError(f"Claude Code {settings.claude_version}: the binary's integrity {claude.integrity} is "
                             f"not the one looked up ({release.integrity})",
                             fix="clear the cache (AGENT_EVAL_CACHE_DIR or ~/.cache/agent-eval-sandbox) and retry")
        _build(client, ref, files, claude, base_ref, base_id, exec_only=settings.exec_only, no_cache=rebuild,
               console=console)
        return SandboxImage(ref=ref, built=True, base=base_ref)


def current_image_tags(client: docker.DockerClient, claude_version: str = DEFAULT_CLAUDE_VERSION,
                       base_image: str | None = None) -> list[str]:
    """The tags `ensure_sandbox_image` would build or use now, for both binary modes (runc, other runtimes).

    The base is the one a run would choose, without pulling; the Claude Code
    binary comes from its cache (or is fetched, as a build would).
    """
    _, base_id = resolve_base(client, base_image, pull=False)
    with docker_errors("asking the daemon for its architecture"):
        arch = client.api.info().get("Architecture") or "x86_64"
    claude = ensure_claude_binary(claude_version, arch)
    files = context_files()
    return [image_tag(image_inputs(files, claude, base_id, arch, exec_only=mode)) for mode in (True, False)]


def _write_context(out: tarfile.TarFile, files: Mapping[str, Path], claude: ClaudeBinary, *, exec_only: bool) -> None:
    def add(name: str, path: Path, mode: int) -> None:
        info = out.gettarinfo(str(path), arcname=name)
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = mode
        with path.open("rb") as f:
            out.addfile(info, f)

    dirs = {"inside"} | {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}
    for name in sorted(dirs):
        info = tarfile.TarInfo(name)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        out.addfile(info)
    for name, path in files.items():
        add(name, path, 0o644)
    # Execute-only even to root inside, which owns it but has no CAP_DAC_OVERRIDE (sandbox-setup.sh).
    add("claude", claude.path, 0o111 if exec_only else 0o755)


def _build(
    client: docker.DockerClient,
    ref: str,
    files: Mapping[str, Path],
    claude: ClaudeBinary,
    base_ref: str,
    base_id: str,
    *,
    exec_only: bool,
    no_cache: bool,
    console: Console | None,
) -> None:
    with tempfile.TemporaryFile() as context, Progress(console, f"building {ref} from {base_ref}") as progress:
        with tarfile.open(fileobj=context, mode="w") as tar:
            _write_context(tar, files, claude, exec_only=exec_only)
        context.seek(0)
        tail: deque[str] = deque(maxlen=3)
        with docker_errors(f"building {ref}"):
            for chunk in client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=DOCKERFILE,
                tag=ref,
                # The ID, not the name: the image is built from exactly what was hashed.
                buildargs={"BASE_IMAGE": base_id, "CLAUDE_VERSION": claude.version,
                           "EXEC_ONLY": "1" if exec_only else "0"},
                labels={INPUTS_LABEL: ref.rsplit("-", 1)[-1], BASE_LABEL: base_ref},
                rm=True,
                forcerm=True,
                pull=False,
                nocache=no_cache,
                decode=True,
            ):
                if "error" in chunk:
                    raise ImageError(
                        f"building {ref} failed: {chunk['error'].strip()} (last output: {' | '.join(tail)})",
                        fix="if it failed installing packages, the base lacks them and no Debian mirror is "
                        "reachable: use a base from `agent-eval-sandbox image bootstrap-base`",
                    )
                for line in chunk.get("stream", "").splitlines():
                    if line.strip():
                        tail.append(line.strip())
                        (progress.note if line.startswith("Step ") else progress.update)(line)
        if _local_id(client, ref) is None:
            raise ImageError(f"building {ref} finished without producing the image", fix="run the build again")
