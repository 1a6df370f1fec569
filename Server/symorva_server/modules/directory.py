"""Member directory module. Placeholder: its API is added by the Member directory feature issue.

See modules/__init__.py for what a module file may define.
"""

MODULE_ID = "directory"
