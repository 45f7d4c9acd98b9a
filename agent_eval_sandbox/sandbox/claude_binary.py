"""Obtain the real Claude Code native binary from the npm registry.

The CLI ships as a per-platform npm package (`@anthropic-ai/claude-code-linux-x64`)
holding one self-contained ELF. We download that tarball straight from the
registry (no Node.js needed), verify it against the registry's sha512
integrity string, and cache the extracted binary by version and platform, so
an image build never needs a container registry.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from agent_eval_sandbox.errors import ImageError

# The version every image is built with unless sandbox.claude_version or
# --claude-version says otherwise. Bump deliberately: it changes image tags.
DEFAULT_CLAUDE_VERSION = "2.1.332"
PACKAGE_BY_ARCH = {
    "x86_64": "@anthropic-ai/claude-code-linux-x64",
    "amd64": "@anthropic-ai/claude-code-linux-x64",
    "aarch64": "@anthropic-ai/claude-code-linux-arm64",
    "arm64": "@anthropic-ai/claude-code-linux-arm64",
}


@dataclass(frozen=True)
class ClaudeBinary:
    version: str
    arch: str
    path: Path
    integrity: str  # the registry's "sha512-<base64>" string


@dataclass(frozen=True)
class ClaudeRelease:
    """What names a binary without holding it: enough to tag an image that may exist already."""

    version: str
    arch: str
    integrity: str


def registry_url() -> str:
    return (
        os.environ.get("AGENT_EVAL_NPM_REGISTRY")
        or os.environ.get("NPM_CONFIG_REGISTRY")
        # npm itself spells its config variables in lower case (npm and `npm run` export it so).
        or os.environ.get("npm_config_registry")  # noqa: SIM112
        or "https://registry.npmjs.org/"
    ).rstrip("/")


def cache_root() -> Path:
    base = os.environ.get("AGENT_EVAL_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    return Path(base) / "agent-eval-sandbox" if base else Path.home() / ".cache" / "agent-eval-sandbox"


def verify_integrity(data: bytes, integrity: str) -> bool:
    """Check `data` against an npm integrity string (`sha512-<base64>`)."""
    algo, _, expected = integrity.partition("-")
    if algo not in ("sha512", "sha384", "sha256") or not expected:
        return False
    digest = hashlib.new(algo, data).digest()
    return base64.b64encode(digest).decode() == expected


def extract_binary(tarball: bytes, dest: Path) -> None:
    """Write `package/claude` from an npm tarball to `dest` (executable)."""
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        try:
            member = tar.getmember("package/claude")
        except KeyError as exc:
            raise ImageError("the npm package holds no package/claude binary") from exc
        if not member.isfile():
            raise ImageError("package/claude in the npm package is not a regular file")
        src = tar.extractfile(member)
        assert src is not None
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp:
            shutil.copyfileobj(src, tmp)
        os.chmod(tmp.name, 0o755)
        os.replace(tmp.name, dest)


def ensure_claude_binary(version: str = DEFAULT_CLAUDE_VERSION, arch: str = "x86_64") -> ClaudeBinary:
    """Return the cached binary, downloading and verifying it if needed."""
    override = os.environ.get("AGENT_EVAL_CLAUDE_BINARY")
    if override:
        path = Path(override)
        if not path.is_file():
            raise ImageError(
                f"AGENT_EVAL_CLAUDE_BINARY={override} is not a file",
                fix="point it at a Claude Code native binary or unset it",
            )
        digest = base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()
        return ClaudeBinary(version=version, arch=arch, path=path, integrity=f"sha512-{digest}")

    package = _package(arch)
    target_dir = cache_root() / "claude" / version / arch
    binary = target_dir / "claude"
    integrity_file = target_dir / "integrity"
    if binary.is_file() and integrity_file.is_file():
        return ClaudeBinary(version, arch, binary, integrity_file.read_text().strip())

    try:
        with httpx.Client(timeout=httpx.Timeout(30.0, read=300.0), follow_redirects=True) as client:
            dist = _dist(client, package, version)
            tarball = client.get(dist["tarball"])
            tarball.raise_for_status()
    except httpx.HTTPError as exc:
        raise ImageError(
            f"cannot download Claude Code {version} from {registry_url()}: {exc}",
            fix="check that the npm registry is reachable, or set AGENT_EVAL_CLAUDE_BINARY "
            "to a local binary",
        ) from exc
    integrity = dist["integrity"]
    if not verify_integrity(tarball.content, integrity):
        raise ImageError(
            f"the downloaded {package}@{version} does not match the registry's integrity hash",
            fix="retry; if it persists, the registry or a proxy is serving a corrupted file",
        )
    extract_binary(tarball.content, binary)
    integrity_file.write_text(integrity + "\n")
    return ClaudeBinary(version, arch, binary, integrity)


def claude_release(version: str = DEFAULT_CLAUDE_VERSION, arch: str = "x86_64") -> ClaudeRelease:
    """The release's integrity without the ~250 MB binary: cached, else from the registry's metadata.

    A controller whose sandbox image exists already (a CI job that loaded it from
    its cache, a controller container) then never downloads the binary.
    """
    if os.environ.get("AGENT_EVAL_CLAUDE_BINARY"):
        binary = ensure_claude_binary(version, arch)
        return ClaudeRelease(version, arch, binary.integrity)
    package = _package(arch)
    integrity_file = cache_root() / "claude" / version / arch / "integrity"
    if integrity_file.is_file():
        return ClaudeRelease(version, arch, integrity_file.read_text().strip())
    try:
        with httpx.Client(timeout=httpx.Timeout(30.0), follow_redirects=True) as client:
            integrity = str(_dist(client, package, version)["integrity"])
    except httpx.HTTPError as exc:
        raise ImageError(
            f"cannot look up Claude Code {version} in {registry_url()}: {exc}",
            fix="check that the npm registry is reachable, or mount a cache that holds it "
            "(AGENT_EVAL_CACHE_DIR), or set AGENT_EVAL_CLAUDE_BINARY to a local binary",
        ) from exc
    integrity_file.parent.mkdir(parents=True, exist_ok=True)
    integrity_file.write_text(integrity + "\n")
    return ClaudeRelease(version, arch, integrity)


def _package(arch: str) -> str:
    package = PACKAGE_BY_ARCH.get(arch)
    if package is None:
        raise ImageError(f"no Claude Code binary is published for architecture {arch!r}")
    return package


def _dist(client: httpx.Client, package: str, version: str) -> dict[str, str]:
    """The `dist` record (tarball URL, integrity) of one published version."""
    meta = client.get(f"{registry_url()}/{package.replace('/', '%2f')}/{version}")
    if meta.status_code == 404:
        raise ImageError(
            f"Claude Code {version} is not published as {package}",
            fix=f"set sandbox.claude_version to a published version (npm view {package} versions)",
        )
    meta.raise_for_status()
    dist: dict[str, str] = meta.json()["dist"]
    return dist
