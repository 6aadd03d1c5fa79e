//! `quorum mcp`: the Model Context Protocol on stdio, so a coding agent can start a review
//! (here, or through a node's API with `--cluster`), follow it, fetch its findings and have
//! one explained.
//!
//! stdout carries only JSON-RPC: reviews run in this process with their progress collected
//! here, and nothing they do prints to stdout. Text that comes from the reviewed material
//! (evidence, cited lines) is returned inside `weaver::delimit` markers, as data.
use crate::args::{McpArgs, ReviewArgs};
use crate::local::prepare::{prepare_review, Prepared};
use crate::outcome::write_reports;
use quorum_api::{pb, ApiClient};
use quorum_core::report::Report;
use quorum_core::review::finding::{Finding, Severity};
use quorum_runtime::Progress;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Content, ServerCapabilities, ServerInfo};
use rmcp::schemars::{self, JsonSchema};
use rmcp::{tool, tool_handler, tool_router, ErrorData as McpError, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What this server knows about a review it started.
#[derive(Debug, Default, Clone)]
struct Tracked {
    status: String,
    stage: String,
    tasks_total: usize,
    tasks_done: usize,
    failed_attempts: usize,
    findings_so_far: usize,
    verified: usize,
    tokens_in: u64,
    tokens_out: u64,
    error: Option<String>,
    out_dir: Option<PathBuf>,
    report: Option<Arc<Report>>,
}

impl Tracked {
    fn apply(&mut self, p: &Progress) {
        match p {
            Progress::Stage { stage } => self.stage = stage.clone(),
            Progress::Planned { tasks, .. } => self.tasks_total = *tasks,
            Progress::TaskFinished {
                task, ok, findings, ..
            } if quorum_runtime::obs::role_of(task) == "specialist" => {
                if *ok {
                    self.tasks_done += 1;
                    self.findings_so_far += findings;
                } else {
                    self.failed_attempts += 1;
                }
            }
            Progress::Finding { .. } => self.verified += 1,
            Progress::Usage {
                tokens_in,
                tokens_out,
                ..
            } => {
                self.tokens_in = *tokens_in;
                self.tokens_out = *tokens_out;
            }
            _ => {}
        }
    }

    fn json(&self, flow_id: &str) -> Value {
        json!({
            "flow_id": flow_id,
            "status": self.status,
            "stage": self.stage,
            "tasks_done": self.tasks_done,
            "tasks_total": self.tasks_total,
            "failed_attempts": self.failed_attempts,
            "findings_reported": self.findings_so_far,
            "findings_verified": self.verified,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "error": self.error,
            "out_dir": self.out_dir.as_ref().map(|p| p.display().to_string()),
            "findings": self.report.as_ref().map(|r| r.findings.len()),
            // A conformance review's merge gate and a finish review's rulings, which an agent
            // acts on as much as on the findings.
            "conformance": self.report.as_ref().and_then(|r| r.conformance.as_ref()).map(|c| {
                let (met, unmet, divergent) = c.counts();
                json!({"ready": c.ready, "met": met, "unmet": unmet, "divergent": divergent,
                       "criteria": c.criteria.len()})
            }),
            "adjudication": self
                .report
                .as_ref()
                .and_then(|r| r.adjudication.as_ref())
                .map(|a| json!(a.summary)),
        })
    }
}

#[derive(Clone)]
pub struct QuorumMcp {
    args: Arc<McpArgs>,
    reviews: Arc<Mutex<HashMap<String, Tracked>>>,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StartParams {
    /// The directory to review.
    pub path: String,
    /// Flow name (review, quick, ...) or a flow file; default: the configured flow.
    #[serde(default)]
    pub flow: Option<String>,
    /// Model to run the review with; default: the configured model.
    #[serde(default)]
    pub model: Option<String>,
    /// The acceptance criteria file a `conformance` flow judges the target against (its
    /// merge-readiness is in the report's `conformance`).
    #[serde(default)]
    pub spec: Option<String>,
    /// The report.json of an earlier review that a `finish-review` flow adjudicates.
    #[serde(default)]
    pub prior: Option<String>,
    /// The author's dispositions of the prior findings (YAML or JSON), with `prior`.
    #[serde(default)]
    pub dispositions: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FlowParams {
    /// The review's flow id, as review_start returned it.
    pub flow_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindingsParams {
    pub flow_id: String,
    /// Only findings at or above this severity: P0 (most severe) .. P3.
    #[serde(default)]
    pub min_severity: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExplainParams {
    pub flow_id: String,
    /// A finding id from review_findings, e.g. "F001".
    pub finding_id: String,
}

fn bad(msg: impl std::fmt::Display) -> McpError {
    McpError::invalid_params(msg.to_string(), None)
}

fn failed(msg: impl std::fmt::Display) -> McpError {
    McpError::internal_error(msg.to_string(), None)
}

fn text(v: Value) -> CallToolResult {
    CallToolResult::success(vec![Content::text(
        serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string()),
    )])
}

fn severity(s: &str) -> Result<Severity, McpError> {
    match s.trim().to_ascii_uppercase().as_str() {
        "P0" => Ok(Severity::P0),
        "P1" => Ok(Severity::P1),
        "P2" => Ok(Severity::P2),
        "P3" => Ok(Severity::P3),
        other => Err(bad(format!(
            "invalid min_severity {other:?}: use P0, P1, P2 or P3"
        ))),
    }
}

fn lines_of(f: &Finding) -> String {
    match (f.line_start, f.line_end) {
        (Some(a), Some(b)) if b != a => format!("{a}-{b}"),
        (Some(a), _) => a.to_string(),
        _ => String::new(),
    }
}

fn finding_summary(f: &Finding) -> Value {
    json!({
        "id": f.id,
        "severity": format!("{:?}", f.severity),
        "title": f.title,
        "category": f.category,
        "file": f.file,
        "lines": lines_of(f),
        "confidence": f.confidence,
        "verdict": format!("{:?}", f.verdict).to_lowercase(),
    })
}

impl QuorumMcp {
    fn new(args: McpArgs) -> Self {
        QuorumMcp {
            args: Arc::new(args),
            reviews: Arc::new(Mutex::new(HashMap::new())),
            tool_router: Self::tool_router(),
        }
    }

    fn token(&self) -> Result<String, McpError> {
        quorum_api::load_token("QUORUM_API_TOKEN", self.args.token_file.as_deref())
            .map_err(|e| bad(e.to_string()))
    }

    async fn client(&self) -> Result<ApiClient, McpError> {
        let token = self.token()?;
        crate::client::connect_any(&self.args.cluster, &token)
            .await
            .map(|(c, _)| c)
            .map_err(|e| failed(format!("{e:#}")))
    }

    fn update(&self, flow_id: &str, f: impl FnOnce(&mut Tracked)) {
        if let Ok(mut m) = self.reviews.lock() {
            if let Some(t) = m.get_mut(flow_id) {
                f(t);
            }
        }
    }

    fn tracked(&self, flow_id: &str) -> Option<Tracked> {
        self.reviews.lock().ok()?.get(flow_id).cloned()
    }

    async fn start_local(&self, p: StartParams) -> Result<String, McpError> {
        let mut backend = self.args.backend.clone();
        if let Some(m) = p.model.filter(|m| !m.trim().is_empty()) {
            backend.model = Some(m);
        }
        let args = ReviewArgs {
            improving: false,
            path: PathBuf::from(&p.path),
            backend,
            flow: p.flow,
            out: None,
            format: None,
            fail_on: None,
            fail_on_unverified: false,
            verifier_model: None,
            max_concurrent: None,
            verifiers: None,
            verify_threshold: None,
            coverage: None,
            personas: None,
            cluster: Vec::new(),
            token_file: None,
            resume: false,
            sensitive: false,
            quiet: true,
            diff: None,
            profile: None,
            apply_safe_fixes: None,
            spec: p.spec.map(PathBuf::from),
            prior: p.prior.map(PathBuf::from),
            dispositions: p.dispositions.map(PathBuf::from),
            no_analyzers: false,
            no_memory: false,
            events: None,
            incremental: false,
            no_cache: false,
            explain_cache: false,
            since: None,
        };
        let local = match prepare_review(&args)
            .await
            .map_err(|e| bad(format!("{e:#}")))?
        {
            Prepared::Run(l) => l,
            Prepared::Resume(_) => return Err(failed("internal: a resume was chosen unasked")),
        };
        let flow_id = local.ctx.flow_id.clone();
        let (out, formats) = local.outputs();
        let (out, formats) = (out.to_path_buf(), formats.to_vec());
        if let Ok(mut m) = self.reviews.lock() {
            m.insert(
                flow_id.clone(),
                Tracked {
                    status: "running".into(),
                    out_dir: Some(out.clone()),
                    ..Default::default()
                },
            );
        }
        let me = self.clone();
        let id = flow_id.clone();
        tokio::spawn(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
            let pump = {
                let me = me.clone();
                let id = id.clone();
                tokio::spawn(async move {
                    while let Some(p) = rx.recv().await {
                        me.update(&id, |t| t.apply(&p));
                    }
                })
            };
            let result = quorum_runtime::run_review_from(local.ctx, Some(tx), None).await;
            let _ = pump.await;
            match result {
                Ok(report) => {
                    let written = write_reports(&report, &out, &formats);
                    let status = format!("{:?}", report.status).to_lowercase();
                    me.update(&id, |t| {
                        t.status = status;
                        if let Err(e) = written {
                            t.error = Some(format!("reports not written: {e:#}"));
                        }
                        t.report = Some(Arc::new(report));
                    });
                }
                Err(e) => me.update(&id, |t| {
                    t.status = "failed".into();
                    t.error = Some(e.to_string());
                }),
            }
        });
        Ok(flow_id)
    }

    async fn start_remote(&self, p: StartParams) -> Result<String, McpError> {
        let settings = crate::setup::load_settings(self.args.backend.common.config.as_deref())
            .map_err(|e| bad(format!("{e:#}")))?;
        let root = PathBuf::from(&p.path)
            .canonicalize()
            .map_err(|e| bad(format!("cannot resolve {}: {e}", p.path)))?;
        if !root.is_dir() {
            return Err(bad(format!("{} is not a directory", root.display())));
        }
        // As `quorum review --cluster` does: the repository's excludes, guidance and profile.
        let (pack, scope) = crate::target::snapshot(&root, &settings, None, None)
            .map_err(|e| bad(format!("{e:#}")))?;
        let client_scope = quorum_core::scope::ClientScope::of(&scope);
        let scope_json = (!client_scope.is_default())
            .then(|| serde_json::to_string(&client_scope).unwrap_or_default());
        let (spec, prior) = crate::client::review_inputs(
            p.spec.as_deref().map(std::path::Path::new),
            p.prior.as_deref().map(std::path::Path::new),
            p.dispositions.as_deref().map(std::path::Path::new),
            &root,
            &pack,
        )
        .map_err(|e| bad(format!("{e:#}")))?;
        let req = pb::SubmitReviewRequest {
            target_name: root.display().to_string(),
            head_sha: pack.head_sha.clone(),
            files: crate::client::source_files(&pack),
            spec,
            prior,
            scope_json,
            flow: p.flow.unwrap_or_default(),
            flow_yaml: None,
            options: Some(pb::ReviewOptions {
                model: p
                    .model
                    .or_else(|| self.args.backend.model.clone())
                    .unwrap_or_default(),
                ..Default::default()
            }),
        };
        let client = self.client().await?;
        let flow_id = client
            .submit(req)
            .await
            .map_err(|e| failed(format!("the cluster refused the review: {e}")))?;
        if let Ok(mut m) = self.reviews.lock() {
            m.insert(
                flow_id.clone(),
                Tracked {
                    status: "running".into(),
                    ..Default::default()
                },
            );
        }
        let me = self.clone();
        let id = flow_id.clone();
        // Followed across nodes like `review --cluster`: a node that goes silent or dies is
        // left for another that holds the review's facts.
        let learned = crate::client::other_api_urls(&client, &self.args.cluster).await;
        let token = self.token()?;
        let urls = self.args.cluster.clone();
        tokio::spawn(async move {
            let note = id.clone();
            let say: Box<dyn Fn(String) + Send + Sync> =
                Box::new(move |line| tracing::warn!(flow_id = %note, "{line}"));
            let mut follower =
                crate::client::Follower::new(client, &urls, learned, &token, &id, false, say);
            loop {
                match follower.next().await {
                    Ok(Some(p)) => me.update(&id, |t| t.apply(&p)),
                    Ok(None) => break,
                    Err(e) => {
                        me.update(&id, |t| t.error = Some(format!("cannot follow: {e:#}")));
                        return;
                    }
                }
            }
            let client = follower.client().clone();
            match client.report(&id).await {
                Ok(r) => match serde_json::from_str::<Report>(&r.report_json) {
                    Ok(report) => me.update(&id, |t| {
                        t.status = r.status.clone();
                        t.report = Some(Arc::new(report));
                    }),
                    Err(e) => me.update(&id, |t| t.error = Some(format!("unreadable report: {e}"))),
                },
                Err(e) => me.update(&id, |t| t.error = Some(format!("no report yet: {e}"))),
            }
        });
        Ok(flow_id)
    }

    /// The finished review's report: from this server's memory, the local store, or the node.
    async fn report(&self, flow_id: &str) -> Result<Arc<Report>, McpError> {
        if let Some(t) = self.tracked(flow_id) {
            if let Some(r) = t.report {
                return Ok(r);
            }
            if t.status == "running" {
                return Err(bad(format!(
                    "review {flow_id} is still running ({}); ask review_status and try again when it has ended",
                    if t.stage.is_empty() { "starting" } else { &t.stage }
                )));
            }
        }
        if !self.args.cluster.is_empty() {
            let r = self
                .client()
                .await?
                .report(flow_id)
                .await
                .map_err(|e| bad(format!("no report for {flow_id}: {e}")))?;
            return serde_json::from_str(&r.report_json)
                .map(Arc::new)
                .map_err(|e| failed(format!("unreadable report: {e}")));
        }
        let settings = crate::setup::load_settings(self.args.backend.common.config.as_deref())
            .map_err(|e| bad(format!("{e:#}")))?;
        let data = crate::setup::data_dir(&self.args.backend.common, &settings);
        let store = data
            .open_flow(flow_id)
            .map_err(|e| bad(format!("no review {flow_id}: {e}")))?;
        let json = store
            .report()
            .map_err(|e| failed(e.to_string()))?
            .ok_or_else(|| {
                bad(format!(
                    "review {flow_id} has no report (running or interrupted)"
                ))
            })?;
        serde_json::from_str(&json)
            .map(Arc::new)
            .map_err(|e| failed(format!("unreadable report: {e}")))
    }
}

#[tool_router]
impl QuorumMcp {
    #[tool(
        description = "Start a quorum review of a directory (a team of LLM specialists, every finding verified against the source). Returns the flow_id to follow with review_status."
    )]
    async fn review_start(
        &self,
        Parameters(p): Parameters<StartParams>,
    ) -> Result<CallToolResult, McpError> {
        let flow_id = if self.args.cluster.is_empty() {
            self.start_local(p).await?
        } else {
            self.start_remote(p).await?
        };
        Ok(text(json!({ "flow_id": flow_id, "status": "running" })))
    }

    #[tool(
        description = "Where a review stands: status (running, completed, partial, failed), current stage, tasks done/total, findings so far, tokens."
    )]
    async fn review_status(
        &self,
        Parameters(p): Parameters<FlowParams>,
    ) -> Result<CallToolResult, McpError> {
        if let Some(t) = self.tracked(&p.flow_id) {
            return Ok(text(t.json(&p.flow_id)));
        }
        // Not started by this server: what the store or the node says.
        if !self.args.cluster.is_empty() {
            let list = self
                .client()
                .await?
                .list()
                .await
                .map_err(|e| failed(e.to_string()))?;
            let r = list
                .into_iter()
                .find(|r| r.flow_id == p.flow_id)
                .ok_or_else(|| bad(format!("no review {} on the cluster", p.flow_id)))?;
            return Ok(text(json!({
                "flow_id": r.flow_id, "status": r.status, "findings": r.findings, "target": r.target,
            })));
        }
        let settings = crate::setup::load_settings(self.args.backend.common.config.as_deref())
            .map_err(|e| bad(format!("{e:#}")))?;
        let data = crate::setup::data_dir(&self.args.backend.common, &settings);
        let list = data.list_flows().map_err(|e| failed(e.to_string()))?;
        let s = list
            .into_iter()
            .find(|s| s.flow_id == p.flow_id)
            .ok_or_else(|| {
                bad(format!(
                    "no review {} in {}",
                    p.flow_id,
                    data.root().display()
                ))
            })?;
        Ok(text(json!({
            "flow_id": s.flow_id, "status": s.status.to_string(), "findings": s.findings, "target": s.target_path,
        })))
    }

    #[tool(
        description = "The verified findings of a finished review, most severe first; min_severity (P0..P3) keeps only those at or above it."
    )]
    async fn review_findings(
        &self,
        Parameters(p): Parameters<FindingsParams>,
    ) -> Result<CallToolResult, McpError> {
        let floor = p.min_severity.as_deref().map(severity).transpose()?;
        let report = self.report(&p.flow_id).await?;
        let findings: Vec<Value> = report
            .findings
            .iter()
            .filter(|f| floor.is_none_or(|s| f.severity <= s))
            .map(finding_summary)
            .collect();
        Ok(text(json!({
            "flow_id": p.flow_id,
            "status": format!("{:?}", report.status).to_lowercase(),
            "summary": report.summary,
            "findings": findings,
        })))
    }

    #[tool(
        description = "Explain one finding: why it matters, the suggested fix, who reported it, the verifier's verdict, and the cited lines of the file."
    )]
    async fn finding_explain(
        &self,
        Parameters(p): Parameters<ExplainParams>,
    ) -> Result<CallToolResult, McpError> {
        let report = self.report(&p.flow_id).await?;
        let f = report
            .findings
            .iter()
            .chain(report.residual_concerns.iter())
            .find(|f| f.id.eq_ignore_ascii_case(&p.finding_id))
            .ok_or_else(|| {
                bad(format!(
                    "no finding {} in review {}; ids are listed by review_findings",
                    p.finding_id, p.flow_id
                ))
            })?;
        let cited = match (&f.file, f.line_start) {
            (Some(file), Some(start)) => {
                let end = f.line_end.unwrap_or(start).max(start);
                let path = std::path::Path::new(&report.target.path).join(file);
                std::fs::read_to_string(&path).ok().map(|text| {
                    let lines: Vec<String> = text
                        .lines()
                        .enumerate()
                        .skip(start.saturating_sub(1) as usize)
                        .take((end - start + 1) as usize)
                        .map(|(i, l)| format!("{:>5} | {l}", i + 1))
                        .collect();
                    quorum_core::weaver::delimit(
                        &format!("{file}:{}", lines_of(f)),
                        &lines.join("\n"),
                    )
                })
            }
            _ => None,
        };
        let mut v = finding_summary(f);
        if let Some(o) = v.as_object_mut() {
            o.insert("symbol".into(), json!(f.symbol));
            o.insert("why_it_matters".into(), json!(f.why_it_matters));
            o.insert("suggested_fix".into(), json!(f.suggested_fix));
            o.insert(
                "evidence".into(),
                json!(quorum_core::weaver::delimit("evidence", &f.evidence)),
            );
            o.insert(
                "reporters".into(),
                json!(f
                    .reporters
                    .iter()
                    .map(|r| json!({"persona": r.persona, "model": r.model, "node": r.node}))
                    .collect::<Vec<_>>()),
            );
            o.insert("promoted_by_corroboration".into(), json!(f.promoted));
            o.insert("cited_lines".into(), json!(cited));
        }
        Ok(text(v))
    }
}

