"""``python -m nbagent``: the terminal front end."""

from .terminal import main

raise SystemExit(main())
