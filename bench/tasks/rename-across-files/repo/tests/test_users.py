import pytest

from users.api import describe, user_names
from users.store import fetch_usr


def test_fetch_usr() -> None:
    assert fetch_usr(2) == {"id": 2, "name": "grace"}


def test_unknown() -> None:
    with pytest.raises(KeyError):
        fetch_usr(99)


def test_api() -> None:
    assert user_names() == ["ada", "grace", "linus"]
    assert describe(3) == "linus (#3)"
    assert describe(7) == "no user 7"
