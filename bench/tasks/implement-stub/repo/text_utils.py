"""Text helpers for URLs."""


def slugify(text: str, max_length: int = 60) -> str:
    """A URL slug for `text`.

    - letters are lower-cased and accents dropped ("Crème Brûlée" -> "creme-brulee");
    - every run of characters that are not ASCII letters or digits becomes one "-";
    - no "-" at the start or the end;
    - at most `max_length` characters, cut at a "-" when there is one in the slug's first
      `max_length` characters (never in the middle of a word unless the first word is too long);
    - "" when nothing is left.
    """
    raise NotImplementedError
