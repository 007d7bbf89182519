"""Message formats shared by every role: defined once, imported where used."""
