"""`python -m reconciler` runs the CLI, for environments without the console script."""

from reconciler.cli.main import main

main()
