// The V80's function core, and the worked example of the function port (docs/rtl.md):
//   id 0  echo: the reply payload is the request payload;
//   id 16 decode_rep3: repetition-3 lookup decoder (4 detectors -> 1 byte of observable flips);
//   id 17 decode_steane7: Steane-7 lookup decoder (6 detectors -> 1 byte).
// Ids, statuses and the syndrome / correction layout come from the contract include
// (twin/exchange/contract.yaml: functions, status, syndrome). Any other id: status
// unknown_function, empty reply. A decoder request shorter than its syndrome (1 byte): the
// contract's short-request status (function_failed). done pulses two cycles after start.
// The decoders' ROM files are named by QRT_ROM_REP3 / QRT_ROM_STEANE7 (set by twin.rtl.build).
`include "qrt_contract.vh"
`default_nettype none
`ifndef QRT_ROM_REP3
`define QRT_ROM_REP3 "rep3.hex"
`endif
`ifndef QRT_ROM_STEANE7
`define QRT_ROM_STEANE7 "steane7.hex"
`endif

module qrt_functions #(
    parameter integer MAXP = 180
) (
    input  wire              clk,
    input  wire              rst,
    input  wire              start,
    input  wire [15:0]       function_id,
    input  wire [15:0]       length,
    input  wire [8*MAXP-1:0] payload,
    output reg               done,
    output reg  [31:0]       status,
    output reg  [15:0]       out_length,
    output reg  [8*MAXP-1:0] out_payload
);
    localparam [15:0] F_ECHO = `QRT_FUNCTION_ECHO, F_REP3 = `QRT_FUNCTION_DECODE_REP3,
                      F_STEANE7 = `QRT_FUNCTION_DECODE_STEANE7;
    localparam integer REP3_D = 4, STEANE7_D = 6;        // detectors; one observable each
    localparam integer REP3_BYTES_I = `QRT_SYNDROME_BYTES(REP3_D), STEANE7_BYTES_I = `QRT_SYNDROME_BYTES(STEANE7_D);
    localparam [15:0] REP3_BYTES = REP3_BYTES_I[15:0], STEANE7_BYTES = STEANE7_BYTES_I[15:0];  // 1 and 1
    wire [0:0] rep3_flips;
    wire [0:0] steane7_flips;
    // detector i is payload bit QRT_SYNDROME_PAYLOAD_BIT(i) (bit i % 8 of byte i / 8)
    lookup_decoder #(.D(REP3_D), .K(1), .ROM(`QRT_ROM_REP3)) u_rep3 (
        .clk(clk), .syndrome(payload[`QRT_SYNDROME_PAYLOAD_BIT(REP3_D - 1):`QRT_SYNDROME_PAYLOAD_BIT(0)]),
        .flips(rep3_flips));
    lookup_decoder #(.D(STEANE7_D), .K(1), .ROM(`QRT_ROM_STEANE7)) u_steane7 (
        .clk(clk), .syndrome(payload[`QRT_SYNDROME_PAYLOAD_BIT(STEANE7_D - 1):`QRT_SYNDROME_PAYLOAD_BIT(0)]),
        .flips(steane7_flips));

    reg        busy;
    reg [15:0] id;
    reg [15:0] len;
    always @(posedge clk) begin
        if (rst) begin
            done <= 1'b0; status <= 32'd0; out_length <= 16'd0; out_payload <= {8*MAXP{1'b0}};
            busy <= 1'b0; id <= 16'd0; len <= 16'd0;
        end else begin
            done <= 1'b0;
            if (start) begin            // stage 1: the ROMs read the held payload's syndrome bits
                busy <= 1'b1;
                id <= function_id;
                len <= length;
            end else if (busy) begin    // stage 2: the answer
                busy <= 1'b0;
                done <= 1'b1;
                out_payload <= {8*MAXP{1'b0}};
                status <= `QRT_STATUS_OK;
                case (id)
                    F_ECHO: begin
                        out_length <= len;
                        out_payload <= payload;
                    end
                    F_REP3, F_STEANE7: begin
                        if (len < ((id == F_REP3) ? REP3_BYTES : STEANE7_BYTES)) begin
                            out_length <= 16'd0;
                            status <= `QRT_SYNDROME_SHORT_STATUS;
                        end else begin
                            out_length <= 16'd1;     // one observable: ceil(1 / 8) bytes
                            out_payload[`QRT_SYNDROME_PAYLOAD_BIT(0)] <= (id == F_REP3) ? rep3_flips[0] : steane7_flips[0];
                        end
                    end
                    default: begin
                        out_length <= 16'd0;
                        status <= `QRT_STATUS_UNKNOWN_FUNCTION;
                    end
                endcase
            end
        end
    end
endmodule
`default_nettype wire
