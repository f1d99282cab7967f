"""nbagent's version, in a room of its own: the MCP client names it to servers without
importing the package's face (which loads everything else)."""

__version__ = "0.1.0"
