//! Bindings generated from the `weir:operator` world (`wit/` in the Weir
//! repository). Not a stable API: the SDK's types wrap them, and
//! [`export!`](crate::export) uses them. A leaf: it imports nothing of the
//! crate.

wit_bindgen::generate!({
    world: "operator-rows",
    path: "../wit",
    pub_export_macro: true,
    export_macro_name: "__export_operator_world",
    default_bindings_module: "weir_sdk::bindings",
    additional_derives: [PartialEq, Eq],
});
