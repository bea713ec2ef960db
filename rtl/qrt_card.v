// The link card's exchange engine (Alveo U55C side of the memory contract), 250 MHz.
//
// Link side in : whole frames as 512-bit words (valid/ready, in_bytes valid bytes, in_last).
// Request path : each frame becomes one message in the consumer's request queue, written as posted
//                writes on the wr_* port (byte address in the consumer's region, up to 64 bytes a
//                beat, wr_last ends one posted write). Classic: header fields and payload from byte
//                4, then the sequence word last. Per-piece: one burst of 16-byte pieces, each with
//                the sequence number.
// Reply path   : polls its own memory (the reply queue, mem_rd_* port: 64 bytes from any byte
//                address, data one cycle later) for the oldest outstanding reply; when it is
//                complete, reads it out and hands it to the link side (out_*: a 16-byte header --
//                sequence, function, length, status, reserved -- then the payload) so that the last
//                word leaves cfg_read_cycles after the poll that saw it.
// Counters     : err_frame (frame too long for the slot or the engine: dropped, counted),
//                err_status (reply status not ok), err_length (reply length past its slot),
//                n_requests, n_replies.
// idle         : high when nothing changes until memory changes or a frame is offered.
`include "qrt_contract.vh"
`default_nettype none

module qrt_card #(
    parameter integer MAXP = 180          // largest payload in bytes (a 256-byte per-piece slot)
) (
    input  wire          clk,
    input  wire          rst,
    input  wire [16:0]   cfg_slots,        // 1..65536
    input  wire [15:0]   cfg_slot_bytes,   // multiple of 16, 32..256
    input  wire          cfg_encoding,     // `QRT_ENCODING_CLASSIC / `QRT_ENCODING_PER_PIECE
    input  wire [15:0]   cfg_function,     // function id put in every request header
    input  wire [7:0]    cfg_land_cycles,  // last frame word accepted -> last beat of the request data
    input  wire [7:0]    cfg_read_cycles,  // poll that saw the reply -> last reply word handed back
    input  wire          in_valid,
    output wire          in_ready,
    input  wire [511:0]  in_data,
    input  wire [6:0]    in_bytes,
    input  wire          in_last,
    output reg           wr_valid,
    output reg  [31:0]   wr_addr,
    output reg  [511:0]  wr_data,
    output reg  [6:0]    wr_bytes,
    output reg           wr_last,
    output reg           mem_rd_en,
    output reg  [31:0]   mem_rd_addr,
    input  wire          mem_rd_valid,
    input  wire [511:0]  mem_rd_data,
    output reg           out_valid,
    output reg  [511:0]  out_data,
    output reg  [6:0]    out_bytes,
    output reg           out_last,
    output wire          idle,
    output reg  [31:0]   err_frame,
    output reg  [31:0]   err_status,
    output reg  [31:0]   err_length,
    output reg  [31:0]   n_requests,
    output reg  [31:0]   n_replies
);
    localparam integer SLOTB = 256;                 // slot image bytes (4 beats)
    localparam integer FBITS = 1536;                // frame buffer: 3 words of 512 bits

    // ------------------------------------------------------------------ request side (A)
    localparam [2:0] A_IN = 3'd0, A_BUILD = 3'd1, A_WAIT = 3'd2, A_DATA = 3'd3, A_SEQ = 3'd4;
    reg  [2:0]        a_state;
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    reg  [FBITS-1:0]  fbuf;
    /* verilator lint_on UNUSEDSIGNAL */
    reg  [15:0]       flen;
    reg  [1:0]        fword;
    reg               fbad;
    reg  [31:0]       a_seq;
    reg  [15:0]       a_slot;
    reg  [16:0]       inflight;
    reg  [8*SLOTB-1:0] wimg;
    reg  [15:0]       wstart;
    reg  [15:0]       wlen;
    reg  [2:0]        wbeat;
    reg  [2:0]        wnb;
    reg  [7:0]        wwait;

    wire [31:0] a_base = {16'd0, a_slot} * {16'd0, cfg_slot_bytes};
    assign in_ready = (a_state == A_IN) && (inflight < cfg_slots);
    wire fire = in_valid && in_ready;

    // message images of the frame in fbuf (flen bytes)
    wire [8*SLOTB-1:0] img_classic;
    wire [8*SLOTB-1:0] img_piece;
    qrt_slot_image #(.SLOTB(SLOTB), .MAXP(MAXP)) u_req_image (
        .seq(a_seq), .function_id(cfg_function), .length(flen), .flags(32'd0),
        .payload(fbuf[8*MAXP-1:0]), .img_classic(img_classic), .img_piece(img_piece));

    // bytes of the message in its slot, and of the first posted write
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [15:0] pieces_req = 16'd1 + (flen + 16'd11) / 16'd12;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [15:0] used_req   = cfg_encoding ? {pieces_req[11:0], 4'd0} : 16'd16 + flen;
    wire [15:0] w1_len     = cfg_encoding ? used_req : used_req - 16'd4;
    wire [2:0]  w1_nb      = w1_len[8:6] + {2'd0, |w1_len[5:0]};
    wire [15:0] beat_off   = wstart + {7'd0, wbeat, 6'd0};
    wire [15:0] beat_left  = wlen - {7'd0, wbeat, 6'd0};
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [8*SLOTB-1:0] wshift = wimg >> {beat_off, 3'd0};
    /* verilator lint_on UNUSEDSIGNAL */

    // ------------------------------------------------------------------ reply side (B)
    localparam [2:0] B_POLL = 3'd0, B_READ = 3'd1, B_CHECK = 3'd2, B_OUT = 3'd3;
    reg  [2:0]        b_state;
    reg  [31:0]       b_seq;
    reg  [15:0]       b_slot;
    reg  [8*SLOTB-1:0] rbuf;
    reg  [2:0]        rbeat;
    reg  [2:0]        rnb;
    reg  [7:0]        rel;      // cycles since the poll that saw the reply
    reg  [8*SLOTB-1:0] oimg;
    reg  [15:0]       olen;
    reg  [2:0]        obeat;
    reg  [2:0]        onb;
    wire [31:0] b_base = {16'd0, b_slot} * {16'd0, cfg_slot_bytes};

    wire [31:0] seen_seq = mem_rd_data[`QRT_HEADER_SEQ_MSB:`QRT_HEADER_SEQ_LSB];
    wire [15:0] seen_len = mem_rd_data[`QRT_HEADER_LENGTH_MSB:`QRT_HEADER_LENGTH_LSB];
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [15:0] pieces_rep = 16'd1 + (seen_len + 16'd11) / 16'd12;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [16:0] need_rep = cfg_encoding ? {1'b0, pieces_rep[11:0], 4'd0} : 17'd16 + {1'b0, seen_len};
    wire        rep_long = need_rep > {1'b0, cfg_slot_bytes};
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [16:0] need_clip = rep_long ? {1'b0, cfg_slot_bytes} : need_rep;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [2:0]  need_nb = need_clip[8:6] + {2'd0, |need_clip[5:0]};

    // per-piece reply: every piece the length needs carries the sequence number
    wire [15:0] r_len = rbuf[`QRT_HEADER_LENGTH_MSB:`QRT_HEADER_LENGTH_LSB];
    wire [15:0] r_pieces = 16'd1 + (r_len + 16'd11) / 16'd12;
    wire [15:0] pieces_ok;
    wire [8*SLOTB-1:0] img_out;   // header then contiguous payload
    assign img_out[127:0] = rbuf[127:0];
    genvar g;
    generate
        for (g = 0; g < 16; g = g + 1) begin : g_ok
            assign pieces_ok[g] = (g >= r_pieces) || (rbuf[128*g +: 32] == b_seq);
        end
        for (g = 0; g < SLOTB - 16; g = g + 1) begin : g_out
            if (g < 15 * 12) begin : g_pp
                assign img_out[128 + 8*g +: 8] = cfg_encoding ? rbuf[128*(1 + g/12) + 32 + 8*(g%12) +: 8]
                                                             : rbuf[128 + 8*g +: 8];
            end else begin : g_cl
                assign img_out[128 + 8*g +: 8] = cfg_encoding ? 8'd0 : rbuf[128 + 8*g +: 8];
            end
        end
    endgenerate
    wire [15:0] out_left = olen - {7'd0, obeat, 6'd0};
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [8*SLOTB-1:0] oshift = oimg >> {obeat, 9'd0};
    /* verilator lint_on UNUSEDSIGNAL */
    wire [16:0] emit_at = {9'd0, cfg_read_cycles} + 17'd1;

    // idle: no frame in the engine, and the last poll of the reply slot came back without the
    // reply while the same poll is asked again: nothing changes until memory does or a frame comes
    reg polled_empty;
    assign idle = (a_state == A_IN) && (b_state == B_POLL) && mem_rd_en && polled_empty;

    wire a_issue = (a_state == A_SEQ) || (a_state == A_DATA && wbeat == wnb - 3'd1 && cfg_encoding);
    wire o_emit  = ({9'd0, rel} + {14'd0, onb}) >= (emit_at + {14'd0, obeat});
    wire b_done  = (b_state == B_OUT) && o_emit && (obeat == onb - 3'd1);
    wire [15:0] olen_full = 16'd16 + r_len;
    wire [15:0] olen_clip = (olen_full > 16'd256) ? 16'd256 : olen_full;
    /* verilator lint_off UNUSEDSIGNAL */  // only some bits are used
    wire [15:0] onb_w = (olen_clip + 16'd63) >> 6;
    /* verilator lint_on UNUSEDSIGNAL */

    always @(posedge clk) begin
        if (rst) begin
            a_state <= A_IN; fbuf <= {FBITS{1'b0}}; flen <= 16'd0; fword <= 2'd0; fbad <= 1'b0;
            a_seq <= 32'd1; a_slot <= 16'd0; inflight <= 17'd0;
            wimg <= {8*SLOTB{1'b0}}; wstart <= 16'd0; wlen <= 16'd0; wbeat <= 3'd0; wnb <= 3'd0; wwait <= 8'd0;
            wr_valid <= 1'b0; wr_addr <= 32'd0; wr_data <= 512'd0; wr_bytes <= 7'd0; wr_last <= 1'b0;
            b_state <= B_POLL; b_seq <= 32'd1; b_slot <= 16'd0; rbuf <= {8*SLOTB{1'b0}}; rbeat <= 3'd0;
            rnb <= 3'd0; rel <= 8'd0; oimg <= {8*SLOTB{1'b0}}; olen <= 16'd0; obeat <= 3'd0; onb <= 3'd0;
            mem_rd_en <= 1'b0; mem_rd_addr <= 32'd0; polled_empty <= 1'b0;
            out_valid <= 1'b0; out_data <= 512'd0; out_bytes <= 7'd0; out_last <= 1'b0;
            err_frame <= 32'd0; err_status <= 32'd0; err_length <= 32'd0; n_requests <= 32'd0; n_replies <= 32'd0;
        end else begin
            wr_valid <= 1'b0;
            wr_last <= 1'b0;
            out_valid <= 1'b0;
            out_last <= 1'b0;
            inflight <= inflight + {16'd0, a_issue} - {16'd0, b_done};

            // ---------------- A: frame in, request out
            case (a_state)
                A_IN: if (fire) begin
                    if (fword == 2'd3 || (fword == 2'd2 && !in_last)) fbad <= 1'b1;
                    else fbuf[512*fword +: 512] <= in_data;
                    fword <= (fword == 2'd3) ? fword : fword + 2'd1;
                    flen <= flen + {9'd0, in_bytes};
                    if (in_last) a_state <= A_BUILD;
                end
                A_BUILD: begin
                    if (fbad || flen > MAXP[15:0] || used_req > cfg_slot_bytes) begin
                        err_frame <= err_frame + 32'd1;
                        a_state <= A_IN;
                    end else begin
                        wimg <= cfg_encoding ? img_piece : img_classic;
                        wstart <= cfg_encoding ? 16'd0 : 16'd4;
                        wlen <= w1_len;
                        wnb <= w1_nb;
                        wbeat <= 3'd0;
                        if (cfg_land_cycles > {5'd0, w1_nb} + 8'd1) begin
                            wwait <= cfg_land_cycles - {5'd0, w1_nb} - 8'd2;
                            a_state <= A_WAIT;
                        end else begin
                            a_state <= A_DATA;
                        end
                    end
                    fword <= 2'd0;
                    fbad <= 1'b0;
                end
                A_WAIT: if (wwait == 8'd0) a_state <= A_DATA; else wwait <= wwait - 8'd1;
                A_DATA: begin
                    wr_valid <= 1'b1;
                    wr_addr <= a_base + {16'd0, wstart};
                    wr_data <= wshift[511:0];
                    wr_bytes <= (beat_left > 16'd64) ? 7'd64 : beat_left[6:0];
                    wr_last <= (wbeat == wnb - 3'd1);
                    wbeat <= wbeat + 3'd1;
                    if (wbeat == wnb - 3'd1) begin
                        if (cfg_encoding) begin
                            a_state <= A_IN;
                        end else begin
                            a_state <= A_SEQ;
                        end
                    end
                end
                A_SEQ: begin
                    wr_valid <= 1'b1;
                    wr_addr <= a_base;
                    wr_data <= {480'd0, a_seq};
                    wr_bytes <= 7'd4;
                    wr_last <= 1'b1;
                    a_state <= A_IN;
                end
                default: a_state <= A_IN;
            endcase
            if (a_issue) begin
                flen <= 16'd0;
                n_requests <= n_requests + 32'd1;
                a_seq <= (a_seq == 32'hFFFF_FFFF) ? 32'd1 : a_seq + 32'd1;
                a_slot <= ({1'b0, a_slot} == cfg_slots - 17'd1) ? 16'd0 : a_slot + 16'd1;
            end else if (a_state == A_BUILD && (fbad || flen > MAXP[15:0] || used_req > cfg_slot_bytes)) begin
                flen <= 16'd0;
            end

            // ---------------- B: poll the reply queue, read the reply out, hand it back
            case (b_state)
                B_POLL: begin
                    mem_rd_en <= 1'b1;
                    mem_rd_addr <= b_base;
                    if (mem_rd_valid) polled_empty <= 1'b1;
                    if (mem_rd_valid && inflight != 17'd0 && seen_seq == b_seq) begin
                        polled_empty <= 1'b0;
                        rbuf[511:0] <= mem_rd_data;
                        rel <= 8'd1;
                        rnb <= need_nb;
                        rbeat <= 3'd1;
                        if (rep_long) err_length <= err_length + 32'd1;
                        if (need_nb > 3'd1) begin
                            mem_rd_addr <= b_base + 32'd64;
                            b_state <= B_READ;
                        end else begin
                            mem_rd_en <= 1'b0;
                            b_state <= B_CHECK;
                        end
                    end
                end
                B_READ: begin
                    rel <= rel + 8'd1;
                    rbuf[512*rbeat +: 512] <= mem_rd_data;
                    rbeat <= rbeat + 3'd1;
                    if (rbeat == rnb - 3'd1) begin
                        mem_rd_en <= 1'b0;
                        b_state <= B_CHECK;
                    end else begin
                        mem_rd_addr <= b_base + {23'd0, rbeat + 3'd1, 6'd0};
                    end
                end
                B_CHECK: begin
                    rel <= rel + 8'd1;
                    if (cfg_encoding && pieces_ok != 16'hFFFF) begin
                        b_state <= B_POLL;   // a piece has not landed yet: poll again
                    end else begin
                        if (rbuf[`QRT_HEADER_FLAGS_MSB:`QRT_HEADER_FLAGS_LSB] != `QRT_STATUS_OK)
                            err_status <= err_status + 32'd1;
                        oimg <= img_out;
                        olen <= olen_clip;
                        onb <= onb_w[2:0];
                        obeat <= 3'd0;
                        b_state <= B_OUT;
                    end
                end
                B_OUT: begin
                    rel <= (rel == 8'hFF) ? rel : rel + 8'd1;
                    if (o_emit) begin
                        out_valid <= 1'b1;
                        out_data <= oshift[511:0];
                        out_bytes <= (out_left > 16'd64) ? 7'd64 : out_left[6:0];
                        out_last <= (obeat == onb - 3'd1);
                        obeat <= obeat + 3'd1;
                        if (obeat == onb - 3'd1) begin
                            n_replies <= n_replies + 32'd1;
                            b_seq <= (b_seq == 32'hFFFF_FFFF) ? 32'd1 : b_seq + 32'd1;
                            b_slot <= ({1'b0, b_slot} == cfg_slots - 17'd1) ? 16'd0 : b_slot + 16'd1;
                            b_state <= B_POLL;
                        end
                    end
                end
                default: b_state <= B_POLL;
            endcase
        end
    end
endmodule
`default_nettype wire
