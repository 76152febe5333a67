"""Custom commands and skills as files (tools/library.py), their front matter (model/frontmatter.py)
and a command's expansion (host/commands.py), on real files in a temp dir."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.host.commands import expand_message
from dsh_daemon.model.frontmatter import parse_front_matter
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.tools.library import SkillCatalogue, scan_commands


def test_front_matter_subset() -> None:
    front = parse_front_matter(
        "---\n# a comment\ndescription: 'Quoted: yes'\nallowed-tools: Read, Grep\nlist:\n  - a\n  - \"b\"\n"
        "inline: [x, y]\nnot a pair\n---\n\nBody $ARGUMENTS\n---\nstill body\n"
    )
    assert front.text("description") == "Quoted: yes"
    assert front.items("allowed-tools") == ("Read", "Grep")
    assert front.items("list") == ("a", "b") and front.items("inline") == ("x", "y")
    assert front.problems == ("line 9: not 'key: value'",)
    assert front.body == "Body $ARGUMENTS\n---\nstill body\n"
    assert parse_front_matter("no front matter\n").body == "no front matter\n"
    assert parse_front_matter("---\nunclosed: yes\n").problems


def test_expansion(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".dsh" / "commands").mkdir(parents=True)
    (home / "commands").mkdir(parents=True)
    (work / ".dsh" / "commands" / "go.md").write_text("Project go: $ARGUMENTS!")
    (home / "commands" / "go.md").write_text("Person's go: $ARGUMENTS.")
    (work / ".dsh" / "commands" / "plain.md").write_text("---\ndescription: d\n---\nNo placeholder.\n")
    found = scan_commands(work, home)
    assert [(c.name, c.origin) for c in found.commands] == [("go", "user"), ("plain", "project")]
    assert any("the person's /go" in p for p in found.problems)  # the project's go is shadowed

    def sent(content: object, source: object = None) -> UserMessage:
        return expand_message(UserMessage.create(content, source, id="m1"), found)

    go = sent("  /go far away")
    assert go.id == "m1" and go.text == "Person's go: far away."
    assert go.source["command"]["arguments"] == "far away"
    assert sent("/plain with words").text == "No placeholder.\n\nArguments: with words"
    assert sent("/plain").text == "No placeholder."
    blocks = sent([{"type": "text", "text": "/go"}, {"type": "text", "text": "more"}])
    assert [b.to_json()["text"] for b in blocks.content] == ["Person's go: .", "more"]
    assert sent("//go as text").text == "/go as text" and "command" not in sent("//go x").source
    assert sent("//unknown").text == "//unknown"  # not a command: untouched
    assert sent("/nosuch x").text == "/nosuch x"
    assert sent("/go x", {"kind": "plugin", "plugin": "p"}).text == "/go x"  # only a person's message
    again = expand_message(go, found)
    assert again is go  # an expanded message (a deferred send entered later) is not expanded twice


def test_skills_catalogue_rescans_only_on_change(tmp_path: Path) -> None:
    home = tmp_path / "home"
    skill = home / "skills" / "tidy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Tidy imports\n---\nSort them.\n")
    (home / "skills" / "nodesc").mkdir()
    (home / "skills" / "nodesc" / "SKILL.md").write_text("no front matter")
    catalogue = SkillCatalogue(lambda: None, home)
    assert "- tidy: Tidy imports" in catalogue.section()
    assert any("nodesc" in p and "no description" in p for p in catalogue.found().problems)
    catalogue.section()
    assert catalogue.scans == 1
    skill.write_text("---\ndescription: Tidy imports, changed\n---\nSort them.\n")
    assert "- tidy: Tidy imports, changed" in catalogue.section() and catalogue.scans == 2
    assert SkillCatalogue(lambda: None, tmp_path / "none").section() == ""
