//! `word-count` in Zig: the same operator as plugins/word-count (Rust).
//!
//! Each input record is one word: its key when it has one (and it is UTF-8),
//! else its value with surrounding whitespace trimmed. For every record the
//! operator increments the word's count in host state and emits
//! {"word": "<w>", "count": <n>} keyed by the word. Empty words are skipped.
//!
//! State layout (state version 1, shared with the Rust build): key
//! `<word>` 0x00 `count`, value the count as JSON text.
//!
//! Config (JSON, optional): {"lowercase": true} counts words case-insensitively.
//!
//! Build: scripts/build-polyglot.sh zig. The bindings are the C bindings of
//! the world (operator.h, translated to Zig by `zig translate-c`); JSON, UTF-8 trimming and
//! lowercasing come from the C helpers in plugins/c/lib, which Zig compiles
//! and links directly.

const std = @import("std");
// The C declarations of the bindings and helpers, made by the build with
// `zig translate-c` (Zig 0.16+ has no @cImport) from plugins/zig/lib/c.h.
const c = @import("c.zig");
// plugins/zig/lib/weir.zig, which also exports the on-checkpoint, snapshot
// and restore hooks.
const weir = @import("weir.zig");

const SUFFIX = "\x00count";

var lowercase: bool = false;

export fn exports_weir_operator_lifecycle_describe(ret: *c.weir_operator_types_operator_info_t) void {
    weir.describe(ret, "word-count", "0.1.0", &.{"in"}, &.{"out"}, 1);
}

export fn exports_weir_operator_lifecycle_open(ctx: *c.weir_operator_types_open_context_t, err: *c.weir_operator_types_error_t) bool {
    defer c.weir_operator_types_open_context_free(ctx);
    lowercase = false;
    var config = weir.parseConfig(ctx, err) catch return false;
    defer config.deinit();
    for (config.members) |*m| {
        if (std.mem.eql(u8, weir.bytes(m.key, m.key_len), "lowercase")) {
            if (m.value.type != c.J_BOOL) return weir.fail(err, weir.INVALID_CONFIG, "`lowercase`: expected a boolean");
            lowercase = m.value.boolean;
        } else {
            return weir.fail(err, weir.INVALID_CONFIG, "unknown field, expected `lowercase`");
        }
    }
    return true;
}

/// A word of the batch; `buf` owns its bytes.
const Word = struct {
    buf: c.buf_t,
    fn text(w: Word) []const u8 {
        return weir.bytes(w.buf.ptr, w.buf.len);
    }
};

fn itself(w: []const u8) []const u8 {
    return w;
}

export fn exports_weir_operator_lifecycle_process(port: u32, batch: *c.exports_weir_operator_lifecycle_list_record_t, err: *c.weir_operator_types_error_t) bool {
    _ = port;
    defer c.exports_weir_operator_lifecycle_list_record_free(batch);
    const recs = batch.ptr[0..batch.len];
    const words = weir.alloc.alloc(Word, recs.len) catch @panic("out of memory");
    for (words) |*w| w.* = .{ .buf = weir.newBuf() };
    defer {
        for (words) |w| c.free(w.buf.ptr);
        weir.alloc.free(words);
    }
    for (recs, words) |*rec, *w| {
        var raw: [*c]const u8 = undefined;
        var len: usize = undefined;
        if (rec.key.is_some and c.utf8_valid(rec.key.val.ptr, rec.key.val.len)) {
            raw = rec.key.val.ptr;
            len = rec.key.val.len;
        } else if (c.utf8_valid(rec.value.ptr, rec.value.len)) {
            raw = rec.value.ptr;
            len = rec.value.len;
        } else {
            return weir.fail(err, weir.INVALID_INPUT, "record value is not UTF-8");
        }
        c.utf8_trim(&raw, &len);
        if (lowercase) c.utf8_lower(&w.buf, raw, len) else c.buf_push(&w.buf, raw, len);
    }

    // Distinct non-empty words, sorted: one state read and one write per batch.
    var distinct = weir.alloc.alloc([]const u8, words.len) catch @panic("out of memory");
    defer weir.alloc.free(distinct);
    var nd: usize = 0;
    for (words) |w| {
        if (w.buf.len > 0) {
            distinct[nd] = w.text();
            nd += 1;
        }
    }
    const uniq = weir.sortUnique([]const u8, distinct[0..nd], itself);

    const keys = weir.alloc.alloc(c.operator_list_u8_t, uniq.len) catch @panic("out of memory");
    for (uniq, keys) |d, *k| k.* = weir.stateKey(d, SUFFIX);
    var stored = weir.getMany(keys);
    const counts = weir.alloc.alloc(u64, uniq.len) catch @panic("out of memory");
    defer weir.alloc.free(counts);
    for (counts, 0..) |*n, i| {
        const v = stored.ptr[i];
        n.* = if (v.is_some) std.fmt.parseInt(u64, weir.bytes(v.val.ptr, v.val.len), 10) catch
            return weir.fail(err, weir.INCOMPATIBLE_STATE, "state `count` holds a value that does not decode") else 0;
    }
    c.operator_list_option_list_u8_free(&stored);

    const out = weir.alloc.alloc(c.weir_operator_types_record_t, words.len) catch @panic("out of memory");
    var n_out: usize = 0;
    for (words) |w| {
        if (w.buf.len == 0) continue;
        const i = weir.indexOf([]const u8, uniq, w.text(), itself).?;
        counts[i] += 1;
        var v = weir.newBuf();
        c.buf_puts(&v, "{\"word\":");
        c.buf_json_string(&v, w.buf.ptr, w.buf.len);
        var tmp: [40]u8 = undefined;
        const tail = std.fmt.bufPrint(&tmp, ",\"count\":{d}}}", .{counts[i]}) catch unreachable;
        c.buf_push(&v, tail.ptr, tail.len);
        out[n_out] = .{
            .key = .{ .is_some = true, .val = .{ .ptr = w.buf.ptr, .len = w.buf.len } },
            .value = .{ .ptr = v.ptr, .len = v.len },
            .timestamp = .{ .is_some = false, .val = 0 },
        };
        n_out += 1;
    }
    weir.emit(out[0..n_out]);
    for (out[0..n_out]) |r| c.free(r.value.ptr);
    weir.alloc.free(out);

    const entries = weir.alloc.alloc(c.weir_operator_state_entry_t, uniq.len) catch @panic("out of memory");
    var texts = weir.alloc.alloc([24]u8, uniq.len) catch @panic("out of memory");
    for (entries, keys, counts, 0..) |*e, k, n, i| {
        const t = std.fmt.bufPrint(&texts[i], "{d}", .{n}) catch unreachable;
        e.* = .{ .key = k, .value = .{ .ptr = t.ptr, .len = t.len } };
    }
    weir.putMany(entries);
    weir.alloc.free(texts);
    weir.alloc.free(entries);
    for (keys) |k| c.free(k.ptr);
    weir.alloc.free(keys);
    return true;
}

export fn exports_weir_operator_lifecycle_finish(err: *c.weir_operator_types_error_t) bool {
    _ = err;
    return true;
}
