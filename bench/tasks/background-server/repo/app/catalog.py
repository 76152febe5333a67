"""The items the server lists."""

ITEMS = [{"id": n, "name": f"item-{n}"} for n in range(1, 21)]


def page(limit: int, offset: int) -> list[dict[str, object]]:
    """At most `limit` items, starting after the first `offset`."""
    return ITEMS[offset : offset + limit + 1]
