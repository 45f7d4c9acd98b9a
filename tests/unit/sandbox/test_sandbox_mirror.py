"""Which Debian mirror bootstrap-base uses: the host's own (no Docker)."""

from __future__ import annotations

from pathlib import Path

from agent_eval_sandbox.sandbox.bootstrap import (
    DEFAULT_MIRROR,
    find_mirror,
    local_base_ref,
    mirror_from_deb822,
    mirror_from_one_line,
)

# /etc/apt/sources.list.d/debian.sources of these machines.
DEBIAN_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb822_picks_the_stanza_serving_the_suite():
    assert mirror_from_deb822(DEBIAN_SOURCES, "bookworm") == "http://deb.debian.org/debian"
    assert mirror_from_deb822(DEBIAN_SOURCES, "bookworm-security") == "http://deb.debian.org/debian-security"
    assert mirror_from_deb822(DEBIAN_SOURCES, "trixie") is None


def test_deb822_skips_disabled_source_only_and_foreign_schemes():
    text = """\
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

Types: deb
URIs: cdrom:/media/ https://mirror.example/debian/
Suites:
 bookworm
 bookworm-updates
"""
    assert mirror_from_deb822(text, "bookworm") == "https://mirror.example/debian"


def test_one_line_format_with_options_and_comments():
    text = """\
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example/debian/ bookworm main contrib
deb http://later.example/debian bookworm main
"""
    assert mirror_from_one_line(text, "bookworm") == "http://mirror.example/debian"
    assert mirror_from_one_line(text, "bullseye") is None


def test_find_mirror_reads_sources_list_first_then_the_directory(tmp_path: Path):
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    assert find_mirror("bookworm", apt) == DEFAULT_MIRROR
    (apt / "sources.list.d" / "a.list.disabled-by-farm").write_text("deb http://disabled.example/d bookworm main\n")
    (apt / "sources.list.d" / "debian.sources").write_text(DEBIAN_SOURCES)
    assert find_mirror("bookworm", apt) == "http://deb.debian.org/debian"
    (apt / "sources.list").write_text("deb http://first.example/debian bookworm main\n")
    assert find_mirror("bookworm", apt) == "http://first.example/debian"
    assert find_mirror("trixie", apt) == DEFAULT_MIRROR


def test_base_ref():
    assert local_base_ref() == "agent-eval-sandbox-base:bookworm"
