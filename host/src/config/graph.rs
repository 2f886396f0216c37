//! The wiring of a job's DAG: every upstream names a source or an
//! operator (a port of an operator, of a source with named ports, or a
//! source's dead letters, which `Job::wire_dead_letters` wires into the
//! sink its `on_error` names), every named port of a source is consumed, ids
//! are unique, operators form no
//! cycle (Kahn's algorithm, [`find_cycle`] names one), every source and
//! operator has a consumer, and an operator's inputs and the output ports
//! its consumers name fit its plugin's ports ([`Job::resolve_ports`]).

use std::collections::HashMap;
use std::path::Path;

use super::error::label;
use super::{DEAD_LETTER_PORT, Inputs, Job, JobError, OperatorConfig, Upstream};

impl Job {
    /// Operators in topological order (upstreams first, ties in file order); sources and
    /// sinks excluded. On a job not built by `parse`, operators on a cycle come last.
    pub fn topological_operators(&self) -> Vec<&OperatorConfig> {
        let ups = self.operator_upstreams();
        let mut order = kahn(&ups);
        let rest: Vec<usize> = (0..ups.len()).filter(|i| !order.contains(i)).collect();
        order.extend(rest);
        order.into_iter().map(|i| &self.operators[i]).collect()
    }

    /// Checks an operator's inputs against the declared input port names of `plugin`
    /// (the file messages name: the job file's plugin, or one swapped in) and resolves
    /// them to (port index, upstream) pairs, ordered by port index, then in the order a
    /// port's list gives (a union's upstreams), then the operator's replay source (its
    /// output port of the same name); and checks that every output port its
    /// consumers name is one of `plugin_outputs`.
    ///
    /// Fails if a named port is not declared by the plugin, a declared port is left
    /// unwired, a positional list's length differs from the number of declared ports,
    /// the plugin declares no output port while something consumes the operator, a
    /// consumer names an output port the plugin does not declare, or one input lists
    /// the same output port twice (`op` and `op.first`).
    pub fn resolve_ports(
        &self,
        operator: &OperatorConfig,
        plugin: &Path,
        plugin_inputs: &[String],
        plugin_outputs: &[String],
    ) -> Result<Vec<(u32, Upstream)>, JobError> {
        let fail = |message: String| self.invalid(&label("operator", &operator.id), message);
        let plugin = plugin.display();
        let declared = |ports: &[String]| match ports {
            [] => "none".to_owned(),
            ports => ports.join(", "),
        };
        // wired[i] is what feeds declared port i.
        let mut wired: Vec<&[Upstream]> = vec![&[]; plugin_inputs.len()];
        match &operator.inputs {
            Inputs::Named(pairs) => {
                for (port, ups) in pairs {
                    let Some(i) = plugin_inputs.iter().position(|p| p == port) else {
                        return Err(fail(format!(
                            "input port {port:?} is not declared by plugin {plugin} \
                             (declared inputs: {}); rename or remove it in `inputs`",
                            declared(plugin_inputs)
                        )));
                    };
                    wired[i] = ups;
                }
            }
            Inputs::Positional(ups) if ups.len() != plugin_inputs.len() => {
                return Err(fail(format!(
                    "`inputs` lists {} upstream(s) but plugin {plugin} declares {} input \
                     port(s) ({}); list one upstream per port, or union several into one \
                     port by name: inputs = {{ port = [\"a\", \"b\"] }}",
                    ups.len(),
                    plugin_inputs.len(),
                    declared(plugin_inputs)
                )));
            }
            Inputs::Positional(_) => wired = operator.inputs.port_lists(),
        }
        let mut resolved = Vec::new();
        for ((index, port), ups) in (0u32..).zip(plugin_inputs).zip(wired) {
            if ups.is_empty() {
                return Err(fail(format!(
                    "input port {port:?} of plugin {plugin} is not wired; add \
                     {port} = \"<upstream id>\" to `inputs`"
                )));
            }
            resolved.extend(ups.iter().map(|up| (index, up.clone())));
            if let Some(replay) = self.replay_upstream(&operator.id, port) {
                if port == DEAD_LETTER_PORT {
                    return Err(fail(format!(
                        "plugin {plugin} declares an input port `{DEAD_LETTER_PORT}`, the name of the dead-letter port of the source replaying its dead letters; rename the plugin's port"
                    )));
                }
                resolved.push((index, replay));
            }
        }
        if operator.on_error.dead_letter_sink().is_some()
            && plugin_outputs.iter().any(|p| p == DEAD_LETTER_PORT)
        {
            return Err(fail(format!(
                "plugin {plugin} declares an output port `{DEAD_LETTER_PORT}`, the port `on_error` sends dead letters on; rename the plugin's port or send the dead letters with on_error = \"skip\""
            )));
        }
        let consumers = self.consumers(&operator.id);
        if plugin_outputs.is_empty() && !consumers.is_empty() {
            return Err(fail(format!(
                "plugin {plugin} declares no output port but {} consume(s) this operator; \
                 use a plugin with an output or rewire the consumers",
                consumers.join(", ")
            )));
        }
        for (entry, ups) in self.port_lists() {
            let mut seen: Vec<(u32, &Upstream)> = Vec::new();
            for up in ups.iter().filter(|up| up.node == operator.id) {
                if self.takes_dead_letters(&entry, up) {
                    continue;
                }
                let Some(index) = up.port_index(plugin_outputs) else {
                    return Err(self.invalid(
                        &entry,
                        format!(
                            "input {:?}: operator {:?} has no output port {:?} (plugin \
                             {plugin} declares outputs: {}); name one of those",
                            up.to_string(),
                            operator.id,
                            up.port.as_deref().unwrap_or_default(),
                            declared(plugin_outputs)
                        ),
                    ));
                };
                if let Some((_, first)) = seen.iter().find(|(i, _)| *i == index) {
                    return Err(self.invalid(
                        &entry,
                        format!(
                            "input lists {:?} and {:?}, the same output port of plugin \
                             {plugin}; list it once",
                            first.to_string(),
                            up.to_string()
                        ),
                    ));
                }
                seen.push((index, up));
            }
        }
        Ok(resolved)
    }

