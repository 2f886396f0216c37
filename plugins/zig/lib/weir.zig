//! What the Zig operators under plugins/zig/ share: error results, the
//! config check, byte-key helpers, reading rows, the host calls on slices,
//! and the hooks of an operator that keeps no in-memory state
//! (`on-checkpoint`, `snapshot`, `restore`), exported from here for every
//! operator that imports this file.
//!
//! The build copies this file next to each operator's main.zig, with c.zig
//! (see plugins/zig/lib/c.h), so both import it by name.

const std = @import("std");
const c = @import("c.zig");

pub const INVALID_CONFIG = c.WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG;
pub const INVALID_INPUT = c.WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT;
pub const INCOMPATIBLE_STATE = c.WEIR_OPERATOR_TYPES_ERROR_INCOMPATIBLE_STATE;
pub const OTHER = c.WEIR_OPERATOR_TYPES_ERROR_OTHER;

pub const alloc = std.heap.c_allocator;

pub const Error = c.weir_operator_types_error_t;

/// Sets the error result (the bindings free its string after the call).
pub fn fail(err: *Error, tag: u8, msg: []const u8) bool {
    err.tag = tag;
    c.operator_string_dup_n(&err.val.other, msg.ptr, msg.len);
    return false;
}

/// Like `fail`, with the message in a C buffer (freed here).
pub fn failBuf(err: *Error, tag: u8, msg: *c.buf_t) bool {
    _ = fail(err, tag, bytes(msg.ptr, msg.len));
    c.free(msg.ptr);
    return false;
}

/// A C list of copies of `names` (the bindings free it).
fn stringList(comptime names: []const [*:0]const u8) c.operator_list_string_t {
    const p: [*c]c.operator_string_t = @ptrCast(@alignCast(c.malloc(names.len * @sizeOf(c.operator_string_t))));
    inline for (names, 0..) |n, i| c.operator_string_dup(&p[i], n);
    return .{ .ptr = p, .len = names.len };
}

/// Fills the result of `describe`.
pub fn describe(
    ret: *c.weir_operator_types_operator_info_t,
    name: [*:0]const u8,
    version: [*:0]const u8,
    comptime inputs: []const [*:0]const u8,
    comptime outputs: []const [*:0]const u8,
    state_version: u32,
) void {
    c.operator_string_dup(&ret.name, name);
    c.operator_string_dup(&ret.version, version);
    ret.inputs = stringList(inputs);
    ret.outputs = stringList(outputs);
    ret.state_version = state_version;
}

/// `ptr[0..len]`, also for the null pointer of an empty C list.
pub fn bytes(ptr: [*c]const u8, len: usize) []const u8 {
    return if (len == 0) "" else ptr[0..len];
}

pub fn newBuf() c.buf_t {
    return .{ .ptr = null, .len = 0, .cap = 0 };
}

/// The state key `key` ++ `suffix`, malloc'd.
pub fn stateKey(key: []const u8, comptime suffix: []const u8) c.operator_list_u8_t {
    const k: [*c]u8 = @ptrCast(c.malloc(key.len + suffix.len));
    if (key.len > 0) @memcpy(k[0..key.len], key);
    @memcpy(k[key.len .. key.len + suffix.len], suffix);
    return .{ .ptr = k, .len = key.len + suffix.len };
}

/// `err` is set: the hook returns false.
pub const Failed = error{Failed};

/// The operator's config, parsed: its members (none when the config is
/// blank) live in `arena` until `deinit`.
pub const Config = struct {
    arena: c.arena_t = .{ .head = null },
    members: []const c.jmember_t = &.{},

    pub fn deinit(self: *Config) void {
        c.arena_free(&self.arena);
    }
};

/// Parses `ctx.config` (JSON, optional). Fails with an `invalid-config`
/// error when it is not a JSON object.
pub fn parseConfig(ctx: *c.weir_operator_types_open_context_t, err: *Error) Failed!Config {
    var config: Config = .{};
    var text: [*c]const u8 = ctx.config.ptr;
    var len: usize = ctx.config.len;
    c.utf8_trim(&text, &len);
    if (len == 0) return config;
    var why: [*c]const u8 = null;
    const v = c.json_parse(&config.arena, text, len, &why);
    if (v == null or v.*.type != c.J_OBJ) {
        config.deinit();
        return failed(err, INVALID_CONFIG, if (v == null) "config is not JSON" else "config must be a JSON object");
    }
    if (v.*.n > 0) config.members = v.*.members[0..v.*.n];
    return config;
}

