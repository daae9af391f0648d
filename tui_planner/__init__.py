"""tui-planner's user interfaces: the `tui-planner` command (cli.py) and the Textual app."""
