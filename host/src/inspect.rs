//! `weir inspect`: what a plugin is, without running it.

use serde::Serialize;

use crate::plugin::Plugin;

/// A plugin's self-description plus what the component imports and exports.
/// Its JSON form is the stable output of `weir inspect --json`.
///
/// ```no_run
/// let rt = weir::Runtime::new().unwrap();
/// let plugin = rt.load("plugins/target/filter.wasm").unwrap();
/// let report = weir::inspect::PluginReport::of(&plugin, rt.engine());
/// println!("{}", report.to_text());
/// ```
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginReport {
    /// The plugin file.
    pub path: String,
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// Input port names, in port-number order.
    pub inputs: Vec<String>,
    /// Output port names, in port-number order.
    pub outputs: Vec<String>,
    /// State layout version.
    pub state_version: u32,
    /// Names of the component's imports (interfaces), sorted.
    pub imports: Vec<String>,
    /// Names of the component's exports, sorted.
    pub exports: Vec<String>,
    /// File size in bytes.
    pub size: u64,
    /// sha256 of the file, lower-case hex.
    pub sha256: String,
}

impl PluginReport {
    /// Describes `plugin`.
    pub fn of(plugin: &Plugin, engine: &wasmtime::Engine) -> Self {
        let ty = plugin.component().component_type();
        let mut imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let mut exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        imports.sort();
        exports.sort();
        let info = plugin.info();
        PluginReport {
            path: plugin.path().display().to_string(),
            name: info.name.clone(),
            version: info.version.clone(),
            inputs: info.inputs.clone(),
            outputs: info.outputs.clone(),
            state_version: info.state_version,
            imports,
            exports,
            size: plugin.size(),
            sha256: plugin.sha256().to_string(),
        }
    }

    /// A human-readable multi-line description.
    pub fn to_text(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut s = format!(
            "plugin:        {} {}\nfile:          {} ({} bytes)\nsha256:        {}\ninputs:        {}\noutputs:       {}\nstate version: {}\n",
            self.name,
            self.version,
            self.path,
            self.size,
            self.sha256,
            list(&self.inputs),
            list(&self.outputs),
            self.state_version,
        );
        s.push_str("imports:\n");
        for i in &self.imports {
            s.push_str(&format!("  {i}\n"));
        }
        s.push_str("exports:\n");
        for e in &self.exports {
            s.push_str(&format!("  {e}\n"));
        }
        s
    }
}
