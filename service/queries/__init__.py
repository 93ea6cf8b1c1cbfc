"""The read side, one module per subject: the JSON API, the dashboard, the CLI and the
pipeline's triage read through these.

Every function takes a session and never commits or writes. Names here are a stable
interface: the dashboard reuses them.
"""
