"""``python -m crag.cli``: the same as the ``crag`` command."""

from crag.cli import app

if __name__ == "__main__":
    app()