fn failed(err: *Error, tag: u8, msg: []const u8) Failed {
    _ = fail(err, tag, msg);
    return error.Failed;
}

/// Sorts `items` by the bytes `key` gives and keeps one of each key: the
/// distinct items, in byte order, at the front of `items`.
pub fn sortUnique(comptime T: type, items: []T, comptime key: fn (T) []const u8) []T {
    const by = struct {
        fn less(_: void, a: T, b: T) bool {
            return std.mem.order(u8, key(a), key(b)) == .lt;
        }
    };
    std.mem.sort(T, items, {}, by.less);
    var n: usize = 0;
    for (items) |item| {
        if (n == 0 or !std.mem.eql(u8, key(items[n - 1]), key(item))) {
            items[n] = item;
            n += 1;
        }
    }
    return items[0..n];
}

/// The index of the item of `sorted` (as sortUnique leaves it) whose key is `k`.
pub fn indexOf(comptime T: type, sorted: []const T, k: []const u8, comptime key: fn (T) []const u8) ?usize {
    const by = struct {
        fn order(probe: []const u8, item: T) std.math.Order {
            return std.mem.order(u8, probe, key(item));
        }
    };
    return std.sort.binarySearch(T, sorted, k, by.order);
}

/// The fields of a row (the layout plugins/c/lib/weir_util.h describes),
/// read one at a time by `next` with the C helpers.
pub const RowFields = struct {
    row: []const u8,
    at: usize = 0,

    /// The next field (its name and text point into the row), null after
    /// the last; error.BadRow when the row is malformed there.
    pub fn next(self: *RowFields) error{BadRow}!?c.row_field_t {
        if (self.at >= self.row.len) return null;
        var f: c.row_field_t = undefined;
        if (!c.row_next(self.row.ptr, self.row.len, &self.at, &f)) return error.BadRow;
        return f;
    }
};

/// A row field's name.
pub fn fieldName(f: *const c.row_field_t) []const u8 {
    return bytes(f.name, f.name_len);
}

// Zig gives zero-length allocations an address outside linear memory, which
// the host refuses even for an empty list: the host calls below are made
// only with a non-empty list.

/// The stored values of `keys` (free with operator_list_option_list_u8_free).
pub fn getMany(keys: []c.operator_list_u8_t) c.operator_list_option_list_u8_t {
    var key_list: c.operator_list_list_u8_t = .{ .ptr = keys.ptr, .len = keys.len };
    var stored: c.operator_list_option_list_u8_t = .{ .ptr = null, .len = 0 };
    if (keys.len > 0) c.weir_operator_state_get_many(&key_list, &stored);
    return stored;
}

pub fn putMany(entries: []c.weir_operator_state_entry_t) void {
    var list: c.weir_operator_state_list_entry_t = .{ .ptr = entries.ptr, .len = entries.len };
    if (entries.len > 0) c.weir_operator_state_put_many(&list);
}

/// Emits `records` on output port 0.
pub fn emit(records: []c.weir_operator_types_record_t) void {
    var list: c.weir_operator_emit_list_record_t = .{ .ptr = records.ptr, .len = records.len };
    if (records.len > 0) c.weir_operator_emit_emit_batch(0, &list);
}

// ---- the hooks of an operator that keeps no in-memory state

export fn exports_weir_operator_lifecycle_on_checkpoint(checkpoint_id: u64, err: *Error) bool {
    _ = checkpoint_id;
    _ = err;
    return true;
}

export fn exports_weir_operator_snapshot_snapshot(ret: *c.operator_list_u8_t) void {
    ret.* = .{ .ptr = null, .len = 0 };
}

export fn exports_weir_operator_snapshot_restore(state_version: u32, data: *c.operator_list_u8_t, err: *Error) bool {
    _ = state_version;
    defer c.operator_list_u8_free(data);
    if (data.len > 0) return fail(err, INCOMPATIBLE_STATE, "this operator keeps no in-memory state but got snapshot bytes");
    return true;
}