    /// Ids of everything that consumes `id`, on any of its output ports:
    /// operators (file order, each once), then sinks.
    pub fn consumers(&self, id: &str) -> Vec<&str> {
        let reads = |ups: Vec<&Upstream>| ups.iter().any(|up| up.node == id);
        // A replay source feeds its operator through `resolve_ports`.
        let replayed = (self.sources.iter().find(|s| s.id == id)).and_then(|s| s.replays());
        let ops = self
            .operators
            .iter()
            .filter(|op| reads(op.inputs.upstreams()) || replayed == Some(op.id.as_str()));
        // A sink reading only the dead letters does not consume the output.
        let sinks = self.sinks.iter().filter(|s| {
            let entry = label("sink", &s.id);
            reads(
                s.input
                    .iter()
                    .filter(|up| !self.takes_dead_letters(&entry, up))
                    .collect(),
            )
        });
        ops.map(|op| op.id.as_str())
            .chain(sinks.map(|s| s.id.as_str()))
            .collect()
    }

    /// Every input's list of upstreams (an operator's per port, a sink's), with the
    /// label of the entry that wrote it: operators in file order, then sinks.
    pub fn port_lists(&self) -> Vec<(String, &[Upstream])> {
        let ops = self.operators.iter().flat_map(|op| {
            let entry = label("operator", &op.id);
            let lists = op.inputs.port_lists().into_iter();
            lists.map(move |ups| (entry.clone(), ups))
        });
        let sinks = (self.sinks.iter()).map(|s| (label("sink", &s.id), s.input.as_slice()));
        ops.chain(sinks).collect()
    }

    /// For each operator, the indices of its upstream operators (sources are left out).
    fn operator_upstreams(&self) -> Vec<Vec<usize>> {
        // Reversed so that, were ids duplicated, the first operator with an id wins.
        let ids = self.operators.iter().enumerate().rev();
        let index: HashMap<&str, usize> = ids.map(|(i, op)| (op.id.as_str(), i)).collect();
        let ups = |op: &OperatorConfig| {
            let ups = op.inputs.upstreams();
            ups.iter()
                .filter_map(|up| index.get(up.node.as_str()).copied())
                .collect()
        };
        self.operators.iter().map(ups).collect()
    }

