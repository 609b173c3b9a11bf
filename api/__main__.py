"""``python -m api`` runs the command line."""

from api.cli.main import main

main()
