"""QEC workloads and decoders: stim memory experiments, detector packing, lookup-table decoders."""
