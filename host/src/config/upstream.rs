//! [`Upstream`], what an operator's `inputs` and a sink's `input` name: a
//! source, or an operator's output port (`op` for port 0, `op.port` by the
//! port's name); and reading one upstream or a list of them (a union).

use std::fmt;

use toml::Value;

/// A reference to what feeds an input: a source or an operator (`node`),
/// and for an operator one of its output ports by name (`port`; `None` is
/// its first output port). Written `node` or `node.port` in the job file.
/// Ids never contain a `.`, so the first `.` separates the two.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Upstream {
    /// The id of a source or an operator.
    pub node: String,
    /// An output port name of operator `node`; `None`: port 0.
    pub port: Option<String>,
}

impl Upstream {
    /// Reads `node` or `node.port`.
    ///
    /// ```
    /// use weir::config::Upstream;
    /// assert_eq!(Upstream::parse("a"), Upstream { node: "a".into(), port: None });
    /// assert_eq!(Upstream::parse("a.b").port.as_deref(), Some("b"));
    /// ```
    pub fn parse(text: &str) -> Upstream {
        match text.split_once('.') {
            Some((node, port)) => Upstream {
                node: node.to_owned(),
                port: Some(port.to_owned()),
            },
            None => Upstream {
                node: text.to_owned(),
                port: None,
            },
        }
    }

    /// The index of the output port this names among an operator's declared
    /// `outputs` (0 for a bare id); `None` if the operator has no such port.
    pub fn port_index(&self, outputs: &[String]) -> Option<u32> {
        let index = match &self.port {
            None if outputs.is_empty() => return None,
            None => 0,
            Some(name) => outputs.iter().position(|p| p == name)?,
        };
        u32::try_from(index).ok()
    }
}

impl From<&str> for Upstream {
    fn from(text: &str) -> Upstream {
        Upstream::parse(text)
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.port {
            Some(port) => write!(f, "{}.{port}", self.node),
            None => f.write_str(&self.node),
        }
    }
}

/// The upstreams of one input (`what`, as messages name it): a string
/// (one upstream) or, when `list_ok`, a non-empty list of distinct strings
/// (a union). `hint` says what to write instead.
pub(super) fn read_upstreams(
    what: &str,
    value: Value,
    list_ok: bool,
    hint: &str,
) -> Result<Vec<Upstream>, String> {
    let one = |value: Value| match value {
        Value::String(up) => Ok(Upstream::parse(&up)),
        other => Err(format!(
            "{what} must be an upstream id string{} (got {}); {hint}",
            if list_ok { " or a list of them" } else { "" },
            other.type_str()
        )),
    };
    let list = match value {
        Value::Array(list) if list_ok => list,
        value => return Ok(vec![one(value)?]),
    };
    if list.is_empty() {
        return Err(format!("{what} is an empty list; {hint}"));
    }
    let mut ups: Vec<Upstream> = Vec::with_capacity(list.len());
    for value in list {
        let up = one(value)?;
        if ups.contains(&up) {
            return Err(format!(
                "{what} lists {:?} twice; list each upstream once",
                up.to_string()
            ));
        }
        ups.push(up);
    }
    Ok(ups)
}
