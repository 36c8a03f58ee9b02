"""What linkscope knows, as frozen dataclasses: hosts and snapshots, measurements, recordings; the findings
every analysis reports; collective bandwidth as nccl-tests defines it; the JSON codec and its meaning checks;
whether measurements belong to a machine."""
