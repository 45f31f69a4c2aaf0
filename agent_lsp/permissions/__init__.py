"""Permission rules from beyond the settings: Claude Code's files, a project's rules behind the
user's consent, and "Always allow" saved in the user settings file."""
