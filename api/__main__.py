"""``python -m api`` runs the command line."""

from api.cli.main import main

if __name__ == "__main__":  # not when `serve --processes` spawns a process, which imports this
    main()
