//! `reconcile` (对账) in Zig: the same operator as plugins/reconcile (Rust).
//!
//! Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a
//! string holding one, as CSV sources produce). The key is the record key,
//! else the JSON field named by `key_field` (default "key"). For each key the
//! operator emits exactly one record, keyed by the key:
//!
//!   {"key": k, "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B",
//!    "a": <amount or null>, "b": <amount or null>}
//!
//! as soon as both sides are present (MATCH when |a - b| <= tolerance), and
//! for keys seen on one side only, at `finish`. The first record per key and
//! side counts; later records for a side already seen are ignored.
//!
//! State layout (state version 2, shared with the Rust build): key `<k>` 0x00
//! `rc`, value a row value (0xFF and a row, plugins/c/lib/weir_util.h) of
//! the fields `a` (f64), `b` (f64) and `done` (true), in that order, an
//! absent side and `done: false` left out; a done key keeps no amounts
//! (FF 02 04 "done"). A row is read with its fields in any order, unknown
//! names skipped; `a`/`b` may also be an integer or a decimal, or null
//! (absent); `t` (the first timestamp, kept by the builds with `timeout`) is
//! checked, not kept. Values of state version 1, JSON {"a": <f64>, "b":
//! <f64>, "done": true}, are still read, so a version-1 checkpoint continues.
//!
//! Config (JSON, optional): {"tolerance": 0.0, "key_field": "key"}.
//!
//! Build: scripts/build-polyglot.sh zig (see plugins/zig/word-count/main.zig).

const std = @import("std");
// The C declarations of the bindings and helpers, made by the build with
// `zig translate-c` (Zig 0.16+ has no @cImport) from plugins/zig/lib/c.h.
const c = @import("c.zig");
// plugins/zig/lib/weir.zig, which also exports the on-checkpoint, snapshot
// and restore hooks.
const weir = @import("weir.zig");

const SUFFIX = "\x00rc";
const SCAN_PAGE = 1000;

var tolerance: f64 = 0;
var key_field: []u8 = &.{};

const Pending = struct {
    a: ?f64 = null,
    b: ?f64 = null,
    done: bool = false,
};

export fn exports_weir_operator_lifecycle_describe(ret: *c.weir_operator_types_operator_info_t) void {
    weir.describe(ret, "reconcile", "0.1.0", &.{ "a", "b" }, &.{"out"}, 2);
}

export fn exports_weir_operator_lifecycle_open(ctx: *c.weir_operator_types_open_context_t, err: *c.weir_operator_types_error_t) bool {
    defer c.weir_operator_types_open_context_free(ctx);
    var tol: f64 = 0;
    var field: []const u8 = "key";
    var config = weir.parseConfig(ctx, err) catch return false;
    defer config.deinit();
    for (config.members) |*m| {
        const name = weir.bytes(m.key, m.key_len);
        if (std.mem.eql(u8, name, "tolerance")) {
            if (m.value.type != c.J_NUM) return weir.fail(err, weir.INVALID_CONFIG, "`tolerance`: expected a number");
            tol = m.value.num;
        } else if (std.mem.eql(u8, name, "key_field")) {
            if (m.value.type != c.J_STR) return weir.fail(err, weir.INVALID_CONFIG, "`key_field`: expected a string");
            field = weir.bytes(m.value.text, m.value.text_len);
        } else {
            return weir.fail(err, weir.INVALID_CONFIG, "unknown field, expected `tolerance` or `key_field`");
        }
    }
    if (std.math.isNan(tol) or tol < 0) return weir.fail(err, weir.INVALID_CONFIG, "`tolerance` must be >= 0");
    tolerance = tol;
    weir.alloc.free(key_field);
    key_field = weir.alloc.dupe(u8, field) catch @panic("out of memory");
    return true;
}

