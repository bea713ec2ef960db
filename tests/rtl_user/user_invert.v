// A user's function core, kept outside the twin: it implements the function port of docs/rtl.md
// and serves id 1 (invert: every payload byte complemented) and id 0 (echo). It answers in one
// cycle. scenario.yaml names it; the twin's code does not know it.
`default_nettype none
module user_invert #(
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
    always @(posedge clk) begin
        if (rst) begin
            done <= 1'b0;
            status <= 32'd0;
            out_length <= 16'd0;
            out_payload <= {8*MAXP{1'b0}};
        end else begin
            done <= start;
            if (start) begin
                status <= 32'd0;
                out_length <= length;
                case (function_id)
                    16'd0: out_payload <= payload;
                    16'd1: out_payload <= ~payload;   // bytes past length are not sent
                    default: begin
                        status <= 32'd1;              // unknown_function
                        out_length <= 16'd0;
                    end
                endcase
            end
        end
    end
endmodule
`default_nettype wire
