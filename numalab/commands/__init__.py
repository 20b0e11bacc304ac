"""One module per `numalab` subcommand."""
