"""Totals per region: `python summarize.py FILE.csv` (columns: date, region, amount)."""

import csv
import sys
from collections import defaultdict
from decimal import Decimal


def totals(path: str) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = defaultdict(Decimal)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            sums[row["region"]] += Decimal(row["amount"])
    return dict(sums)


def main(argv: list[str]) -> int:
    for region, total in sorted(totals(argv[0]).items()):
        print(f"{region}: {total:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
