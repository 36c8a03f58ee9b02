"""The app's six tabs, one view widget each (Links, Topology, Ranks, Bench, Monitor, Steps): not Textual Screens.

The app binds its snapshot (and whether it is this machine, and an NCCL log) into each view once, with
`data_bind`; a view reacts in its `watch_snapshot` and talks back with messages (:mod:`tui.messages`).
"""
