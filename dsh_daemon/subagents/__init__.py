"""Subagents: the `run_subagent` tool with which the agent starts a child session (its own context, a
tool set the parent narrows, a step budget) and gets the child's final summary as the call's result.

The child session itself is made and driven by the host (`host/children.py`) through the `Launcher`
seam declared here. Nothing is imported here: `initialize` is answered before the tools load.
"""
