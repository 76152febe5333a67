"""Where users live (in memory, for now)."""

_USERS = {1: "ada", 2: "grace", 3: "linus"}


def fetch_usr(user_id: int) -> dict[str, object]:
    """The user with this id; KeyError when there is none."""
    return {"id": user_id, "name": _USERS[user_id]}


def all_ids() -> list[int]:
    return sorted(_USERS)
