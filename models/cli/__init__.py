"""The command lines, one small module per command, each a thin layer over models.api."""
