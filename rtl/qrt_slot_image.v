// One message laid out in its slot, both encodings of the memory contract (rtl/qrt_contract.vh),
// combinational: the link card builds its requests with it, the V80 logic its replies.
//
// Parameters : SLOTB  bytes of the image (a multiple of `QRT_PIECE_BYTES, at least 32);
//              MAXP   payload bytes carried (bytes at and above MAXP are written as zero).
// Inputs     : seq (the sequence number), function_id, length (payload bytes), flags (the
//              header's flags word: zero on a request, the status on a reply), payload (byte b in
//              bits [8*b+7:8*b]; bytes at and above length are written as zero).
// Outputs    : img_classic  the 16-byte header (sequence, function, length, flags, reserved = 0)
//                           then the payload from byte 16, zero after it;
//              img_piece    16-byte pieces, each starting with the sequence number: piece 0 is the
//                           header, piece p >= 1 carries payload bytes 12*(p-1) .. 12*(p-1)+11.
// Byte k of an image is bits [8*k+7:8*k]; the writer sends it from byte 0 (per-piece) or byte 4
// (classic, the sequence word written last).
`include "qrt_contract.vh"
`default_nettype none

module qrt_slot_image #(
    parameter integer SLOTB = 256,
    parameter integer MAXP = 180
) (
    input  wire [31:0]          seq,
    input  wire [15:0]          function_id,
    input  wire [15:0]          length,
    input  wire [31:0]          flags,
    input  wire [8*MAXP-1:0]    payload,
    output wire [8*SLOTB-1:0]   img_classic,
    output wire [8*SLOTB-1:0]   img_piece
);
    localparam integer HB = `QRT_HEADER_BYTES;
    localparam integer PB = `QRT_PIECE_BYTES;
    localparam integer PD = `QRT_PIECE_BYTES - `QRT_PIECE_DATA_OFFSET;   // payload bytes a piece

    wire [`QRT_HEADER_BITS-1:0] header;
    assign header[`QRT_HEADER_SEQ_MSB:`QRT_HEADER_SEQ_LSB] = seq;
    assign header[`QRT_HEADER_FUNCTION_MSB:`QRT_HEADER_FUNCTION_LSB] = function_id;
    assign header[`QRT_HEADER_LENGTH_MSB:`QRT_HEADER_LENGTH_LSB] = length;
    assign header[`QRT_HEADER_FLAGS_MSB:`QRT_HEADER_FLAGS_LSB] = flags;
    assign header[`QRT_HEADER_RESERVED_MSB:`QRT_HEADER_RESERVED_LSB] = 32'd0;

    assign img_classic[`QRT_HEADER_BITS-1:0] = header;
    assign img_piece[`QRT_PIECE_BITS-1:0] = header;
    genvar g, h;
    generate
        for (g = 0; g < SLOTB - HB; g = g + 1) begin : g_cl
            if (g < MAXP) begin : g_p
                assign img_classic[8*HB + 8*g +: 8] = (g < length) ? payload[8*g +: 8] : 8'd0;
            end else begin : g_z
                assign img_classic[8*HB + 8*g +: 8] = 8'd0;
            end
        end
        for (g = 1; g < SLOTB / PB; g = g + 1) begin : g_pc
            assign img_piece[8*PB*g + `QRT_PIECE_SEQ_LSB +: 32] = seq;
            for (h = 0; h < PD; h = h + 1) begin : g_b
                if ((g - 1) * PD + h < MAXP) begin : g_p
                    assign img_piece[8*PB*g + `QRT_PIECE_DATA_LSB + 8*h +: 8] =
                        (((g - 1) * PD + h) < length) ? payload[8*((g - 1) * PD + h) +: 8] : 8'd0;
                end else begin : g_z
                    assign img_piece[8*PB*g + `QRT_PIECE_DATA_LSB + 8*h +: 8] = 8'd0;
                end
            end
        end
    endgenerate
endmodule
`default_nettype wire
