"""Release bookkeeping."""

RELEASES = ["1.2.0", "1.9.0", "1.10.0", "1.9.1", "0.9.12"]


def sort_versions(versions: list[str]) -> list[str]:
    """Oldest first."""
    return sorted(versions)


def latest(versions: list[str]) -> str:
    return sort_versions(versions)[-1]


if __name__ == "__main__":
    for version in sort_versions(RELEASES):
        print(version)
