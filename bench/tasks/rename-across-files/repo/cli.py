"""`python cli.py ID` prints a user."""

import sys

from users import store


def main(argv: list[str]) -> int:
    user = store.fetch_usr(int(argv[0]))
    print(user["name"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
