from pathlib import Path

from invoice import Line, render

GOLDEN = Path(__file__).parent / "golden" / "invoice.txt"


def test_matches_the_golden_file() -> None:
    lines = [Line("Widget", 3, 1205), Line("Cable, 2 m", 10, 99), Line("Support hour", 1, 9000)]
    assert render("ACME Ltd", lines) == GOLDEN.read_text()
