"""Runtime checks of the built-in rules."""
