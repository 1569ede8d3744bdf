"""``python -m optimizer``: the ``substrait-opt`` command."""

from optimizer.cli import entry

if __name__ == "__main__":
    entry()
