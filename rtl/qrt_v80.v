// The V80 consumer logic: the accelerator side of the memory contract, 250 MHz.
//
// Polls its own memory (the request queue, mem_rd_* port: 64 bytes from any byte address, data
// one cycle later) for the next sequence number; when the message is complete (classic: the
// sequence word; per-piece: every piece it needs) it reads the payload and hands it to the
// function core (the port of docs/rtl.md: function id, length, payload in; status, length,
// payload out; start/done). It writes the reply into the producer's reply queue as posted writes
// on wr_*: classic: header fields and payload from byte 4, then the ready word, relying on the
// order PCIe keeps between posted writes on one path (no fence); per-piece: one burst. The last
// beat of the reply data leaves cfg_answer_cycles after the poll that saw the request (the seeds
// measured 28 ns = 7 cycles), or as soon as the function core is done if it needs longer.
// An unknown function gets an empty reply with status unknown_function (the core says so); a
// reply that would not fit the slot an empty reply with status bad_length.
//
// The function core is the module named by the macro QRT_FUNCTION_TOP (default qrt_functions:
// echo and the lookup decoders); a user's module with the same ports stands in for it.
`include "qrt_contract.vh"
`default_nettype none
`ifndef QRT_FUNCTION_TOP
`define QRT_FUNCTION_TOP qrt_functions
`endif

module qrt_v80 #(
    parameter integer MAXP = 180
) (
    input  wire          clk,
    input  wire          rst,
    input  wire [16:0]   cfg_slots,
    input  wire [15:0]   cfg_slot_bytes,
    input  wire          cfg_encoding,
    input  wire [7:0]    cfg_answer_cycles,
    output reg           wr_valid,
    output reg  [31:0]   wr_addr,
    output reg  [511:0]  wr_data,
    output reg  [6:0]    wr_bytes,
    output reg           wr_last,
    output reg           mem_rd_en,
    output reg  [31:0]   mem_rd_addr,
    input  wire          mem_rd_valid,
    input  wire [511:0]  mem_rd_data,
    output wire          idle,
    output reg  [31:0]   n_served,
    output reg  [31:0]   err_status
);
    localparam integer SLOTB = 256;
    localparam [2:0] C_POLL = 3'd0, C_READ = 3'd1, C_CHECK = 3'd2, C_FN = 3'd3, C_OUT = 3'd4, C_SEQ = 3'd5;
    reg  [2:0]          state;
    reg  [31:0]         seq;
    reg  [15:0]         slot;
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    reg  [8*SLOTB-1:0]  rbuf;
    /* verilator lint_on UNUSEDSIGNAL */
    reg  [2:0]          rbeat;
    reg  [2:0]          rnb;
    reg  [7:0]          rel;            // cycles since the poll that saw the request
    reg  [8*SLOTB-1:0]  wimg;
    reg  [15:0]         wstart;
    reg  [15:0]         wlen;
    reg  [2:0]          wbeat;
    reg  [2:0]          wnb;
    reg                 fn_start;
    reg  [15:0]         fn_id;
    reg  [15:0]         fn_len;
    reg  [8*MAXP-1:0]   fn_payload;
    wire                fn_done;
    wire [31:0]         fn_status;
    wire [15:0]         fn_out_len;
    wire [8*MAXP-1:0]   fn_out;

    `QRT_FUNCTION_TOP #(.MAXP(MAXP)) u_function (
        .clk(clk), .rst(rst), .start(fn_start), .function_id(fn_id), .length(fn_len),
        .payload(fn_payload), .done(fn_done), .status(fn_status), .out_length(fn_out_len),
        .out_payload(fn_out));

    wire [31:0] base = {16'd0, slot} * {16'd0, cfg_slot_bytes};
    wire [31:0] seen_seq = mem_rd_data[`QRT_HEADER_SEQ_MSB:`QRT_HEADER_SEQ_LSB];
    wire [15:0] seen_len = mem_rd_data[`QRT_HEADER_LENGTH_MSB:`QRT_HEADER_LENGTH_LSB];
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [15:0] seen_pieces = 16'd1 + (seen_len + 16'd11) / 16'd12;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [16:0] need = cfg_encoding ? {1'b0, seen_pieces[11:0], 4'd0} : 17'd16 + {1'b0, seen_len};
    // a torn per-piece length (past the slot) never counts as a message (contract: never ready)
    wire        need_ok = (need <= {1'b0, cfg_slot_bytes}) || !cfg_encoding;
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [16:0] need_clip = (need > {1'b0, cfg_slot_bytes}) ? {1'b0, cfg_slot_bytes} : need;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [2:0]  need_nb = need_clip[8:6] + {2'd0, |need_clip[5:0]};

    // the request's payload, contiguous
    wire [15:0] r_len = rbuf[`QRT_HEADER_LENGTH_MSB:`QRT_HEADER_LENGTH_LSB];
    wire [15:0] r_pieces = 16'd1 + (r_len + 16'd11) / 16'd12;
    wire [15:0] pieces_ok;
    wire [8*MAXP-1:0] payload_in;
    genvar g;
    generate
        for (g = 0; g < 16; g = g + 1) begin : g_ok
            assign pieces_ok[g] = (g >= r_pieces) || (rbuf[128*g +: 32] == seq);
        end
        for (g = 0; g < MAXP; g = g + 1) begin : g_in
            if (g < 15 * 12) begin : g_pp
                assign payload_in[8*g +: 8] = (g >= r_len) ? 8'd0 :
                    (cfg_encoding ? rbuf[128*(1 + g/12) + 32 + 8*(g%12) +: 8] : rbuf[128 + 8*g +: 8]);
            end else begin : g_cl
                assign payload_in[8*g +: 8] = (g >= r_len || cfg_encoding) ? 8'd0 : rbuf[128 + 8*g +: 8];
            end
        end
    endgenerate

    // the reply's image in its slot
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [15:0] rep_pieces = 16'd1 + (fn_out_len + 16'd11) / 16'd12;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [16:0] rep_need = cfg_encoding ? {1'b0, rep_pieces[11:0], 4'd0} : 17'd16 + {1'b0, fn_out_len};
    wire        rep_fits = (fn_out_len <= MAXP[15:0]) && (rep_need <= {1'b0, cfg_slot_bytes});
    wire [15:0] out_len = rep_fits ? fn_out_len : 16'd0;
    wire [31:0] out_status = rep_fits ? fn_status : `QRT_STATUS_BAD_LENGTH;
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [15:0] out_pieces = 16'd1 + (out_len + 16'd11) / 16'd12;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [15:0] out_used = cfg_encoding ? {out_pieces[11:0], 4'd0} : 16'd16 + out_len;
    wire [15:0] w1_len = cfg_encoding ? out_used : out_used - 16'd4;
    wire [2:0]  w1_nb = w1_len[8:6] + {2'd0, |w1_len[5:0]};
    wire [8*SLOTB-1:0] img_classic;
    wire [8*SLOTB-1:0] img_piece;
    qrt_slot_image #(.SLOTB(SLOTB), .MAXP(MAXP)) u_rep_image (
        .seq(seq), .function_id(fn_id), .length(out_len), .flags(out_status),
        .payload(fn_out), .img_classic(img_classic), .img_piece(img_piece));
    wire [15:0] beat_off  = wstart + {7'd0, wbeat, 6'd0};
    wire [15:0] beat_left = wlen - {7'd0, wbeat, 6'd0};
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [8*SLOTB-1:0] wshift = wimg >> {beat_off, 3'd0};
    /* verilator lint_on UNUSEDSIGNAL */
    // data beat wbeat leaves when rel + wnb >= answer + 1 + wbeat: the last one at rel == answer
    wire        w_emit = ({9'd0, rel} + {14'd0, wnb}) >= ({9'd0, cfg_answer_cycles} + 17'd1 + {14'd0, wbeat});

    // idle: the last poll of this slot came back without the request and the same poll is asked
    // again, so nothing changes until the memory does
    reg polled_empty;
    assign idle = (state == C_POLL) && mem_rd_en && polled_empty;

    always @(posedge clk) begin
        if (rst) begin
            state <= C_POLL; seq <= 32'd1; slot <= 16'd0; rbuf <= {8*SLOTB{1'b0}}; rbeat <= 3'd0; rnb <= 3'd0;
            rel <= 8'd0; wimg <= {8*SLOTB{1'b0}}; wstart <= 16'd0; wlen <= 16'd0; wbeat <= 3'd0; wnb <= 3'd0;
            fn_start <= 1'b0; fn_id <= 16'd0; fn_len <= 16'd0; fn_payload <= {8*MAXP{1'b0}};
            wr_valid <= 1'b0; wr_addr <= 32'd0; wr_data <= 512'd0; wr_bytes <= 7'd0; wr_last <= 1'b0;
            mem_rd_en <= 1'b0; mem_rd_addr <= 32'd0; n_served <= 32'd0; err_status <= 32'd0;
            polled_empty <= 1'b0;
        end else begin
            wr_valid <= 1'b0;
            wr_last <= 1'b0;
            fn_start <= 1'b0;
            if (state != C_POLL) rel <= (rel == 8'hFF) ? rel : rel + 8'd1;
            case (state)
                C_POLL: begin
                    mem_rd_en <= 1'b1;
                    mem_rd_addr <= base;
                    if (mem_rd_valid) polled_empty <= 1'b1;
                    if (mem_rd_valid && seen_seq == seq && need_ok) begin
                        polled_empty <= 1'b0;
                        rbuf[511:0] <= mem_rd_data;
                        rel <= 8'd1;
                        rnb <= need_nb;
                        rbeat <= 3'd1;
                        if (need_nb > 3'd1) begin
                            mem_rd_addr <= base + 32'd64;
                            state <= C_READ;
                        end else begin
                            mem_rd_en <= 1'b0;
                            state <= C_CHECK;
                        end
                    end
                end
                C_READ: begin
                    rbuf[512*rbeat +: 512] <= mem_rd_data;
                    rbeat <= rbeat + 3'd1;
                    if (rbeat == rnb - 3'd1) begin
                        mem_rd_en <= 1'b0;
                        state <= C_CHECK;
                    end else begin
                        mem_rd_addr <= base + {23'd0, rbeat + 3'd1, 6'd0};
                    end
                end
                C_CHECK: begin
                    if (cfg_encoding && pieces_ok != 16'hFFFF) begin
                        state <= C_POLL;    // torn or stale: not a message yet
                    end else begin
                        fn_start <= 1'b1;
                        fn_id <= rbuf[`QRT_HEADER_FUNCTION_MSB:`QRT_HEADER_FUNCTION_LSB];
                        fn_len <= r_len;
                        fn_payload <= payload_in;
                        state <= C_FN;
                    end
                end
                C_FN: if (fn_done) begin
                    wimg <= cfg_encoding ? img_piece : img_classic;
                    wstart <= cfg_encoding ? 16'd0 : 16'd4;
                    wlen <= w1_len;
                    wnb <= w1_nb;
                    wbeat <= 3'd0;
                    if (out_status != `QRT_STATUS_OK) err_status <= err_status + 32'd1;
                    state <= C_OUT;
                end
                C_OUT: if (w_emit) begin
                    wr_valid <= 1'b1;
                    wr_addr <= base + {16'd0, wstart};
                    wr_data <= wshift[511:0];
                    wr_bytes <= (beat_left > 16'd64) ? 7'd64 : beat_left[6:0];
                    wr_last <= (wbeat == wnb - 3'd1);
                    wbeat <= wbeat + 3'd1;
                    if (wbeat == wnb - 3'd1) begin
                        if (cfg_encoding) begin
                            n_served <= n_served + 32'd1;
                            seq <= (seq == 32'hFFFF_FFFF) ? 32'd1 : seq + 32'd1;
                            slot <= ({1'b0, slot} == cfg_slots - 17'd1) ? 16'd0 : slot + 16'd1;
                            state <= C_POLL;
                        end else begin
                            state <= C_SEQ;
                        end
                    end
                end
                C_SEQ: begin
                    wr_valid <= 1'b1;
                    wr_addr <= base;
                    wr_data <= {480'd0, seq};
                    wr_bytes <= 7'd4;
                    wr_last <= 1'b1;
                    n_served <= n_served + 32'd1;
                    seq <= (seq == 32'hFFFF_FFFF) ? 32'd1 : seq + 32'd1;
                    slot <= ({1'b0, slot} == cfg_slots - 17'd1) ? 16'd0 : slot + 16'd1;
                    state <= C_POLL;
                end
                default: state <= C_POLL;
            endcase
        end
    end
endmodule
`default_nettype wire
