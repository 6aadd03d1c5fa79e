//! Where a fix run's next attempt goes: a cluster node with room (the least loaded first), else
//! one of this machine's agent slots. A node that is lost is off the run; one that is busy is
//! asked again after a pause; when every node is lost, the attempts run here.

use std::time::{Duration, Instant};

/// Attempts a node is given per attempt it runs at once: one running, one waiting there.
pub const NODE_DEPTH: usize = 2;

/// How long a node that said it is busy is left alone.
pub const BUSY_PAUSE: Duration = Duration::from_secs(2);

/// Where one attempt runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// This machine's agent slot `index`.
    Local(usize),
    /// The cluster node of that name.
    Node(String),
}

#[derive(Debug, Clone)]
struct NodeState {
    name: String,
    capacity: usize,
    busy: usize,
    lost: bool,
    paused_until: Option<Instant>,
}

/// The run's places and what runs where.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Busy flags of this machine's agent slots.
    local: Vec<bool>,
    /// Slots this machine runs while some node can take attempts (0: only nodes).
    local_jobs: usize,
    nodes: Vec<NodeState>,
}

impl Placement {
    /// `local_jobs` agents here, and `nodes` (name, capacity). A node is given twice its
    /// capacity — one attempt running and the next waiting there — so it never waits on this
    /// machine between two. With no node, at least one agent runs here.
    pub fn new(local_jobs: usize, nodes: Vec<(String, usize)>) -> Placement {
        let nodes: Vec<NodeState> = nodes
            .into_iter()
            .filter(|(_, c)| *c > 0)
            .map(|(name, capacity)| NodeState {
                name,
                capacity: capacity * NODE_DEPTH,
                busy: 0,
                lost: false,
                paused_until: None,
            })
            .collect();
        let local_jobs = if nodes.is_empty() {
            local_jobs.max(1)
        } else {
            local_jobs
        };
        Placement {
            local: vec![false; local_jobs.max(1)],
            local_jobs,
            nodes,
        }
    }

    /// Nodes that joined since: added with their capacity (a name already known — up, busy or
    /// lost — is left as it is). Returns the names added.
    pub fn add_nodes(&mut self, nodes: Vec<(String, usize)>) -> Vec<String> {
        let mut added = Vec::new();
        for (name, capacity) in nodes {
            if capacity == 0 || self.nodes.iter().any(|n| n.name == name) {
                continue;
            }
            added.push(name.clone());
            self.nodes.push(NodeState {
                name,
                capacity: capacity * NODE_DEPTH,
                busy: 0,
                lost: false,
                paused_until: None,
            });
        }
        added
    }

    /// Attempts that can run at once while every node is up.
    pub fn capacity(&self) -> usize {
        (self.local_jobs + self.nodes.iter().map(|n| n.capacity).sum::<usize>()).max(1)
    }

    /// The place for the next attempt at `now`, taken (a slot here only with `here`); None
    /// while every such place is busy.
    pub fn take(&mut self, now: Instant, here: bool) -> Option<Place> {
        let node = self
            .nodes
            .iter_mut()
            .filter(|n| !n.lost && n.busy < n.capacity)
            .filter(|n| n.paused_until.is_none_or(|t| t <= now))
            // Least loaded first, by the share of its capacity in use; ties by name.
            .min_by(|a, b| {
                (a.busy * b.capacity)
                    .cmp(&(b.busy * a.capacity))
                    .then_with(|| a.name.cmp(&b.name))
            });
        if let Some(n) = node {
            n.busy += 1;
            n.paused_until = None;
            return Some(Place::Node(n.name.clone()));
        }
        if !here {
            return None;
        }
        // Every node lost: the attempts run here, on one slot at least.
        let here = if self.nodes.iter().all(|n| n.lost) {
            self.local_jobs.max(1)
        } else {
            self.local_jobs
        };
        let index = self.local[..here.min(self.local.len())]
            .iter()
            .position(|b| !b)?;
        self.local[index] = true;
        Some(Place::Local(index))
    }

