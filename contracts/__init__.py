"""Pure data shared by every part of the federation: A2A v1.0 wire types and governance types.

Nothing in this package performs I/O. Everything here can be imported by the coordinator,
by a remote specialist, or by a test without starting anything.
"""

__all__: list[str] = []
