"""Errors the sandbox raises to its caller (never for anything a program does)."""


class SandboxError(RuntimeError):
    """The sandbox cannot be set up as asked (e.g. namespaces required but unavailable), or
    it is closed."""
