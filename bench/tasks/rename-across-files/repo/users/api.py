"""What the web layer calls."""

from users.store import all_ids, fetch_usr


def user_names() -> list[str]:
    return [str(fetch_usr(user_id)["name"]) for user_id in all_ids()]


def describe(user_id: int) -> str:
    try:
        user = fetch_usr(user_id)
    except KeyError:
        return f"no user {user_id}"
    return f"{user['name']} (#{user['id']})"
