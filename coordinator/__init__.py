"""The coordinator: the local owner of a run that delegates slices of it to specialists."""
