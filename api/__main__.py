"""``python -m api`` runs the command line."""

from api.cli import main

main()
