"""Hooks: lifecycle hooks (host and container scope) and tool interception."""
