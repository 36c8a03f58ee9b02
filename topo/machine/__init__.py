"""What a machine's wiring means: each link's expected speed, PCIe paths, clusters (rails, NVLink domains),
the best ring through a group of GPUs, and the comparison of hosts (what differs, the odd one out)."""
