"""The documentation stays a guide, not a log: README.md is short, names every command and links every page
of ``docs/``; no commit hash or date is written outside the rendered benchmarks page and its records; CONTRIBUTING's
layout names every module of the trust boundary and its table of arrows is ``test_layout.ARROWS``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_layout import ARROWS, FREE, GRADER  # noqa: E402  (a test module beside this one)

KIT = GRADER.parent
README = KIT / "README.md"
CONTRIBUTING = KIT / "CONTRIBUTING.md"
README_LINES = 200
# Rendered from the bench records, which carry their commit and date on purpose.
DATED = {KIT / "docs" / "benchmarks.md", KIT / "docs" / "benchmarks"}
COMMIT = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
DATE = re.compile(r"(?<!\d)(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)")
# Zones whose every module the layout picture names: the top level and the sandbox's two sides.
PICTURED = ("", "confined", "containment")


def _guides() -> list[Path]:
    pages = [README, *sorted((KIT / "docs").rglob("*.md"))]
    return [page for page in pages if not any(page == dated or dated in page.parents for dated in DATED)]


def stamps(text: str) -> list[str]:
    """The commit hashes and dates written in ``text``."""
    return COMMIT.findall(text) + DATE.findall(text)


def layout(text: str) -> str:
    """CONTRIBUTING's layout section."""
    return text.split("## Layout", 1)[1].split("\n## ", 1)[0]


def arrows(text: str) -> dict[str, set[str]]:
    """The zone table of a layout section: zone -> what it may import (``anything`` for the free zones)."""
    table = {}
    for row in re.findall(r"^\| (`.+?) \| (.+?) \|", text, flags=re.MULTILINE):
        imports = set(re.findall(r"`([\w.]+)`", row[1])) or {row[1].strip()}
        for zone in re.findall(r"`(\w+)`", row[0]):
            table[zone] = imports
    return table


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_LINES, f"README.md has {lines} lines, at most {README_LINES}: move reference to docs/"


@pytest.mark.parametrize("page", _guides(), ids=lambda page: str(page.relative_to(KIT)))
def test_no_commit_hash_or_date_outside_the_benchmarks_page(page):
    found = stamps(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(KIT)}: {found}: a figure's commit and date belong in a bench record"


@pytest.mark.parametrize(("text", "found"), [
    ("at 7670a52, 0.82x", ["7670a52"]), ("Measured 2026-11-27 on 2 cores", ["2026-11-27"]),
    ("float8_e8m0fnu, 0x7f800000, 1234567 bytes, SHA-256, defaced", []), ("case 2026-07", [])])
def test_stamps_are_found(text, found):
    assert stamps(text) == found


def test_the_readmes_command_table_names_every_command():
    import argparse

    from grader.cli import build_parser

    (commands,) = [action.choices for action in build_parser()._actions
                   if isinstance(action, argparse._SubParsersAction)]
    table = README.read_text(encoding="utf-8").split("## Commands", 1)[1].split("\n## ", 1)[0]
    assert commands and not {name for name in commands if f"| `grader {name}" not in table}


def test_the_readme_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    pages = {page.relative_to(KIT).as_posix() for page in (KIT / "docs").glob("*.md")}
    assert not {page for page in pages if f"]({page})" not in text}


def test_the_layout_table_is_the_arrows_of_the_layout_test():
    table = arrows(layout(CONTRIBUTING.read_text(encoding="utf-8")))
    assert table == {**ARROWS, **{zone: {"anything"} for zone in FREE}}


def test_a_layout_table_that_drifts_is_caught():
    drifted = "| `judge` | `core`, `containment` | |\n| `bench`, `tests` | anything | |\n"
    assert arrows(drifted) == {"judge": {"core", "containment"}, "bench": {"anything"}, "tests": {"anything"}}
    assert arrows(drifted)["judge"] != ARROWS["judge"]


def test_the_layout_names_every_module_of_the_boundary():
    text = layout(CONTRIBUTING.read_text(encoding="utf-8"))
    modules = {path.stem for zone in PICTURED for path in (GRADER / zone).glob("*.py") if not path.stem.startswith("_")}
    assert not {name for name in modules if not re.search(rf"\b{name}\b", text)}
