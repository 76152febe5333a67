"""Hidden checks: slugify as its docstring says."""

import pytest
from text_utils import slugify


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Hello, World!", "hello-world"),
        ("Crème Brûlée", "creme-brulee"),
        ("  --already-a-slug--  ", "already-a-slug"),
        ("C++ & Rust: 2024 edition", "c-rust-2024-edition"),
        ("日本語", ""),
        ("", ""),
        ("a_b.c", "a-b-c"),
    ],
)
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_cut_at_a_dash() -> None:
    assert slugify("one two three four", max_length=12) == "one-two"
    assert slugify("one two three four", max_length=13) == "one-two-three"
    assert slugify("abcdefghijklmnop", max_length=5) == "abcde"
    assert len(slugify("word " * 40)) <= 60
