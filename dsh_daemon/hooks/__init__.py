"""The person's hooks: commands configured to run at points of a session (`session.py`), confined
like the session's commands (`runner.py`); a project's own hooks wait for the person's trust
(`project.py`). The configuration's values are `model/hooks.py`.

Importing this package loads nothing (tests/test_startup.py)."""
