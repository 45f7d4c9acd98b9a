"""Sandboxes: the `Sandbox` interface, its backends, and the sandbox image."""