/// The key (appended to `key`) and amount of a record, or false with `err` set.
fn parseRecord(arena: *c.arena_t, rec: *c.weir_operator_types_record_t, key: *c.buf_t, amount: *f64, err: *c.weir_operator_types_error_t) bool {
    var why: [*c]const u8 = null;
    const v = c.json_parse(arena, rec.value.ptr, rec.value.len, &why);
    if (v == null) return weir.fail(err, weir.INVALID_INPUT, "record value is not the expected JSON");
    if (rec.key.is_some and c.utf8_valid(rec.key.val.ptr, rec.key.val.len)) {
        c.buf_push(key, rec.key.val.ptr, rec.key.val.len);
    } else {
        var f: ?*const c.jval_t = null;
        if (v.*.type == c.J_OBJ) {
            for (0..v.*.n) |i| {
                const m = &v.*.members[i];
                if (std.mem.eql(u8, weir.bytes(m.key, m.key_len), key_field)) f = &m.value;
            }
        }
        if (f != null and f.?.type == c.J_STR) {
            c.buf_push(key, f.?.text, f.?.text_len);
        } else if (f != null and f.?.type != c.J_NULL) {
            c.buf_json_value(key, f.?);
        } else {
            var msg = weir.newBuf();
            c.buf_puts(&msg, "record has no key and no `");
            c.buf_push(&msg, key_field.ptr, key_field.len);
            c.buf_puts(&msg, "` field (set the source's `key` or the operator's `key_field`): ");
            c.buf_json_value(&msg, v);
            return weir.failBuf(err, weir.INVALID_INPUT, &msg);
        }
    }
    const am = c.json_get(v, "amount");
    if (am == null) {
        var msg = weir.newBuf();
        c.buf_puts(&msg, "record has no `amount`: ");
        c.buf_json_value(&msg, v);
        return weir.failBuf(err, weir.INVALID_INPUT, &msg);
    }
    var ok = false;
    if (am.*.type == c.J_NUM) {
        amount.* = am.*.num;
        ok = true;
    } else if (am.*.type == c.J_STR) {
        var s: [*c]const u8 = am.*.text;
        var n: usize = am.*.text_len;
        c.utf8_trim(&s, &n);
        ok = c.parse_rust_f64(s, n, amount);
    }
    if (!ok) {
        var msg = weir.newBuf();
        c.buf_puts(&msg, "`amount` is not a number: ");
        c.buf_json_value(&msg, am);
        return weir.failBuf(err, weir.INVALID_INPUT, &msg);
    }
    return true;
}

fn encodePending(b: *c.buf_t, p: Pending) void {
    c.buf_putc(b, c.ROW_VALUE);
    if (p.a) |a| c.row_f64(b, "a", a);
    if (p.b) |x| c.row_f64(b, "b", x);
    if (p.done) c.row_bool(b, "done", true);
}

/// The pending state of a row (a row value after its first byte), or
/// error.BadRow when it does not decode.
fn decodeRow(row: []const u8) error{BadRow}!Pending {
    var p = Pending{};
    var fields = weir.RowFields{ .row = row };
    while (try fields.next()) |f| {
        const name = weir.fieldName(&f);
        if (std.mem.eql(u8, name, "a") or std.mem.eql(u8, name, "b")) {
            const side = if (name[0] == 'a') &p.a else &p.b;
            var x: f64 = 0;
            if (f.type == c.ROW_NULL) {
                side.* = null;
            } else if (c.row_number(&f, &x)) {
                side.* = x;
            } else return error.BadRow;
        } else if (std.mem.eql(u8, name, "done")) {
            if (f.type != c.ROW_FALSE and f.type != c.ROW_TRUE) return error.BadRow;
            p.done = f.type == c.ROW_TRUE;
        } else if (std.mem.eql(u8, name, "t")) {
            const ok = f.type == c.ROW_NULL or f.type == c.ROW_INT or
                (f.type == c.ROW_UINT and f.u64 <= std.math.maxInt(i64));
            if (!ok) return error.BadRow;
        }
    }
    return p;
}

fn decodeJson(data: []const u8) ?Pending {
    var arena: c.arena_t = .{ .head = null };
    defer c.arena_free(&arena);
    var why: [*c]const u8 = null;
    const v = c.json_parse(&arena, data.ptr, data.len, &why);
    if (v == null or v.*.type != c.J_OBJ) return null;
    var p = Pending{};
    const a = c.json_get(v, "a");
    const b = c.json_get(v, "b");
    const d = c.json_get(v, "done");
    if (a != null and a.*.type == c.J_NUM) p.a = a.*.num;
    if (b != null and b.*.type == c.J_NUM) p.b = b.*.num;
    if (d != null and d.*.type == c.J_BOOL) p.done = d.*.boolean;
    return p;
}

