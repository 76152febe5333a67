"""Count the lines of a file: `python wordcount.py FILE`."""

import argparse
import sys
from pathlib import Path


def count_lines(text: str) -> int:
    return len(text.splitlines())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wordcount", description="Count the lines of a file.")
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    text = args.file.read_text()
    print(count_lines(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
