"""Read-side queries shared by the JSON API and the dashboard.

Every function takes a session and never commits or writes. Names here are a stable
interface: the dashboard reuses them.
"""
