"""linkscope command line: thin subcommands over the `topo` core, the `probes` and the `tui` app."""

__version__ = "0.1.0"
