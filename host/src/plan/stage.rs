//! The cut of a plan into stages and tasks ([`Plan::stages`]), the units
//! worker mode distributes (docs/scale-out.md, "Units of work").
//!
//! A **stage** is a part of the job's DAG between stage boundaries (edges
//! whose [`Exchange`](super::Exchange) cuts stages; Kafka Streams'
//! sub-topology): two nodes are in one stage when a path of other edges,
//! in either direction, joins them. A **task** is one unit of a stage that
//! runs on its own, `(stage, p)`: a set of instances of the stage's nodes
//! that channels join to each other and to no other instance of the stage.
//!
//! Every edge is hash-partitioned, so each stage is one task holding
//! every instance of its nodes, and one attempt (`run/attempt.rs`) runs
//! every stage of a job in one process (a repartition edge as a local
//! one). Worker mode cuts a job file at its repartition edges with
//! [`stage_members`] and runs each stage on each partition of its anchor
//! topic as a task of its own (`cluster/worker_job.rs`).
//!
//! Invariants:
//! - Every node is in exactly one stage and every instance in exactly one
//!   task of its node's stage.
//! - Stages are numbered by their smallest node id, tasks within a stage
//!   by their smallest instance id; both list their members in id order.

use super::graph::Plan;
use super::ids::{InstanceId, NodeId, StageId, TaskId};

/// A stage: nodes that checkpoint together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// The stage's id.
    pub id: StageId,
    /// Its nodes, by id.
    pub nodes: Vec<NodeId>,
    /// Its tasks, by index.
    pub tasks: Vec<Task>,
}

/// A task: instances of one stage that exchange records only with each
/// other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The task's id.
    pub id: TaskId,
    /// Its instances, by id.
    pub instances: Vec<InstanceId>,
}

impl<P> Plan<'_, P> {
    /// The plan cut into stages, each into tasks.
    pub fn stages(&self) -> Vec<Stage> {
        let joined = (self.edges().iter())
            .filter(|e| !e.exchange().cuts_stages())
            .map(|e| (e.from().node.index(), e.to().node.index()));
        let groups = stage_members(self.nodes().len(), joined);
        let instances = self.instance_sets();
        (0u32..)
            .zip(groups)
            .map(|(s, members)| {
                let id = StageId(s);
                let members: Vec<NodeId> =
                    members.into_iter().map(|i| self.nodes()[i].id()).collect();
                let tasks = self.tasks(id, &members, &instances);
                Stage {
                    id,
                    nodes: members,
                    tasks,
                }
            })
            .collect()
    }

    /// Every instance, with the sets channels join them into (indexed as
    /// `Plan::instances` lists them).
    fn instance_sets(&self) -> (Vec<InstanceId>, Sets) {
        let all: Vec<InstanceId> = self.instances().collect();
        let position = |id: InstanceId| all.binary_search(&id).expect("an instance of the plan");
        let mut sets = Sets::new(all.len());
        for e in self.edges().iter().filter(|e| !e.exchange().cuts_stages()) {
            let (from, to) = (self.node(e.from().node), self.node(e.to().node));
            for a in from.instances() {
                for b in to.instances() {
                    if e.partitioning().connects(a.index, b.index) {
                        sets.join(position(a), position(b));
                    }
                }
            }
        }
        (all, sets)
    }

    /// The tasks of stage `stage`, made of `members`.
    fn tasks(
        &self,
        stage: StageId,
        members: &[NodeId],
        instances: &(Vec<InstanceId>, Sets),
    ) -> Vec<Task> {
        let (all, sets) = instances;
        let groups = sets.groups().into_iter();
        let ours = groups.filter(|g| members.contains(&all[g[0]].node));
        (0u32..)
            .zip(ours)
            .map(|(index, group)| Task {
                id: TaskId { stage, index },
                instances: group.into_iter().map(|i| all[i]).collect(),
            })
            .collect()
    }
}

/// The stages of `n` nodes, as node indices: the connected groups of the
/// pairs `joined` (the edges that do not cut stages), each sorted,
/// ordered by their smallest member. The one cut of [`Plan::stages`], also
/// run over a job file's ids where no plugin is loaded (worker mode).
pub fn stage_members(
    n: usize,
    joined: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<Vec<usize>> {
    let mut sets = Sets::new(n);
    for (a, b) in joined {
        sets.join(a, b);
    }
    sets.groups()
}

/// Disjoint sets over `0..n` (union-find with path halving).
struct Sets {
    parent: Vec<usize>,
}

impl Sets {
    fn new(n: usize) -> Self {
        Sets {
            parent: (0..n).collect(),
        }
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// Puts `a` and `b` in one set.
    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        self.parent[a.max(b)] = a.min(b);
    }

    /// The sets, each sorted, ordered by their smallest member.
    fn groups(&self) -> Vec<Vec<usize>> {
        let mut sets = Sets {
            parent: self.parent.clone(),
        };
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut index_of_root = vec![usize::MAX; self.parent.len()];
        for i in 0..self.parent.len() {
            let r = sets.root(i);
            if index_of_root[r] == usize::MAX {
                index_of_root[r] = groups.len();
                groups.push(Vec::new());
            }
            groups[index_of_root[r]].push(i);
        }
        groups
    }
}
