//! The trait a node implements to answer the API, and the adapter that exposes it as the
//! generated tonic `Quorum` service.
//!
//! The adapter validates what can be validated without the runtime (a flow id is present), maps
//! every [`ApiError`] to a status in one place, and guarantees that a watch stream ends after the
//! `finished` event even if the implementation's stream would go on.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures_core::Stream;
use tonic::{Request, Response, Status};

use crate::error::ApiError;
use crate::pb;

/// The `kind` of the last event of every review; a watch stream ends after it.
pub const FINISHED_KIND: &str = "finished";

/// A review's progress events, in order.
pub type EventStream = Pin<Box<dyn Stream<Item = pb::ReviewEvent> + Send + 'static>>;

/// What a node does for each API method. Errors map to status codes as documented on
/// [`ApiError`]; in particular `report` returns [`ApiError::Running`] while the review is running.
#[async_trait]
pub trait ReviewApi: Send + Sync + 'static {
    /// Starts a review of the uploaded pack and returns its flow id.
    async fn submit(&self, req: pb::SubmitReviewRequest) -> Result<String, ApiError>;
    /// The review's events from the first one; the stream should end after the `finished` event.
    async fn watch(&self, flow_id: &str) -> Result<EventStream, ApiError>;
    /// The report of a review that has ended.
    async fn report(&self, flow_id: &str) -> Result<pb::GetReportResponse, ApiError>;
    /// Cancels a review; `false` when it had already ended.
    async fn cancel(&self, flow_id: &str) -> Result<bool, ApiError>;
    /// The reviews this node knows about.
    async fn list(&self) -> Result<Vec<pb::ReviewSummary>, ApiError>;
    /// Every node this node knows about, itself included, with its models and load.
    async fn cluster_status(&self) -> Result<Vec<pb::NodeStatus>, ApiError>;
    /// This node's name, as its entry in [`ReviewApi::cluster_status`] gives it: a client
    /// checks with it that the URL it dialled reached the node it meant.
    fn node_name(&self) -> String;
    /// Changes the control plane's voters and returns the voters after the change. A node
    /// without a control plane refuses.
    async fn change_voters(
        &self,
        _add: Vec<String>,
        _remove: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        Err(ApiError::Unavailable(
            "this node runs no control plane (start the nodes with --voters)".into(),
        ))
    }
    /// Runs one fix attempt with this node's model (see `RunFixAttempt` in the proto). A node
    /// that runs none refuses.
    async fn fix_attempt(
        &self,
        _req: pb::FixAttemptRequest,
    ) -> Result<pb::FixAttemptResponse, ApiError> {
        Err(ApiError::Unavailable(
            "this node runs no fix attempts".into(),
        ))
    }
}

/// The generated service's face over a [`ReviewApi`].
pub(crate) struct QuorumService {
    api: Arc<dyn ReviewApi>,
}

impl QuorumService {
    pub(crate) fn new(api: Arc<dyn ReviewApi>) -> Self {
        QuorumService { api }
    }
}

fn to_status(method: &str, err: ApiError) -> Status {
    if let ApiError::Internal(message) = &err {
        tracing::warn!(method, error = %message, "api call failed");
    } else {
        tracing::debug!(method, error = %err, "api call refused");
    }
    err.into()
}

fn require_flow_id(flow_id: &str) -> Result<(), ApiError> {
    if flow_id.trim().is_empty() {
        return Err(ApiError::InvalidArgument("flow_id is empty".into()));
    }
    Ok(())
}

#[tonic::async_trait]
impl pb::quorum_server::Quorum for QuorumService {
    async fn submit_review(
        &self,
        request: Request<pb::SubmitReviewRequest>,
    ) -> Result<Response<pb::SubmitReviewResponse>, Status> {
        let flow_id = self
            .api
            .submit(request.into_inner())
            .await
            .map_err(|e| to_status("submit_review", e))?;
        Ok(Response::new(pb::SubmitReviewResponse { flow_id }))
    }

