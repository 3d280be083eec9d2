"""Files the app writes and reads: the atomic writer, export folders, sessions, attention files."""