/// A stored value: a row value (first byte ROW_VALUE) or version 1's JSON;
/// null with `err` set when it does not decode.
fn decodePending(data: []const u8, err: *c.weir_operator_types_error_t) ?Pending {
    const p = if (data.len > 0 and data[0] == c.ROW_VALUE)
        decodeRow(data[1..]) catch null
    else
        decodeJson(data);
    if (p == null) _ = weir.fail(err, weir.INCOMPATIBLE_STATE, "state `rc` holds a value that does not decode");
    return p;
}

/// The output record for `key`, or null when neither side is known. The
/// record owns copies of its bytes (emitAll frees them).
fn classified(key: []const u8, p: Pending) ?c.weir_operator_types_record_t {
    const status = if (p.a != null and p.b != null)
        (if (@abs(p.a.? - p.b.?) <= tolerance + 1e-9) "MATCH" else "AMOUNT_MISMATCH")
    else if (p.a != null) "ONLY_A" else if (p.b != null) "ONLY_B" else return null;
    var v = weir.newBuf();
    c.buf_puts(&v, "{\"key\":");
    c.buf_json_string(&v, key.ptr, key.len);
    c.buf_puts(&v, ",\"status\":\"");
    c.buf_push(&v, status.ptr, status.len);
    c.buf_puts(&v, "\",\"a\":");
    if (p.a) |a| c.buf_f64(&v, a) else c.buf_puts(&v, "null");
    c.buf_puts(&v, ",\"b\":");
    if (p.b) |b| c.buf_f64(&v, b) else c.buf_puts(&v, "null");
    c.buf_putc(&v, '}');
    var k = weir.newBuf();
    c.buf_push(&k, key.ptr, key.len);
    return .{
        .key = .{ .is_some = true, .val = .{ .ptr = k.ptr, .len = k.len } },
        .value = .{ .ptr = v.ptr, .len = v.len },
        .timestamp = .{ .is_some = false, .val = 0 },
    };
}

/// Emits `out` and frees its records.
fn emitAll(out: []c.weir_operator_types_record_t) void {
    weir.emit(out);
    for (out) |r| {
        c.free(r.key.val.ptr);
        c.free(r.value.ptr);
    }
}

const Slot = struct {
    key: []const u8,
    p: Pending = .{},
    changed: bool = false,
};

fn slotKey(s: Slot) []const u8 {
    return s.key;
}

