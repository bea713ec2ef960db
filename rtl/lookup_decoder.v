// A lookup-table decoder: a ROM of 2**D words, one per syndrome, holding the observable flips.
// The ROM's contents come from twin.qec.lookup.LookupTable.readmemh() (the exact maximum-
// likelihood table, the same one the Python and C decoders use), written at build time.
// syndrome: detector i is bit i. flips: observable k is bit k; registered (one cycle).
`default_nettype none
module lookup_decoder #(
    parameter integer D = 4,
    parameter integer K = 1,
    parameter ROM = "lookup.hex"
) (
    input  wire          clk,
    input  wire [D-1:0]  syndrome,
    output reg  [K-1:0]  flips
);
    reg [K-1:0] rom [0:(1 << D) - 1];
    initial $readmemh(ROM, rom);
    always @(posedge clk) flips <= rom[syndrome];
endmodule
`default_nettype wire
