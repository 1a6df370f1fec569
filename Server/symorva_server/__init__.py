"""Reference implementation of the Symorva community services API.

For development and tests: started by Scripts/dev-server next to a local Synapse.
"""

__version__ = "0.1.0"
API_VERSIONS = ["v1"]