    /// Adds to each sink an `on_error` names the dead-letter ports of the
    /// entries that name it; refuses a policy that names no sink, and a
    /// sink left with no input.
    pub(super) fn wire_dead_letters(&mut self) -> Result<(), JobError> {
        let mut wired: Vec<(String, Upstream)> = Vec::new();
        for (kind, id, sink) in self.dead_letter_policies() {
            if !self.sinks.iter().any(|s| s.id == sink) {
                let ids: Vec<&str> = self.sinks.iter().map(|s| s.id.as_str()).collect();
                let message = format!(
                    "`on_error.dead_letter` = {sink:?} is not a sink of the job (sinks: {}); name one, or add a [[sink]] for the dead letters",
                    ids.join(", ")
                );
                return Err(self.invalid(&label(kind, id), message));
            }
            if kind == "sink" {
                let target = (self.sinks.iter().find(|s| s.id == sink)).expect("found above");
                let message = match target.on_error.dead_letter_sink() {
                    _ if sink == id => Some(format!(
                        "`on_error.dead_letter` = {sink:?} is this sink; name another sink for the records it refuses"
                    )),
                    Some(next) => Some(format!(
                        "`on_error.dead_letter` = {sink:?}, a sink that sends its own refused records to {next:?}; dead letters of a sink go to a sink without a dead-letter sink of its own"
                    )),
                    None => None,
                };
                if let Some(message) = message {
                    return Err(self.invalid(&label(kind, id), message));
                }
            }
            let port = Some(DEAD_LETTER_PORT.to_owned());
            let node = id.to_owned();
            wired.push((sink.to_owned(), Upstream { node, port }));
        }
        for (sink, up) in wired {
            let sink = (self.sinks.iter_mut().find(|s| s.id == sink)).expect("found above");
            if !sink.input.contains(&up) {
                sink.input.push(up);
            }
        }
        if let Some(sink) = self.sinks.iter().find(|s| s.input.is_empty()) {
            let message = "`input` is missing; add input = \"<source or operator id>\"".into();
            return Err(self.invalid(&label("sink", &sink.id), message));
        }
        Ok(())
    }

    /// Each source, operator and sink whose `on_error` sends dead letters:
    /// its kind, its id and the sink.
    fn dead_letter_policies(&self) -> Vec<(&'static str, &str, &str)> {
        let sources = (self.sources.iter())
            .filter_map(|s| Some(("source", s.id.as_str(), s.on_error.dead_letter_sink()?)));
        let operators = (self.operators.iter())
            .filter_map(|o| Some(("operator", o.id.as_str(), o.on_error.dead_letter_sink()?)));
        let sinks = (self.sinks.iter())
            .filter_map(|s| Some(("sink", s.id.as_str(), s.on_error.dead_letter_sink()?)));
        sources.chain(operators).chain(sinks).collect()
    }

    /// Whether `up` is the dead-letter port of a source, operator or sink
    /// whose `on_error` names the sink labelled `entry`.
    fn takes_dead_letters(&self, entry: &str, up: &Upstream) -> bool {
        up.port.as_deref() == Some(DEAD_LETTER_PORT)
            && (self.dead_letter_policies().into_iter())
                .any(|(_, id, sink)| id == up.node && label("sink", sink) == entry)
    }

