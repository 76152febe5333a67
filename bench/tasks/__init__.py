"""A task suite that measures the agent (issue 35.5): small coding tasks, each a folder under
`bench/tasks/<name>/` with

- `repo/`: the starting files (the runner copies them into a temp dir and commits them to a new git
  repository, so a task can look at `git diff`);
- `prompt.md`: what the agent is asked;
- `checks/`: hidden checks (pytest files and what they need), copied into the repository as
  `.bench_checks/` only after the agent stopped, then run with this interpreter in dsh's sandbox
  (they run the agent's code): the task passes when they do;
- `oracle.patch`: what a correct agent does (tests/bench replays it through the agent's real tools
  with a scripted model: the checks must pass; an agent that does nothing must fail them);
- `oracle.json` (optional): tool calls the oracle makes before and after the patch's edits (starting
  a background server, running a test);
- `task.toml`: `summary` (one line), and optionally `max_turns`, `timeout_s`, `sandbox`.

`python -m bench.tasks --base-url URL --model M` runs them through `dsh-daemon exec --json` (README
"Measuring the agent")."""
