//! An in-process network of control planes for tests: calls go straight to the target plane's
//! handler, and any node can be cut off from the others.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::network::{Transport, TransportError};
use crate::plane::ControlPlane;

/// An in-process network of control planes, for tests: calls go straight to the target's
/// handler, and any node can be cut off from the others.
#[derive(Default)]
pub struct MemNet {
    nodes: Mutex<HashMap<String, ControlPlane>>,
    cut: Mutex<BTreeSet<String>>,
}

impl MemNet {
    pub fn new() -> Arc<MemNet> {
        Arc::new(MemNet::default())
    }

    /// The transport a node named `from` uses.
    pub fn transport(self: &Arc<Self>, from: &str) -> Arc<dyn Transport> {
        Arc::new(MemTransport {
            net: self.clone(),
            from: from.to_string(),
        })
    }

    /// Route calls for `plane`'s name to it.
    pub fn register(&self, plane: &ControlPlane) {
        self.lock_nodes()
            .insert(plane.name().to_string(), plane.clone());
    }

    /// Forget a node (it crashed): calls to it fail as unreachable.
    pub fn unregister(&self, name: &str) {
        self.lock_nodes().remove(name);
    }

    /// Cut `name` off: nothing it sends arrives and nothing reaches it.
    pub fn partition(&self, name: &str) {
        self.lock_cut().insert(name.to_string());
    }

    pub fn heal(&self, name: &str) {
        self.lock_cut().remove(name);
    }

    fn lock_nodes(&self) -> std::sync::MutexGuard<'_, HashMap<String, ControlPlane>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_cut(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.cut.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct MemTransport {
    net: Arc<MemNet>,
    from: String,
}

#[async_trait::async_trait]
impl Transport for MemTransport {
    async fn call(
        &self,
        target: &str,
        kind: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let cut_off = {
            let cut = self.net.lock_cut();
            cut.contains(&self.from) || cut.contains(target)
        };
        let plane = self.net.lock_nodes().get(target).cloned();
        let Some(plane) = plane.filter(|_| !cut_off) else {
            return Err(TransportError::Unreachable(target.to_string()));
        };
        match tokio::time::timeout(timeout, plane.answer(kind, &body)).await {
            Ok(r) => r.map_err(TransportError::Failed),
            Err(_) => Err(TransportError::Timeout {
                node: target.to_string(),
                ms: timeout.as_millis() as u64,
            }),
        }
    }
}
