"""The terminal's input for the chat: an Esc that ends a read is Esc at once.

A terminal sends Esc alone for the Esc key, and Esc as the first byte of an Alt-key (Esc b) or of
an escape sequence (an arrow: Esc [ A). A terminal writes each key's bytes together, so they reach
the program in one read: what follows Esc in the same read belongs to it, and an Esc that ends a
read is the Esc key. prompt_toolkit cannot know that from its parser alone, so it waits instead:
`ttimeoutlen` for the parser to give up on a sequence, then `timeoutlen` for the key processor to
give up on a Meta binding (Esc then b); both waits only delayed a cancel, and keys typed meanwhile
became Meta keys (Esc then "/queue" lost its slash to Meta-/).

`EscAtOnceInput.read_keys` passes a read that ends in Esc on as the Esc key, and tells the key
processor that nothing more belongs to it, in the same call: the Esc binding runs before the next
read, and the next read's keys are plain keys. An Alt-key or a sequence within one read is parsed as
before. A sequence a slow link split across reads is left to prompt_toolkit's `ttimeoutlen`, unless
the split falls right after its Esc (that read looks exactly like the Esc key)."""

from __future__ import annotations

import io
import sys

from prompt_toolkit.input import Input, create_input
from prompt_toolkit.input.vt100 import Vt100Input
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.key_binding.key_processor import _Flush as KEY_PROCESSOR_FLUSH
from prompt_toolkit.keys import Keys

ESC = "\x1b"


class EscAtOnceInput(Vt100Input):
    def read_keys(self) -> list[KeyPress]:
        data = self.stdin_reader.read()
        self.vt100_parser.feed(data)
        if not data.endswith(ESC):
            keys, self._buffer = self._buffer, []
            return keys
        self.vt100_parser.flush()  # the parser's held Esc is the Esc key (a paste's text stays held)
        keys, self._buffer = self._buffer, []
        if keys and keys[-1].key == Keys.Escape:
            # The key processor's own flush: without it, Esc waits `timeoutlen` as a Meta prefix.
            keys.append(KEY_PROCESSOR_FLUSH)
        return keys


def terminal_input() -> Input:
    """The chat's input: `EscAtOnceInput` on stdin, or prompt_toolkit's own choice where stdin has
    no descriptor (a test's stand-in)."""
    if sys.platform == "win32":
        return create_input()
    try:
        sys.stdin.fileno()
    except (io.UnsupportedOperation, AttributeError, ValueError):
        return create_input()
    return EscAtOnceInput(sys.stdin)
