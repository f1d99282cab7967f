"""The package's surface: the names ``nbagent`` hands on, and the paths that moved.

:mod:`.names` is the table of the names ``nbagent/__init__.py`` loads on first use (each with
the module it lives in, and the imports type checkers read for it); :mod:`.moved` keeps module
paths that moved importable for one more release, warning with the new path. Both belong to the
face, which may import every room; nothing below the face imports them.
"""
