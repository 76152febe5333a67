"""Stock keeping."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    name: str
    quantity: int


def parse_quantity(text: str) -> int | None:
    """The quantity written in `text`, or None when it is not a whole number of at least 0."""
    text = text.strip()
    if not text.isdigit():
        return None
    return int(text)


def restock(item: Item, amount_text: str) -> Item:
    amount = parse_quantity(amount_text)
    return Item(item.name, item.quantity + amount)


def total_quantity(items: list[Item]) -> int:
    return sum(item.quantity for item in items)
