"""Custom slash commands in Neovim (issue 35.4) over the real daemon: `/` at the start of the chat
input completes the session's commands (`dsh/commands/list`) with their descriptions, the line is
sent as typed, the daemon expands it (the model reads the command's prompt) and the transcript
shows the line as typed and whose command it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor, Paths
from tests.server.harness import text_reply


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def commands(paths: Paths) -> Path:
    review = write(
        paths.work / ".dsh" / "commands" / "review.md",
        "---\ndescription: Review a file for bugs\nargument-hint: PATH\nallowed-tools: [read_file, grep]\n---\n"
        "Review $ARGUMENTS for bugs. Be brief.\n",
    )
    write(paths.state / "commands" / "release.md", "---\ndescription: Cut a release\n---\nCut a release.\n")
    return review


def completions(editor: Editor, base: str) -> list[dict[str, Any]]:
    """What the input's omnifunc offers for `base` (the chat input current)."""
    return editor.lua(
        "local c = T.chat() vim.api.nvim_set_current_win(vim.fn.bufwinid(c.input))"
        " return require('dsh.complete').omnifunc(0, ...)",
        base,
    )


def test_a_custom_command_is_completed_with_its_description_sent_as_typed_and_expanded(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    review = commands(paths)
    fake.script(text_reply("No bugs."))
    editor.cmd("Dsh")
    editor.wait(lambda: editor.lua("return T.chat() ~= nil and T.chat().input ~= nil"), what="the chat")
    # The daemon runs (the chat opened it): the omnifunc asks it, the project's and the person's.
    editor.wait(
        lambda: editor.lua(
            "local e = require('dsh.client').roots[vim.fn.getcwd()] return e ~= nil and e.ready == true"
        ),
        what="the daemon",
    )
    items = sorted(completions(editor, "/"), key=lambda i: i["word"])
    assert [(i["word"], i["abbr"], i["menu"]) for i in items] == [
        ("/release", "/release", "Cut a release"),
        ("/review", "/review PATH", "Review a file for bugs"),
        ("/symbols", "/symbols", "[dsh]"),  # the plugin's own (contextwords.lua)
    ]
    by_word = {i["word"]: i for i in items}
    assert by_word["/review"]["info"] == (
        "Review a file for bugs\nthe project's command: /review PATH\nallows only: read_file, grep"
    )
    assert by_word["/release"]["info"] == "Cut a release\nyour command"
    assert [i["word"] for i in completions(editor, "/rev")] == ["/review"]

    # As a person types: <C-x><C-o> after `/rev` completes the one match.
    editor.type_in_input("/rev<C-x><C-o> app.py")
    assert editor.snapshot()["input"] == ["/review app.py"]
    editor.keys("<C-s>")
    editor.wait_footers(1)
    lines = editor.lines()
    assert lines[lines.index("## You") + 1 : lines.index("## You") + 3] == [
        "/review app.py",
        f"↳ the project's command /review ({review.resolve()})",
    ]
    assert "Review app.py for bugs. Be brief." not in lines  # the prompt is the model's, not the page's
    sent = fake.requests[-1].json["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"][-1] == "Review app.py for bugs. Be brief."
    assert sorted(t["function"]["name"] for t in fake.requests[-1].json.get("tools") or []) == [
        "grep",
        "read_file",
    ]

    # Only where a command can be: `//` (the escape), a later line, or after other text is no command.
    for line, row in (("//rev", 1), ("/rev", 2), ("see /rev", 1)):
        assert editor.lua("return require('dsh.complete').word_before(...)", line, len(line), row) is None
    assert editor.lua("return {require('dsh.complete').word_before('  /rev', 6, 1)}") == [2, "/rev"]


def test_a_skill_the_model_chooses_is_read_and_shown_as_its_card(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    """Issue 35.4 from Neovim: a skill of `$DSH_HOME/skills` is offered in the system prompt; the model
    reads it with the `skill` tool, whose card the chat shows, and its body reaches the model."""
    from tests.fakes.deepseek_server import Reply
    from tests.server.harness import tool_call_stream

    write(
        paths.state / "skills" / "style" / "SKILL.md",
        "---\nname: style\ndescription: The person's code style\n---\nUse tabs. Never semicolons.\n",
    )
    fake.script(Reply.stream(tool_call_stream([("c1", "skill", {"name": "style"})])), text_reply("Styled."))
    editor.cmd("Dsh tidy this up")
    editor.wait_footers(1)
    assert any(line.startswith("⚙ skill") and "style" in line for line in editor.lines()), editor.lines()
    assert "- style: The person's code style" in fake.requests[0].json["messages"][0]["content"]
    assert "Use tabs. Never semicolons." in str(fake.requests[1].json["messages"][-1])
