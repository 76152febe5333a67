import argparse

from greet import __version__


def main() -> None:
    parser = argparse.ArgumentParser(prog="greet")
    parser.add_argument("--version", action="version", version=f"greet {__version__}")
    parser.add_argument("name", nargs="?", default="world")
    parser.add_argument("--shout", action="store_true")
    args = parser.parse_args()
    text = f"Hello, {args.name}!"
    print(text.upper() if args.shout else text)
