"""handout.md is executable: its examples and numeric claims hold for the reference.

Each chapter (``## ...``) is one doctest: its ``>>>`` examples and its fenced ``python`` blocks run
in order, in a namespace holding torch, numpy (``np``), math, every reference module by name and,
in a problem's chapter, that module's public names (``tensor_memory_bytes`` as well as
``memory.tensor_memory_bytes``). An inline claim written as one comparison (`` `f(x) == 3` ``) whose
names all resolve there is evaluated too and must be true.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.problems import MODULES

KIT = Path(__file__).resolve().parents[3]
HANDOUT = KIT / "handout.md"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_FENCED_PYTHON = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


@dataclass(frozen=True)
class Chapter:
    title: str
    text: str
    first_line: int  # 0-based line of the heading in handout.md

    @property
    def module(self) -> str | None:
        match = re.match(r"P\d+ · (\w+)\.py", self.title)
        return match.group(1) if match else None


def chapters(text: str) -> list[Chapter]:
    """Split markdown at its ``## `` headings (the part before the first one is a chapter too)."""
    lines = text.splitlines(keepends=True)
    starts = sorted({0} | {i for i, line in enumerate(lines) if line.startswith("## ")})
    ends = starts[1:] + [len(lines)]
    return [Chapter(lines[s][3:].strip() if lines[s].startswith("## ") else "(introduction)", "".join(lines[s:e]), s)
            for s, e in zip(starts, ends) if s < e]


def namespace(chapter: Chapter) -> dict:
    names: dict = {"torch": torch, "np": np, "math": math}
    names.update({name: importlib.import_module(f"solutions.{name}") for name in MODULES})
    if chapter.module:
        module = names[chapter.module]
        names.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
    return names


def as_doctest_source(chapter: Chapter) -> str:
    """The chapter with its fenced ``python`` blocks turned into ``>>>`` examples."""
    def prompt(match: re.Match) -> str:
        block = match.group(1)
        try:
            statements = ast.parse(block).body
        except SyntaxError as exc:
            raise AssertionError(f"handout.md: a python block in '{chapter.title}' does not parse: {exc}") from None
        lines = block.splitlines()
        out = []
        for node in statements:
            source = lines[node.lineno - 1:node.end_lineno]
            out.append(">>> " + source[0])
            out.extend("... " + line for line in source[1:])
            if len(source) > 1:
                out.append("... ")
        return "\n".join(f"    {line}".rstrip() for line in out) + "\n"
    return _FENCED_PYTHON.sub(prompt, chapter.text)


def inline_claims(chapter: Chapter, names: dict) -> list[str]:
    """Inline code spans that are one ``==`` comparison over names the namespace defines."""
    claims = []
    for match in _INLINE_CODE.finditer(chapter.text):
        span = " ".join(match.group(1).split())
        try:
            tree = ast.parse(span, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(tree, ast.Compare) and all(isinstance(op, ast.Eq) for op in tree.ops):
            free = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            if free <= names.keys():
                claims.append(span)
    return claims


def run_chapter(chapter: Chapter) -> str:
    """Run a chapter's examples; returns doctest's report of the failures ('' when all pass)."""
    names = namespace(chapter)
    try:
        test = doctest.DocTestParser().get_doctest(as_doctest_source(chapter), names, chapter.title,
                                                   str(HANDOUT), chapter.first_line)
    except ValueError as exc:  # an example not followed by a blank line, a misindented output
        return f"cannot read the examples: {exc}\n"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=report.append, clear_globs=False)
    for claim in inline_claims(chapter, names):
        try:
            holds = eval(claim, dict(names))  # noqa: S307 - the kit's own handout, against the reference
        except Exception as exc:  # noqa: BLE001 - a claim that raises is as wrong as a false one
            holds = f"raised {type(exc).__name__}: {exc}"
        if holds is not True:
            report.append(f"inline claim `{claim}` in '{chapter.title}' is {holds}\n")
    return "".join(report)


CHAPTERS = chapters(HANDOUT.read_text())


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.title.split(" ")[0] for c in CHAPTERS])
def test_handout_examples_hold_for_the_reference(chapter, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    report = run_chapter(chapter)
    assert not report, f"handout.md, chapter '{chapter.title}':\n{report}"


def test_every_problem_chapter_has_examples():
    for chapter in CHAPTERS:
        if chapter.module:
            examples = doctest.DocTestParser().get_examples(as_doctest_source(chapter))
            assert len(examples) >= 3, f"'{chapter.title}' has {len(examples)} runnable examples"


@pytest.mark.parametrize("wrong, shown", [
    ("## P4 · flops.py — x\n\n    >>> matmul_flops(16384, 32768, 8192) / 1e15\n    8.8\n", "Expected"),
    ("## P4 · flops.py — x\n\n`forward_flops(15e12, 70e9) == 2.1e24` as an int.\n", "inline claim"),
    ("## P8 · amp.py — x\n\n```python\nassert torch.tensor(0.75 * 2**-24).half() == 0\n```\n", "AssertionError"),
])
def test_a_wrong_claim_fails(wrong, shown):
    chapter = chapters(wrong)[-1]
    assert chapter.module and shown in run_chapter(chapter)
