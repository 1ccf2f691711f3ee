"""The `gradcert` command (`main`) and its `show` subcommand."""

from gradcert.cli.main import main

__all__ = ["main"]
