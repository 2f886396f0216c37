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

const SUFFIX = "\x00count";
const INVALID_CONFIG = c.WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG;
const INVALID_INPUT = c.WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT;
const INCOMPATIBLE_STATE = c.WEIR_OPERATOR_TYPES_ERROR_INCOMPATIBLE_STATE;

const alloc = std.heap.c_allocator;

var lowercase: bool = false;

/// Sets the error result (the bindings free its string after the call).
fn fail(err: *c.weir_operator_types_error_t, tag: u8, msg: []const u8) bool {
    err.tag = tag;
    c.operator_string_dup_n(&err.val.other, msg.ptr, msg.len);
    return false;
}

fn stringList(comptime names: []const [*:0]const u8) c.operator_list_string_t {
    const p: [*c]c.operator_string_t = @ptrCast(@alignCast(c.malloc(names.len * @sizeOf(c.operator_string_t))));
    inline for (names, 0..) |n, i| c.operator_string_dup(&p[i], n);
    return .{ .ptr = p, .len = names.len };
}

fn bytes(ptr: [*c]const u8, len: usize) []const u8 {
    return if (len == 0) "" else ptr[0..len];
}

export fn exports_weir_operator_lifecycle_describe(ret: *c.weir_operator_types_operator_info_t) void {
    c.operator_string_dup(&ret.name, "word-count");
    c.operator_string_dup(&ret.version, "0.1.0");
    ret.inputs = stringList(&.{"in"});
    ret.outputs = stringList(&.{"out"});
    ret.state_version = 1;
}

export fn exports_weir_operator_lifecycle_open(ctx: *c.weir_operator_types_open_context_t, err: *c.weir_operator_types_error_t) bool {
    defer c.weir_operator_types_open_context_free(ctx);
    var arena: c.arena_t = .{ .head = null };
    defer c.arena_free(&arena);
    var text: [*c]const u8 = ctx.config.ptr;
    var len: usize = ctx.config.len;
    c.utf8_trim(&text, &len);
    lowercase = false;
    if (len == 0) return true;
    var why: [*c]const u8 = null;
    const config = c.json_parse(&arena, text, len, &why);
    if (config == null) return fail(err, INVALID_CONFIG, "config is not JSON");
    if (config.*.type != c.J_OBJ) return fail(err, INVALID_CONFIG, "config must be a JSON object");
    for (0..config.*.n) |i| {
        const m = &config.*.members[i];
        if (std.mem.eql(u8, bytes(m.key, m.key_len), "lowercase")) {
            if (m.value.type != c.J_BOOL) return fail(err, INVALID_CONFIG, "`lowercase`: expected a boolean");
            lowercase = m.value.boolean;
        } else {
            return fail(err, INVALID_CONFIG, "unknown field, expected `lowercase`");
        }
    }
    return true;
}

/// A word of the batch; `buf` owns its bytes.
const Word = struct {
    buf: c.buf_t,
    fn text(w: Word) []const u8 {
        return bytes(w.buf.ptr, w.buf.len);
    }
};

fn lessThan(_: void, a: []const u8, b: []const u8) bool {
    return std.mem.order(u8, a, b) == .lt;
}

fn stateKey(word: []const u8) c.operator_list_u8_t {
    const k: [*c]u8 = @ptrCast(c.malloc(word.len + SUFFIX.len));
    @memcpy(k[0..word.len], word);
    @memcpy(k[word.len .. word.len + SUFFIX.len], SUFFIX);
    return .{ .ptr = k, .len = word.len + SUFFIX.len };
}

