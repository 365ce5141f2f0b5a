"""``python -m inferensics.cli`` runs the command line."""

from inferensics.cli.app import main

main()