    type WatchReviewStream = UntilFinished;

    async fn watch_review(
        &self,
        request: Request<pb::WatchReviewRequest>,
    ) -> Result<Response<Self::WatchReviewStream>, Status> {
        let flow_id = request.into_inner().flow_id;
        require_flow_id(&flow_id).map_err(|e| to_status("watch_review", e))?;
        let events = self
            .api
            .watch(&flow_id)
            .await
            .map_err(|e| to_status("watch_review", e))?;
        Ok(Response::new(UntilFinished {
            events,
            done: false,
        }))
    }

    async fn get_report(
        &self,
        request: Request<pb::GetReportRequest>,
    ) -> Result<Response<pb::GetReportResponse>, Status> {
        let flow_id = request.into_inner().flow_id;
        require_flow_id(&flow_id).map_err(|e| to_status("get_report", e))?;
        let report = self
            .api
            .report(&flow_id)
            .await
            .map_err(|e| to_status("get_report", e))?;
        Ok(Response::new(report))
    }

    async fn cancel_review(
        &self,
        request: Request<pb::CancelReviewRequest>,
    ) -> Result<Response<pb::CancelReviewResponse>, Status> {
        let flow_id = request.into_inner().flow_id;
        require_flow_id(&flow_id).map_err(|e| to_status("cancel_review", e))?;
        let cancelled = self
            .api
            .cancel(&flow_id)
            .await
            .map_err(|e| to_status("cancel_review", e))?;
        Ok(Response::new(pb::CancelReviewResponse { cancelled }))
    }

    async fn list_reviews(
        &self,
        _request: Request<pb::ListReviewsRequest>,
    ) -> Result<Response<pb::ListReviewsResponse>, Status> {
        let reviews = self
            .api
            .list()
            .await
            .map_err(|e| to_status("list_reviews", e))?;
        Ok(Response::new(pb::ListReviewsResponse { reviews }))
    }

    async fn cluster_status(
        &self,
        _request: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        let nodes = self
            .api
            .cluster_status()
            .await
            .map_err(|e| to_status("cluster_status", e))?;
        Ok(Response::new(pb::ClusterStatusResponse {
            nodes,
            answered_by: self.api.node_name(),
        }))
    }

    async fn change_voters(
        &self,
        request: Request<pb::ChangeVotersRequest>,
    ) -> Result<Response<pb::ChangeVotersResponse>, Status> {
        let req = request.into_inner();
        if req.add.is_empty() && req.remove.is_empty() {
            return Err(to_status(
                "change_voters",
                ApiError::InvalidArgument("name a voter to add or remove".into()),
            ));
        }
        let voters = self
            .api
            .change_voters(req.add, req.remove)
            .await
            .map_err(|e| to_status("change_voters", e))?;
        Ok(Response::new(pb::ChangeVotersResponse { voters }))
    }

    async fn run_fix_attempt(
        &self,
        request: Request<pb::FixAttemptRequest>,
    ) -> Result<Response<pb::FixAttemptResponse>, Status> {
        let req = request.into_inner();
        if req.attempt_json.trim().is_empty() {
            return Err(to_status(
                "run_fix_attempt",
                ApiError::InvalidArgument("attempt_json is empty".into()),
            ));
        }
        let response = self
            .api
            .fix_attempt(req)
            .await
            .map_err(|e| to_status("run_fix_attempt", e))?;
        Ok(Response::new(response))
    }
}

/// Forwards events and stops after the first `finished` one, so a client can rely on the
/// stream ending even if an implementation's event source stays open.
pub(crate) struct UntilFinished {
    events: EventStream,
    done: bool,
}

impl Stream for UntilFinished {
    type Item = Result<pb::ReviewEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.events.as_mut().poll_next(cx) {
            Poll::Ready(Some(event)) => {
                if event.kind == FINISHED_KIND {
                    self.done = true;
                }
                Poll::Ready(Some(Ok(event)))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