    /// Checks the wiring: see the invariants of [`Job`].
    pub(super) fn validate_graph(&self) -> Result<(), JobError> {
        if self.sources.is_empty() {
            return Err(self.invalid("job", "no source; add a [[source]] table".into()));
        }
        if self.sinks.is_empty() {
            return Err(self.invalid("job", "no sink; add a [[sink]] table".into()));
        }
        let sources = self.sources.iter().map(|s| ("source", s.id.as_str()));
        let operators = self.operators.iter().map(|o| ("operator", o.id.as_str()));
        let sinks = self.sinks.iter().map(|s| ("sink", s.id.as_str()));
        let all: Vec<(&str, &str)> = sources.chain(operators).chain(sinks).collect();
        let mut kinds: HashMap<&str, &str> = HashMap::new();
        for &(kind, id) in &all {
            if let Some(first) = kinds.insert(id, kind) {
                let message = format!("{first} {id:?} has the same id; ids must be unique");
                return Err(self.invalid(&label(kind, id), message));
            }
        }
        // Upstreams are sources and operators; a sink's only output is its
        // dead letters.
        let known: Vec<&str> = all.iter().filter(|e| e.0 != "sink").map(|e| e.1).collect();
        let edges = self.port_lists().into_iter();
        let edges = edges.flat_map(|(entry, ups)| ups.iter().map(move |up| (entry.clone(), up)));
        for (entry, up) in edges {
            let (node, text) = (up.node.as_str(), up.to_string());
            let message = match kinds.get(node) {
                Some(&"sink") if self.takes_dead_letters(&entry, up) => continue,
                Some(&"sink") => format!(
                    "input {text:?} is a sink, which has no output; use that sink's input instead"
                ),
                Some(&"source") if self.takes_dead_letters(&entry, up) => continue,
                Some(&"source") => match self.source_port_error(node, up) {
                    Some(message) => message,
                    None => continue,
                },
                Some(_) => continue,
                None if up.port.is_some() => format!(
                    "input {text:?}: {node:?} is not a known id (sources and operators: {}); \
                     fix the id",
                    known.join(", ")
                ),
                None => format!(
                    "input {text:?} is not a known id (sources and operators: {}); fix the id",
                    known.join(", ")
                ),
            };
            return Err(self.invalid(&entry, message));
        }
        let ups = self.operator_upstreams();
        let order = kahn(&ups);
        if order.len() < ups.len() {
            let cycle = find_cycle(&ups, &order);
            let ids: Vec<&str> = cycle
                .iter()
                .map(|&i| self.operators[i].id.as_str())
                .collect();
            let message = format!("operators form a cycle {}; break it", ids.join(" -> "));
            return Err(self.invalid(
                &label("operator", ids.first().copied().unwrap_or_default()),
                message,
            ));
        }
        for (kind, id) in all.into_iter().filter(|e| e.0 != "sink") {
            if self.consumers(id).is_empty() {
                let message = format!(
                    "output is not consumed by any operator or sink; add a sink with \
                     input = {id:?} or remove this {kind}"
                );
                return Err(self.invalid(&label(kind, id), message));
            }
        }
        for source in &self.sources {
            let ports = source.connector.output_ports();
            let wired = |port: &String| {
                let up = Upstream {
                    node: source.id.clone(),
                    port: Some(port.clone()),
                };
                self.port_lists().iter().any(|(_, ups)| ups.contains(&up))
            };
            if let Some(port) = ports.iter().find(|p| !wired(p)) {
                let message = format!(
                    "output port {port:?} is not consumed by any operator or sink; wire it \
                     (input = \"{}.{port}\") or remove it from the source's settings",
                    source.id
                );
                return Err(self.invalid(&label("source", &source.id), message));
            }
        }
        Ok(())
    }

    /// Why `up`, naming source `node`, names no output port of it: a port
    /// of a source with one unnamed output, no port of a source with named
    /// ones, or a port it lacks; `None` if it names one.
    fn source_port_error(&self, node: &str, up: &Upstream) -> Option<String> {
        let source = self.sources.iter().find(|s| s.id == node)?;
        let ports = source.connector.output_ports();
        let text = up.to_string();
        match (&up.port, ports.first()) {
            (None, None) => None,
            (Some(_), None) => Some(format!(
                "input {text:?}: source {node:?} has one output and no named ports; write {node:?}"
            )),
            (None, Some(first)) => Some(format!(
                "input {text:?}: source {node:?} has named output ports ({}); name one, as in \"{node}.{first}\"",
                ports.join(", ")
            )),
            (Some(port), Some(_)) if ports.contains(port) => None,
            (Some(port), Some(_)) => Some(format!(
                "input {text:?}: source {node:?} has no output port {port:?} (its ports: {}); name one of those",
                ports.join(", ")
            )),
        }
    }
}

/// Kahn's algorithm over operator indices; each round takes the first ready operator in
/// file order, so the order is deterministic. Shorter than `ups` iff there is a cycle.
fn kahn(ups: &[Vec<usize>]) -> Vec<usize> {
    let mut done = vec![false; ups.len()];
    let mut order = Vec::with_capacity(ups.len());
    while let Some(i) = (0..ups.len()).find(|&i| !done[i] && ups[i].iter().all(|&u| done[u])) {
        done[i] = true;
        order.push(i);
    }
    order
}

/// A cycle among the operators `kahn` left out, in data-flow order, starting and ending at
/// its first-declared operator. Every left-out operator has a left-out upstream, so
/// walking upstream from one of them must revisit an operator: that closes the cycle.
fn find_cycle(ups: &[Vec<usize>], order: &[usize]) -> Vec<usize> {
    let left_out = |i: &usize| !order.contains(i);
    let mut walk: Vec<usize> = (0..ups.len()).find(left_out).into_iter().collect();
    while let Some(&current) = walk.last() {
        let Some(up) = ups[current].iter().copied().find(left_out) else {
            break;
        };
        if let Some(pos) = walk.iter().position(|&w| w == up) {
            // walk[k + 1] feeds walk[k] and walk[pos] feeds `current`: reverse for flow order.
            let mut cycle: Vec<usize> = walk[pos..].iter().rev().copied().collect();
            let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.extend(cycle.first().copied());
            return cycle;
        }
        walk.push(up);
    }
    walk // unreachable for a left-out set built by `kahn`
}
