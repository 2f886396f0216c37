//! Builders and helpers on the descriptive types of the WIT contract.

use crate::error::{Error, Result};

/// What an operator says about itself: name, version, ports, state version.
///
/// ```
/// let info = weir_sdk::OperatorInfo::new("reconcile", "1.0.0")
///     .input("a")
///     .input("b")
///     .output("out")
///     .state_version(2);
/// assert_eq!(info.inputs, ["a", "b"]);
/// ```
pub use crate::bindings::weir::operator::types::OperatorInfo;

/// Where an operator instance runs and its configuration, given to
/// [`Operator::open`](crate::Operator::open).
///
/// ```
/// let ctx = weir_sdk::OpenContext::with_config(r#"{"field":"x"}"#);
/// assert_eq!(ctx.parallelism, 1);
/// ```
pub use crate::bindings::weir::operator::types::OpenContext;

impl OperatorInfo {
    /// Info with no ports and state version 1.
    ///
    /// ```
    /// let info = weir_sdk::OperatorInfo::new("x", "0.1.0");
    /// assert_eq!(info.state_version, 1);
    /// ```
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        OperatorInfo {
            name: name.into(),
            version: version.into(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            state_version: 1,
        }
    }

    /// Adds an input port; its number is its position.
    ///
    /// ```
    /// let info = weir_sdk::OperatorInfo::new("x", "0.1.0").input("in");
    /// assert_eq!(info.input_port("in"), Some(0));
    /// ```
    pub fn input(mut self, name: impl Into<String>) -> Self {
        self.inputs.push(name.into());
        self
    }

    /// Adds an output port; its number is its position.
    ///
    /// ```
    /// let info = weir_sdk::OperatorInfo::new("x", "0.1.0").output("out");
    /// assert_eq!(info.outputs, ["out"]);
    /// ```
    pub fn output(mut self, name: impl Into<String>) -> Self {
        self.outputs.push(name.into());
        self
    }

    /// Sets the state version (default 1).
    ///
    /// ```
    /// let info = weir_sdk::OperatorInfo::new("x", "0.1.0").state_version(3);
    /// assert_eq!(info.state_version, 3);
    /// ```
    pub fn state_version(mut self, version: u32) -> Self {
        self.state_version = version;
        self
    }

    /// The number of the input port called `name`.
    ///
    /// ```
    /// let info = weir_sdk::OperatorInfo::new("x", "0.1.0").input("a").input("b");
    /// assert_eq!(info.input_port("b"), Some(1));
    /// ```
    pub fn input_port(&self, name: &str) -> Option<u32> {
        self.inputs.iter().position(|p| p == name).map(|i| i as u32)
    }
}

impl OpenContext {
    /// A context for a single instance (`instance` 0 of 1) of operator `test`
    /// with the given JSON configuration; handy in tests.
    ///
    /// ```
    /// let ctx = weir_sdk::OpenContext::with_config("{}");
    /// assert_eq!(ctx.instance, 0);
    /// ```
    pub fn with_config(config: impl Into<String>) -> Self {
        OpenContext {
            operator_id: "test".into(),
            instance: 0,
            parallelism: 1,
            config: config.into(),
        }
    }

    /// The configuration parsed into `T`, or [`Error::InvalidConfig`] with the
    /// parser's message (which names the bad field).
    ///
    /// ```
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Config { limit: u32 }
    /// let ctx = weir_sdk::OpenContext::with_config(r#"{"limit": 5}"#);
    /// assert_eq!(ctx.config_as::<Config>().unwrap().limit, 5);
    /// assert!(weir_sdk::OpenContext::with_config("{}").config_as::<Config>().is_err());
    /// let err = weir_sdk::OpenContext::with_config(r#"{"limit": "x"}"#).config_as::<Config>().unwrap_err();
    /// assert!(err.to_string().contains("`limit`"), "{err}");
    /// ```
    pub fn config_as<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        let text = if self.config.trim().is_empty() {
            "{}"
        } else {
            &self.config
        };
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            if path == "." {
                Error::InvalidConfig(e.into_inner().to_string())
            } else {
                Error::InvalidConfig(format!("`{path}`: {}", e.into_inner()))
            }
        })
    }
}