#[tool_handler]
impl rmcp::ServerHandler for QuorumMcp {
    fn get_info(&self) -> ServerInfo {
        ServerInfo {
            instructions: Some(
                "quorum reviews a directory with a team of LLM specialists and verifies every finding against the source. Start with review_start, poll review_status until the status is not running, then review_findings and finding_explain.".into(),
            ),
            capabilities: ServerCapabilities::builder().enable_tools().build(),
            server_info: rmcp::model::Implementation {
                name: "quorum".into(),
                title: Some("quorum review".into()),
                version: env!("CARGO_PKG_VERSION").into(),
                icons: None,
                website_url: None,
            },
            ..Default::default()
        }
    }
}

/// `quorum mcp`: serve until the client closes stdin.
pub async fn serve(args: McpArgs) -> anyhow::Result<crate::exit::ExitCode> {
    if !args.cluster.is_empty() {
        let settings = crate::setup::load_settings(args.backend.common.config.as_deref())?;
        crate::client::set_api_keepalive(settings.api.keepalive());
    }
    let service = QuorumMcp::new(args)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("cannot start the MCP server on stdio: {e}"))?;
    service
        .waiting()
        .await
        .map_err(|e| anyhow::anyhow!("the MCP session ended with an error: {e}"))?;
    Ok(crate::exit::ExitCode::Clean)
}
