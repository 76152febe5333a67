"""Plain-text invoices."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    description: str
    quantity: int
    unit_price_cents: int


def money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100}"


def render(customer: str, lines: list[Line]) -> str:
    out = [f"Invoice for {customer}", ""]
    total = 0
    for line in lines:
        amount = line.quantity * line.unit_price_cents
        total += amount
        out.append(f"{line.description:<20}{line.quantity:>4} x {money(line.unit_price_cents):>8} = {money(amount):>9}")
    out += ["", f"{'Total':<38}{money(total):>9}"]
    return "\n".join(out) + "\n"