export fn exports_weir_operator_lifecycle_process(port: u32, batch: *c.exports_weir_operator_lifecycle_list_record_t, err: *c.weir_operator_types_error_t) bool {
    _ = port;
    defer c.exports_weir_operator_lifecycle_list_record_free(batch);
    const recs = batch.ptr[0..batch.len];
    const words = alloc.alloc(Word, recs.len) catch @panic("out of memory");
    for (words) |*w| w.* = .{ .buf = .{ .ptr = null, .len = 0, .cap = 0 } };
    defer {
        for (words) |w| c.free(w.buf.ptr);
        alloc.free(words);
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
            return fail(err, INVALID_INPUT, "record value is not UTF-8");
        }
        c.utf8_trim(&raw, &len);
        if (lowercase) c.utf8_lower(&w.buf, raw, len) else c.buf_push(&w.buf, raw, len);
    }

    // Distinct non-empty words, sorted: one state read and one write per batch.
    var distinct = alloc.alloc([]const u8, words.len) catch @panic("out of memory");
    defer alloc.free(distinct);
    var nd: usize = 0;
    for (words) |w| {
        if (w.buf.len > 0) {
            distinct[nd] = w.text();
            nd += 1;
        }
    }
    std.mem.sort([]const u8, distinct[0..nd], {}, lessThan);
    var u: usize = 0;
    for (distinct[0..nd]) |d| {
        if (u == 0 or !std.mem.eql(u8, distinct[u - 1], d)) {
            distinct[u] = d;
            u += 1;
        }
    }
    const uniq = distinct[0..u];

    const keys = alloc.alloc(c.operator_list_u8_t, uniq.len) catch @panic("out of memory");
    for (uniq, keys) |d, *k| k.* = stateKey(d);
    var key_list: c.operator_list_list_u8_t = .{ .ptr = keys.ptr, .len = keys.len };
    // Zig gives zero-length allocations an address outside linear memory,
    // which the host refuses even for an empty list: call only with keys.
    var stored: c.operator_list_option_list_u8_t = .{ .ptr = null, .len = 0 };
    if (uniq.len > 0) c.weir_operator_state_get_many(&key_list, &stored);
    const counts = alloc.alloc(u64, uniq.len) catch @panic("out of memory");
    defer alloc.free(counts);
    for (counts, 0..) |*n, i| {
        const v = stored.ptr[i];
        n.* = if (v.is_some) std.fmt.parseInt(u64, bytes(v.val.ptr, v.val.len), 10) catch
            return fail(err, INCOMPATIBLE_STATE, "state `count` holds a value that does not decode") else 0;
    }
    c.operator_list_option_list_u8_free(&stored);

    const out = alloc.alloc(c.weir_operator_types_record_t, words.len) catch @panic("out of memory");
    var n_out: usize = 0;
    for (words) |w| {
        if (w.buf.len == 0) continue;
        const i = std.sort.binarySearch([]const u8, uniq, w.text(), struct {
            fn order(key: []const u8, item: []const u8) std.math.Order {
                return std.mem.order(u8, key, item);
            }
        }.order).?;
        counts[i] += 1;
        var v: c.buf_t = .{ .ptr = null, .len = 0, .cap = 0 };
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
    var out_list: c.weir_operator_emit_list_record_t = .{ .ptr = out.ptr, .len = n_out };
    if (n_out > 0) c.weir_operator_emit_emit_batch(0, &out_list);
    for (out[0..n_out]) |r| c.free(r.value.ptr);
    alloc.free(out);

    const entries = alloc.alloc(c.weir_operator_state_entry_t, uniq.len) catch @panic("out of memory");
    var texts = alloc.alloc([24]u8, uniq.len) catch @panic("out of memory");
    for (entries, keys, counts, 0..) |*e, k, n, i| {
        const t = std.fmt.bufPrint(&texts[i], "{d}", .{n}) catch unreachable;
        e.* = .{ .key = k, .value = .{ .ptr = t.ptr, .len = t.len } };
    }
    var entry_list: c.weir_operator_state_list_entry_t = .{ .ptr = entries.ptr, .len = entries.len };
    if (entries.len > 0) c.weir_operator_state_put_many(&entry_list);
    alloc.free(texts);
    alloc.free(entries);
    for (keys) |k| c.free(k.ptr);
    alloc.free(keys);
    return true;
}

export fn exports_weir_operator_lifecycle_on_checkpoint(checkpoint_id: u64, err: *c.weir_operator_types_error_t) bool {
    _ = checkpoint_id;
    _ = err;
    return true;
}

export fn exports_weir_operator_lifecycle_finish(err: *c.weir_operator_types_error_t) bool {
    _ = err;
    return true;
}

export fn exports_weir_operator_snapshot_snapshot(ret: *c.operator_list_u8_t) void {
    ret.* = .{ .ptr = null, .len = 0 };
}

export fn exports_weir_operator_snapshot_restore(state_version: u32, data: *c.operator_list_u8_t, err: *c.weir_operator_types_error_t) bool {
    _ = state_version;
    defer c.operator_list_u8_free(data);
    if (data.len > 0) return fail(err, INCOMPATIBLE_STATE, "this operator keeps no in-memory state but got snapshot bytes");
    return true;
}
