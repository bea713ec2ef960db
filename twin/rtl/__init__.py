"""RTL nodes: the link card's exchange engine and the V80 consumer logic as Verilog (``rtl/``),
verilated at first use (:mod:`twin.rtl.build`) and run cycle by cycle on the twin's timeline
(:mod:`twin.rtl.cosim`). See docs/rtl.md."""
