"""The onprem provider: hardware the user owns, reached over SSH with the user's own setup (see provider.py)."""
