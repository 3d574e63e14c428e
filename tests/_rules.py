"""The handout's rules, read from ``handout.md``: each rule sentence ends with its id, ``[P5.skip-none-grad]``.

A rule is what a function returns, raises, refuses, keeps or must not touch. Its id is the problem (``ALL`` for
the rules that hold for every problem, checked on the functions their tests name) and a short stable name; its text is the sentence (or bullet) the id closes, and its section the heading above it. A public
test names the rules it checks with ``@pytest.mark.rule("P5.skip-none-grad")`` and a failure quotes them; the
grader's hidden tests do the same, and the kit checks that every rule has both, and a mutant both kill.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ID = r"(?:P\d+|ALL)\.[a-z0-9]+(?:-[a-z0-9]+)*"  # a rule's id (ALL: a rule that holds for every problem)
RULE_ID = re.compile(rf"\[({ID})\]")  # an id as the handout writes it, closing the rule's sentence
_TAG = re.compile(r"\s*(?:<sup>)?\[(?:P\d+|ALL)\.[a-z0-9-]+\](?:</sup>)?")
_HEADING = re.compile(r"#{2,3} (.+)")
_BLOCK_START = re.compile(r"\s*(?:[-*] |\d+\. )")
_MARKUP = re.compile(r"\*\*|`|<[^>]+>")


@dataclass(frozen=True)
class Rule:
    id: str
    section: str  # the handout heading it stands under: "optim.SGD", or a problem's title
    text: str  # the rule as the handout words it, markup and ids left out

    @property
    def problem(self) -> str:
        return self.id.split(".", 1)[0]

    def quote(self, limit: int = 240) -> str:
        """``[P5.skip-none-grad] Skip parameters ... (handout.md, section 'optim.SGD')``, the text cut at ``limit``."""
        text = self.text if len(self.text) <= limit else self.text[: limit - 3].rsplit(" ", 1)[0] + " ..."
        return f"[{self.id}] {text} (handout.md, section '{self.section}')"


def read(handout: Path) -> dict[str, Rule]:
    """Every rule of ``handout`` by id, in the handout's order. Raises ValueError for an id given twice."""
    rules: dict[str, Rule] = {}
    section, block = "", []
    for line in handout.read_text(encoding="utf-8").splitlines():
        heading = _HEADING.fullmatch(line)
        if heading or not line.strip() or _BLOCK_START.match(line):
            block = []
        if heading:
            section = heading.group(1).strip()
            continue
        start = 0
        for found in RULE_ID.finditer(line):
            block.append(line[start:found.start()])
            start = found.end()
            text = " ".join(_MARKUP.sub("", _TAG.sub("", " ".join(block))).split()).lstrip("-* ").strip()
            if found.group(1) in rules:
                raise ValueError(f"handout.md gives the rule id [{found.group(1)}] twice")
            rules[found.group(1)] = Rule(found.group(1), section, text)
            block = []
        block.append(line[start:])
    return rules


def ids_in(text: str) -> list[str]:
    """The rule ids a text (a docstring, a message) names."""
    return RULE_ID.findall(text)
