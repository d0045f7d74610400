"""Versioned revisions, oldest first by their ``down_revision`` links."""
