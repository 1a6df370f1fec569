"""AI Studio module. Placeholder: its API is added by the AI Studio feature issue.

See modules/__init__.py for what a module file may define.
"""

MODULE_ID = "aiStudio"
