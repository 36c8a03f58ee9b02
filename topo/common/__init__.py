"""The basics every room shares: the one input error, every size cap, the one bounded number parser,
byte sizes, the one formatter per unit, untrusted text made safe, standard JSON in and out, cpulists, and
the one answer kept of a function asked again with the same snapshot (memo)."""