export fn exports_weir_operator_lifecycle_process(port: u32, batch: *c.exports_weir_operator_lifecycle_list_record_t, err: *c.weir_operator_types_error_t) bool {
    defer c.exports_weir_operator_lifecycle_list_record_free(batch);
    if (port != 0 and port != 1) return weir.fail(err, weir.OTHER, "reconcile has inputs 0 (a) and 1 (b)");
    const recs = batch.ptr[0..batch.len];
    const keys = weir.alloc.alloc(c.buf_t, recs.len) catch @panic("out of memory");
    const amounts = weir.alloc.alloc(f64, recs.len) catch @panic("out of memory");
    for (keys) |*k| k.* = weir.newBuf();
    defer {
        for (keys) |k| c.free(k.ptr);
        weir.alloc.free(keys);
        weir.alloc.free(amounts);
    }
    var arena: c.arena_t = .{ .head = null };
    defer c.arena_free(&arena);
    for (recs, keys, amounts) |*rec, *k, *a| {
        if (!parseRecord(&arena, rec, k, a, err)) return false;
    }

    // Distinct keys, sorted: one state read and one write per batch.
    const slots = weir.alloc.alloc(Slot, recs.len) catch @panic("out of memory");
    defer weir.alloc.free(slots);
    for (keys, slots) |k, *s| s.* = .{ .key = weir.bytes(k.ptr, k.len) };
    const uniq = weir.sortUnique(Slot, slots, slotKey);
    const nd = uniq.len;

    const state_keys = weir.alloc.alloc(c.operator_list_u8_t, nd) catch @panic("out of memory");
    defer {
        for (state_keys) |k| c.free(k.ptr);
        weir.alloc.free(state_keys);
    }
    for (uniq, state_keys) |s, *k| k.* = weir.stateKey(s.key, SUFFIX);
    var stored = weir.getMany(state_keys);
    defer c.operator_list_option_list_u8_free(&stored);
    for (uniq, 0..) |*s, i| {
        const v = stored.ptr[i];
        if (v.is_some) s.p = decodePending(weir.bytes(v.val.ptr, v.val.len), err) orelse return false;
    }

    var out = weir.alloc.alloc(c.weir_operator_types_record_t, recs.len) catch @panic("out of memory");
    defer weir.alloc.free(out);
    var n_out: usize = 0;
    for (keys, amounts) |k, amount| {
        const i = weir.indexOf(Slot, uniq, weir.bytes(k.ptr, k.len), slotKey).?;
        const s = &uniq[i];
        const side = if (port == 0) &s.p.a else &s.p.b;
        if (s.p.done or side.* != null) continue;
        side.* = amount;
        s.changed = true;
        if (s.p.a != null and s.p.b != null) {
            out[n_out] = classified(s.key, s.p).?;
            n_out += 1;
            // A done key keeps no amounts.
            s.p = .{ .done = true };
        }
    }
    emitAll(out[0..n_out]);

    var entries = weir.alloc.alloc(c.weir_operator_state_entry_t, nd) catch @panic("out of memory");
    defer weir.alloc.free(entries);
    var n_entries: usize = 0;
    for (uniq, state_keys) |s, k| {
        if (!s.changed) continue;
        var v = weir.newBuf();
        encodePending(&v, s.p);
        entries[n_entries] = .{ .key = k, .value = .{ .ptr = v.ptr, .len = v.len } };
        n_entries += 1;
    }
    weir.putMany(entries[0..n_entries]);
    for (entries[0..n_entries]) |e| c.free(e.value.ptr);
    return true;
}

export fn exports_weir_operator_lifecycle_finish(err: *c.weir_operator_types_error_t) bool {
    // Every key not classified yet, in byte-key order, a page at a time.
    var prefix: c.operator_list_u8_t = .{ .ptr = null, .len = 0 };
    var after = weir.newBuf();
    defer c.free(after.ptr);
    var has_after = false;
    while (true) {
        var after_list: c.operator_list_u8_t = .{ .ptr = after.ptr, .len = after.len };
        var page: c.weir_operator_state_list_entry_t = undefined;
        c.weir_operator_state_scan(&prefix, if (has_after) &after_list else null, SCAN_PAGE, &page);
        defer c.weir_operator_state_list_entry_free(&page);
        const entries = page.ptr[0..page.len];
        var out = weir.alloc.alloc(c.weir_operator_types_record_t, entries.len) catch @panic("out of memory");
        defer weir.alloc.free(out);
        var updates = weir.alloc.alloc(c.weir_operator_state_entry_t, entries.len) catch @panic("out of memory");
        defer weir.alloc.free(updates);
        var n_out: usize = 0;
        var n_up: usize = 0;
        for (entries) |e| {
            const key = weir.bytes(e.key.ptr, e.key.len);
            if (!std.mem.endsWith(u8, key, SUFFIX)) continue;
            var p = decodePending(weir.bytes(e.value.ptr, e.value.len), err) orelse return false;
            if (p.done) continue;
            if (classified(key[0 .. key.len - SUFFIX.len], p)) |r| {
                out[n_out] = r;
                n_out += 1;
            }
            p = .{ .done = true };
            var v = weir.newBuf();
            encodePending(&v, p);
            updates[n_up] = .{ .key = e.key, .value = .{ .ptr = v.ptr, .len = v.len } };
            n_up += 1;
        }
        emitAll(out[0..n_out]);
        weir.putMany(updates[0..n_up]);
        for (updates[0..n_up]) |u| c.free(u.value.ptr);
        if (entries.len < SCAN_PAGE) break;
        const last = entries[entries.len - 1];
        after.len = 0;
        c.buf_push(&after, last.key.ptr, last.key.len);
        has_after = true;
    }
    return true;
}