    /// The attempt at `place` ended (whatever its result).
    pub fn release(&mut self, place: &Place) {
        match place {
            Place::Local(i) => {
                if let Some(b) = self.local.get_mut(*i) {
                    *b = false;
                }
            }
            Place::Node(name) => {
                if let Some(n) = self.nodes.iter_mut().find(|n| &n.name == name) {
                    n.busy = n.busy.saturating_sub(1);
                }
            }
        }
    }

    /// `node` cannot be reached or died: off this run.
    pub fn lose(&mut self, node: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == node) {
            n.lost = true;
        }
    }

    /// `node` refused for now: asked again after [`BUSY_PAUSE`].
    pub fn pause(&mut self, node: &str, now: Instant) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == node) {
            n.paused_until = Some(now + BUSY_PAUSE);
        }
    }

    /// When a paused node may be asked again (the earliest), if one is paused.
    pub fn next_pause_end(&self) -> Option<Instant> {
        self.nodes
            .iter()
            .filter(|n| !n.lost)
            .filter_map(|n| n.paused_until)
            .min()
    }

    /// The local slots a run needs worktrees for.
    pub fn local_slots(&self) -> usize {
        self.local.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_fill_least_loaded_first_then_the_local_slots() {
        let now = Instant::now();
        let mut p = Placement::new(1, vec![("a".into(), 2), ("b".into(), 1)]);
        assert_eq!(p.capacity(), 7, "nodes hold one more attempt each per slot");
        let taken: Vec<Place> = (0..8).filter_map(|_| p.take(now, true)).collect();
        assert_eq!(
            taken,
            vec![
                Place::Node("a".into()),
                Place::Node("b".into()),
                Place::Node("a".into()),
                Place::Node("a".into()),
                Place::Node("b".into()),
                Place::Node("a".into()),
                Place::Local(0),
            ]
        );
        p.release(&Place::Node("b".into()));
        assert_eq!(p.take(now, true), Some(Place::Node("b".into())));
    }

    #[test]
    fn a_busy_node_waits_out_its_pause_and_a_lost_one_is_never_asked_again() {
        let now = Instant::now();
        let mut p = Placement::new(0, vec![("a".into(), 1), ("b".into(), 1)]);
        assert_eq!(p.take(now, true), Some(Place::Node("a".into())));
        p.release(&Place::Node("a".into()));
        p.pause("a", now);
        p.lose("b");
        assert_eq!(
            p.take(now, true),
            None,
            "a is paused, b lost, no local slot"
        );
        assert_eq!(p.next_pause_end(), Some(now + BUSY_PAUSE));
        assert_eq!(
            p.take(now + BUSY_PAUSE, true),
            Some(Place::Node("a".into()))
        );
        // Every node lost: one agent runs here.
        p.lose("a");
        assert_eq!(p.take(now, true), Some(Place::Local(0)));
        assert_eq!(p.take(now, true), None);
    }

    #[test]
    fn a_node_that_joins_takes_attempts_and_a_lost_one_stays_lost() {
        let now = Instant::now();
        let mut p = Placement::new(0, vec![("a".into(), 1)]);
        p.lose("a");
        assert_eq!(
            p.add_nodes(vec![("a".into(), 1), ("b".into(), 1)]),
            vec!["b".to_string()]
        );
        assert_eq!(p.take(now, true), Some(Place::Node("b".into())));
        assert_eq!(p.take(now, true), Some(Place::Node("b".into())));
        assert_eq!(p.take(now, true), None, "b holds two; a stays lost");
    }

    #[test]
    fn without_nodes_one_agent_runs_here_at_least() {
        let mut p = Placement::new(0, Vec::new());
        assert_eq!(p.capacity(), 1);
        assert_eq!(p.take(Instant::now(), true), Some(Place::Local(0)));
    }
}
