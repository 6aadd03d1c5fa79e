//! The command line as clap reads it: every command, subcommand and flag of `quorum`, and
//! nothing else. Each command's file under `commands/` takes its arguments from here; `main`
//! parses them and dispatches.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "quorum",
    version,
    about = "Review a body of work with a team of verified LLM specialists"
)]
pub struct Cli {
    /// Log format for RUST_LOG-controlled logs on stderr.
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// CA (PEM) that signed the API server's certificate, for --cluster https://... (default:
    /// the public web roots).
    #[arg(long, global = true, env = "QUORUM_API_CA")]
    pub ca: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Review PATH on this machine and write the reports (report.md, .json, .sarif, ...).
    Review(ReviewArgs),
    /// Show what a review of PATH would read and leave out, without calling any model.
    Pack(PackArgs),
    /// Continue an interrupted review; completed tasks are never re-run.
    Resume(ResumeArgs),
    /// Fix a review's findings in a private worktree; keep only fixes the tests, the analyzers
    /// and a blind verifier accept (a branch quorum/fix-<id>, fixes.patch, fix-report.md/.json).
    Fix(FixArgs),
    /// Build toward a spec's acceptance criteria: a fresh builder per increment, each kept
    /// only when the tests pass and the conformance judge finds more criteria met (a branch
    /// quorum/build-<id>, build.patch, build-report.md/.json).
    Build(BuildArgs),
    /// Run a long-lived node: the review service behind the gRPC API.
    Node(NodeArgs),
    /// Serve the Model Context Protocol on stdio: tools to start, follow and read reviews.
    Mcp(McpArgs),
    /// Inspect and prune stored reviews.
    Flows {
        #[command(subcommand)]
        command: FlowsCommand,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// The cluster as a node sees it.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Export recorded model conversations.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Browse and validate the persona catalog.
    Personas {
        #[command(subcommand)]
        command: PersonasCommand,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Model cards as this node sees them.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Measure the reviewer itself.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Review a corpus and score the findings: against an answer key (recall, precision, F1,
    /// what grounding and the verifier removed; build corpora with tests/corpora/build.sh), or
    /// with --expected against an external benchmark's labels (recall, false-positive rate,
    /// precision and Youden's index per file and class, for quorum and its analyzers alone).
    Quality(QualityArgs),
}

#[derive(Subcommand, Debug)]
pub enum FlowsCommand {
    /// Stored reviews, newest first, with their derived status.
    List,
    /// One review: what it was started with, its tasks and events.
    Show {
        flow_id: String,
        /// Follow a running review until it ends, then show it.
        #[arg(long)]
        watch: bool,
        /// Follow it on a cluster through a node's API (http://host:port[,…]); needs --watch.
        #[arg(long, value_delimiter = ',', requires = "watch")]
        cluster: Vec<String>,
        /// File holding the API bearer token for --cluster (QUORUM_API_TOKEN wins when set).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// With --cluster: write each progress event followed to FILE, one JSON object per
        /// line, as `review --events` does.
        #[arg(long, value_name = "FILE", requires = "cluster")]
        events: Option<PathBuf>,
    },
    /// Delete finished and interrupted reviews older than DAYS (never running ones).
    Gc {
        #[arg(long, value_name = "DAYS")]
        older_than: u64,
    },
    /// Stop a review: its live attempts stop, it ends partial and says it was cancelled.
    Cancel {
        flow_id: String,
        /// Cancel on a running cluster through its API (http(s)://host:port[,…]) instead of locally.
        #[arg(long, value_delimiter = ',')]
        cluster: Vec<String>,
        /// File holding the API bearer token for --cluster (QUORUM_API_TOKEN wins when set).
        #[arg(long)]
        token_file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Every node: state, role, capacity, load, models, and the reviews it conducts.
    Status {
        /// A node's API (http(s)://host:port[,…]); the first that answers is asked.
        #[arg(long, value_delimiter = ',', required = true)]
        cluster: Vec<String>,
        /// text | json
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
        /// File holding the API bearer token (QUORUM_API_TOKEN wins when set).
        #[arg(long)]
        token_file: Option<PathBuf>,
    },
    /// Change the control plane's voters online (Raft joint consensus on the leader): a new
    /// voter is caught up as a learner first, a removed one stays a learner; 3 or 5 voters.
    Voters {
        #[command(subcommand)]
        change: VotersCommand,
    },
    /// Create a cluster CA in DIR (ca.pem, ca.key): it signs every node's certificate.
    InitCa { dir: PathBuf },
    /// Issue NAME.pem and NAME.key for node NAME, signed by the CA in --ca DIR. The node name
    /// is the certificate's subject and DNS name: peers accept frames only in that name.
    IssueCert {
        name: String,
        /// The directory `init-ca` wrote.
        #[arg(long)]
        ca: PathBuf,
        /// Extra host names or IP addresses peers dial this node by (repeatable).
        #[arg(long)]
        host: Vec<String>,
        /// Where to write NAME.pem and NAME.key (default: the CA directory).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum VotersCommand {
    /// Make members voters (from 3 voters to 5 takes two at once).
    Add {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        api: ClusterApiArgs,
    },
    /// Stop voters voting (from 5 to 3 takes two at once); they stay members.
    Remove {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        api: ClusterApiArgs,
    },
    /// Replace voter OLD by member NEW in one change (a machine retired, or lost for good).
    Replace {
        #[arg(value_name = "OLD=NEW")]
        pair: String,
        #[command(flatten)]
        api: ClusterApiArgs,
    },
}

/// Which cluster to ask, and its token.
#[derive(clap::Args, Debug)]
pub struct ClusterApiArgs {
    /// A node's API (http(s)://host:port[,…]); the first that answers is asked.
    #[arg(long, value_delimiter = ',', required = true)]
    pub cluster: Vec<String>,
    /// File holding the API bearer token (QUORUM_API_TOKEN wins when set).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Write every task attempt's conversation as Hermes-format JSONL.
    Export {
        flow_id: String,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Cluster address to listen on for peer nodes (host:port).
    #[arg(long)]
    pub listen: Option<String>,
    /// A peer's cluster address to join (repeatable).
    #[arg(long)]
    pub join: Vec<String>,
    /// Serve the gRPC API here (host:port); requires QUORUM_API_TOKEN or --token-file.
    #[arg(long)]
    pub api: Option<String>,
    /// Serve the live dashboard and Prometheus /metrics here (host:port), behind the API's
    /// token (open it as http://HOST:PORT/?token=...).
    #[arg(long, requires = "api")]
    pub http: Option<String>,
    /// This node's name (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// File holding the API bearer token (QUORUM_API_TOKEN wins when set).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// File holding the cluster cookie (QUORUM_COOKIE wins when set).
    #[arg(long)]
    pub cookie_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without TLS.
    #[arg(long)]
    pub insecure: bool,
    /// This node's certificate (PEM) for cluster links, naming this node (`quorum cluster
    /// issue-cert NAME`): links are mutual TLS, and a peer counts only as the node its
    /// certificate names.
    #[arg(long, requires = "tls_key", requires = "tls_ca")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for cluster links.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The cluster CA (PEM) every node's certificate must chain to (`quorum cluster init-ca`).
    #[arg(long, requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// TLS certificate (PEM) for the API: clients then use --cluster https://... (with --ca).
    #[arg(long, requires = "api_tls_key")]
    pub api_tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for the API.
    #[arg(long, requires = "api_tls_cert")]
    pub api_tls_key: Option<PathBuf>,
    /// Address peers should dial to reach this node (default: the --listen address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// The URL clients reach this node's API at, when it is not the --api address: a TLS
    /// proxy in front of a loopback API, or NAT (default: the --api address, or the
    /// --advertise host with the API's port). The cluster's status lists it; `review
    /// --cluster` follows a review there and `fix --cluster` places attempts there.
    #[arg(long, requires = "api", value_parser = parse_api_url)]
    pub api_url: Option<String>,
    /// Heartbeat interval in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub heartbeat_ms: u64,
    /// A peer silent this long (ms) is declared lost and its attempts are reassigned.
    #[arg(long, default_value_t = 3000)]
    pub deadline_ms: u64,
    /// The control plane's voters (3 or 5 node names, the same list on every node, this one
    /// included or not): reviews are replicated and survive the loss of their node. Nodes not
    /// listed join as non-voting learners. Without it (or with fewer than 3) no takeover.
    #[arg(long, value_delimiter = ',')]
    pub voters: Vec<String>,
    /// Autopilot: a voter lost this many seconds is replaced by the live learner that has
    /// replicated the most (while this node leads the control plane); 0 turns it off.
    #[arg(long, default_value_t = 300)]
    pub voter_grace_secs: u64,
    /// Let the fix attempts this node runs for `quorum fix --cluster` run the project's test
    /// command, sandboxed without network (bubblewrap, else a network namespace; refused where
    /// neither works). Without it this node never runs a target's code: the conductor tests.
    #[arg(long)]
    pub fix_tests: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Args, Debug, Clone)]
pub struct FixArgs {
    /// The directory the review was of.
    pub path: PathBuf,
    /// The review's report.json.
    #[arg(long, value_name = "REPORT.json", required_unless_present = "flow")]
    pub from: Option<PathBuf>,
    /// Review PATH with FLOW (a flow with an `improve:` block, such as self-improve), fix what
    /// it confirmed, and review the fixed tree again, in cycles until a cycle keeps fewer
    /// fixes than the flow's `min_kept` (or its `cycles` ran).
    #[arg(long, value_name = "FLOW", conflicts_with_all = ["from", "findings"])]
    pub flow: Option<String>,
    /// Fix these findings (ids from the report, comma-separated), whatever their verdict.
    #[arg(long, value_delimiter = ',', conflicts_with = "min_severity")]
    pub findings: Vec<String>,
    /// Fix the confirmed findings at or above this severity: P0|P1|P2|P3 (default P2, or the
    /// flow's `improve.min_severity`).
    #[arg(long)]
    pub min_severity: Option<String>,
    /// The project's test command, run sandboxed on the base and after every fix ("auto":
    /// the one detected from Cargo.toml, pyproject.toml, package.json or go.mod). Default:
    /// `[fix] test` in the tree's .quorum.toml, run only with your consent
    /// (--trust-repo-config, or a yes at the terminal), else no test oracle.
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// Run the test command the reviewed tree's .quorum.toml names without asking (also
    /// `[fix] trust_repo_config = true` in your own config file). Without it, and without a
    /// terminal to ask at, that command is refused.
    #[arg(long)]
    pub trust_repo_config: bool,
    /// Seconds one run of the test command may take before its process group is killed.
    #[arg(long, default_value_t = 600)]
    pub test_timeout: u64,
    /// Run the test command with no sandbox at all: with your files, sockets, environment
    /// and network, as you. The only way to run tests uncontained; the report says
    /// UNSANDBOXED. Without it, a machine where bubblewrap cannot run refuses to run tests.
    #[arg(long)]
    pub unsandboxed: bool,
    /// Output directory (default ./quorum-out/<fix-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Model for the blind verifier (prefer another family than the fixer's).
    #[arg(long)]
    pub verifier_model: Option<String>,
    /// Do not ask a blind verifier (fixes are then judged by the tests and analyzers alone).
    #[arg(long)]
    pub no_verifier: bool,
    /// Do not re-run the analyzers on fixed files.
    #[arg(long)]
    pub no_analyzers: bool,
    /// Most files one fix may change (default 3, or the flow's `improve.max_files`).
    #[arg(long)]
    pub max_files: Option<usize>,
    /// Most lines one fix may change (default 60, or the flow's `improve.max_lines`).
    #[arg(long)]
    pub max_lines: Option<u32>,
    /// Fix agents at work at once on this machine, each in its own worktree on the fixes kept
    /// when it started (0-16; default 1, or 0 with --cluster). The checks still judge one
    /// change at a time, on the tree it would be kept into: a change whose lines were fixed
    /// meanwhile is tried once more on the new code.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=16))]
    pub jobs: Option<u32>,
    /// Place fix attempts on the cluster's nodes too (a node's API, http(s)://host:port[,…];
    /// the first that answers lists the others). Each node runs the agent with its own model
    /// and, when it was started with --fix-tests, the tests on its copy; the checks are
    /// finished here, on the tree each fix would be kept into.
    #[arg(long, value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// File holding the API bearer token for --cluster (QUORUM_API_TOKEN wins when set).
    #[arg(long, requires = "cluster")]
    pub token_file: Option<PathBuf>,
    /// Keep the private worktree (under the output directory) for inspection.
    #[arg(long)]
    pub keep_worktree: bool,
    /// Continue the interrupted fix run (or, with --flow, self-improvement run) whose output
    /// directory is --out: kept fixes are re-applied from its records, never redone.
    #[arg(long, requires = "out")]
    pub resume: bool,
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Args, Debug, Clone)]
pub struct BuildArgs {
    /// The project to build in (it is never changed: increments land on a branch or a copy).
    pub path: PathBuf,
    /// The spec whose acceptance criteria the build works toward: a markdown checklist,
    /// numbered or identified requirements (REQ-1:), or MUST/SHALL lines.
    #[arg(long, value_name = "SPEC")]
    pub spec: PathBuf,
    /// The project's test command, run sandboxed on the base and after every increment
    /// ("auto": the one detected from Cargo.toml, pyproject.toml, package.json or go.mod).
    /// Default: `[fix] test` in .quorum.toml, else no test oracle.
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// Run the test command the reviewed tree's .quorum.toml names without asking (also
    /// `[fix] trust_repo_config = true` in your own config file).
    #[arg(long)]
    pub trust_repo_config: bool,
    /// Seconds one run of the test command may take before its process group is killed.
    #[arg(long, default_value_t = 600)]
    pub test_timeout: u64,
    /// Run the test command with no sandbox at all: with your files, sockets, environment
    /// and network, as you (the report says UNSANDBOXED).
    #[arg(long)]
    pub unsandboxed: bool,
    /// Output directory (default ./quorum-out/<build-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Model for the conformance judge (default: the verifier model, else another family
    /// than the builder's where one is served).
    #[arg(long)]
    pub judge_model: Option<String>,
    /// Most increments (1-100). Default: learned from earlier runs of specs of this size once
    /// three are recorded, else max(3, 3 x criteria).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_iterations: Option<u32>,
    /// Most files one increment may change.
    #[arg(long, default_value_t = 5)]
    pub max_files: usize,
    /// Most lines one increment may change.
    #[arg(long, default_value_t = 200)]
    pub max_lines: u32,
    /// Keep the private worktree (under the output directory) for inspection.
    #[arg(long)]
    pub keep_worktree: bool,
    /// Continue the interrupted build whose output directory is --out: kept increments are
    /// re-applied from its journal, never redone.
    #[arg(long, requires = "out")]
    pub resume: bool,
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Args, Debug, Clone)]
pub struct PackArgs {
    /// The directory a review would read.
    pub path: PathBuf,
    /// text (a summary) or json (every entry; shape in README).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// List every excluded and included entry in the text output, not the first 40 of each.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ResumeArgs {
    pub flow_id: String,
    /// Override the stored backends (the machine's servers may have moved).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Output directory (default: the one the review was started with).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum PersonasCommand {
    /// One line per persona: name, domain, summary.
    List,
    /// A persona in full, with its resolved heuristics.
    Show { name: String },
    /// Validate every persona, heuristic and flow; exit 2 naming the file and field on error.
    Check,
}

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Query the configured backends and list their models.
    List {
        #[command(flatten)]
        backend: BackendArgs,
        /// table or json
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
}

#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Configuration file (TOML), layered over the defaults.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Where reviews are stored (default: $QUORUM_DATA_DIR, else the user data dir).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct BackendArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Model server as KIND=URL (KIND: ollama | openai); repeatable; replaces configured backends.
    #[arg(long = "backend", value_name = "KIND=URL")]
    pub backends: Vec<String>,
    /// Default model ("auto" = the first model the backend reports).
    #[arg(long)]
    pub model: Option<String>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ReviewArgs {
    /// Set by `quorum fix --flow`, which runs a flow's review cycles itself.
    #[arg(skip)]
    pub improving: bool,
    /// The directory to review.
    pub path: PathBuf,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Flow name (in flows/) or a flow file.
    #[arg(long)]
    pub flow: Option<String>,
    /// Output directory (default ./quorum-out/<flow-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Report formats, comma-separated: md,json,sarif,rdjson,gitlab.
    #[arg(long, value_delimiter = ',')]
    pub format: Option<Vec<String>>,
    /// Exit 1 when a finding at or above this severity survives: P0|P1|P2|P3|none.
    #[arg(long)]
    pub fail_on: Option<String>,
    /// Count unverified leads (security and correctness hits of the analyzers that the
    /// budget left unchecked, listed apart in the report) for --fail-on too.
    #[arg(long)]
    pub fail_on_unverified: bool,
    /// Model for the verifier (prefer another family than the finders').
    #[arg(long)]
    pub verifier_model: Option<String>,
    /// Specialist tasks running at once.
    #[arg(long)]
    pub max_concurrent: Option<usize>,
    /// Independent verifier calls per grounded finding (1-9); overrides the flow's
    /// `verifiers`. Each is blind to the finder and to the other verifiers.
    #[arg(long, value_name = "N")]
    pub verifiers: Option<usize>,
    /// How the verifiers' votes combine: any | majority | unanimous; overrides the flow's
    /// `verify_threshold`.
    #[arg(long, value_name = "T")]
    pub verify_threshold: Option<String>,
    /// How much of the tree a planned review reads: sampled (the planner's tasks) | full (the
    /// planner's tasks, then directory batches for every file they leave out). Overrides the
    /// config's `coverage` and the flow's `parameters.coverage`.
    #[arg(long, value_name = "MODE")]
    pub coverage: Option<String>,
    /// Persona catalog directory.
    #[arg(long)]
    pub personas: Option<PathBuf>,
    /// Review through a running cluster's API instead of locally (http(s)://host:port; several
    /// nodes comma-separated or repeated: the review is followed across them).
    #[arg(long, value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// File holding the API bearer token for --cluster (QUORUM_API_TOKEN wins when set).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Continue the interrupted review of this target and flow, if there is one.
    #[arg(long)]
    pub resume: bool,
    /// Sensitive material: only models on local/private hosts may see it.
    #[arg(long)]
    pub sensitive: bool,
    /// Review a change: BASE..HEAD (or BASE, meaning BASE..HEAD) in the target's git
    /// repository. The head commit's tree is reviewed; findings off the change are listed
    /// apart as pre_existing.
    #[arg(long, value_name = "BASE..HEAD")]
    pub diff: Option<String>,
    /// Review profile: default | chill (gate 0.7, no P3) | assertive (gate 0.4, keep all).
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// The acceptance criteria a conformance flow judges the target against (a markdown spec:
    /// checklists, numbered requirements, MUST/SHALL lines). Read from anywhere; required by
    /// flows with a conformance stage, refused by the others.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// The report.json of a prior review that a finish flow adjudicates against the target:
    /// each of its findings ruled fixed, still_present, disputed_accepted or disputed_rejected.
    /// Required by flows with an adjudicator stage, refused by the others.
    #[arg(long, value_name = "REPORT.json")]
    pub prior: Option<PathBuf>,
    /// The author's dispositions of the prior findings (YAML or JSON): finding id ->
    /// {disposition: fixed|wont_fix|deferred|disputed, comment: "..."}. With --prior (a finish
    /// review), or with --since / --incremental: a wont_fix finding whose lines are unchanged
    /// is not raised again.
    #[arg(long, value_name = "FILE")]
    pub dispositions: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Append every progress event shown (stage, task started and finished, findings, the
    /// end) to FILE as one JSON object per line, for CI logs and scripts; each is written
    /// once, also when a cluster review is followed across nodes.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Write a copy of the target to DIR with the findings' safe_auto fixes applied (exact
    /// old -> new replacements); the target itself is never changed.
    #[arg(long, value_name = "DIR")]
    pub apply_safe_fixes: Option<PathBuf>,
    /// Do not run the deterministic analyzers (ruff, bandit, ... from the analyzer catalog)
    /// before the review, even where they are on PATH.
    #[arg(long)]
    pub no_analyzers: bool,
    /// Neither offer earlier reviews' insights nor keep this review's, and give specialists
    /// no teammates' insights (`[memory] enabled = false` for this run).
    #[arg(long)]
    pub no_memory: bool,
    /// Reuse the results of earlier reviews whose inputs have not changed: every task is
    /// planned, but one whose prompt, model and files (given or read through a tool) are what
    /// an earlier review's were takes that review's findings instead of calling a model.
    /// `incremental = true` in the target's .quorum.toml or `[cache]` does the same.
    #[arg(long, conflicts_with = "no_cache")]
    pub incremental: bool,
    /// Neither reuse nor record results: a full review that leaves the result cache as it was.
    #[arg(long)]
    pub no_cache: bool,
    /// Print, per task, whether it ran or took a recorded result, and why (which file changed).
    #[arg(long)]
    pub explain_cache: bool,
    /// Compare with an earlier review's report.json: findings it reported that are still
    /// present are marked seen_before (SARIF baselineState unchanged; left out of rdjson and
    /// the GitLab report), and report.md lists new, still present and fixed since. With
    /// --incremental and no --since, the last completed review of the same target is used.
    #[arg(long, value_name = "REPORT.json")]
    pub since: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct QualityArgs {
    /// A corpus directory: corpus.yaml (name, source, target, answers) and its target directory;
    /// with --expected, the directory reviewed (all of it).
    #[arg(long)]
    pub corpus: PathBuf,
    /// An external benchmark's expected results for the files of --corpus (CSV or JSON: file,
    /// class or CWE, vulnerable, optional lines): scored at file and class level, for the
    /// review and for its analyzers alone. Rows whose file is not there are skipped.
    #[arg(long, value_name = "FILE")]
    pub expected: Option<PathBuf>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Flow name (in flows/) or a flow file (default: the configured flow).
    #[arg(long)]
    pub flow: Option<String>,
    /// Specialist tasks running at once.
    #[arg(long)]
    pub max_concurrent: Option<usize>,
    /// Where the review's reports and bench-quality.json go (default ./quorum-out/<flow-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// text | json (the score on stdout).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct McpArgs {
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Run reviews through a node's API (http://host:port) instead of in this process.
    #[arg(long, value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// File holding the API bearer token for --cluster (QUORUM_API_TOKEN wins when set).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// An API URL a client can dial: http:// or https:// with a host.
fn parse_api_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or_else(|| format!("'{s}' is not an http:// or https:// URL"))?;
    let host = rest.split(['/', ':']).next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("'{s}' names no host"));
    }
    Ok(s.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_api_url;

    #[test]
    fn an_api_url_is_http_or_https_with_a_host() {
        assert_eq!(
            parse_api_url("https://ws2:8443/").unwrap(),
            "https://ws2:8443"
        );
        assert_eq!(
            parse_api_url("http://10.0.0.2:7400").unwrap(),
            "http://10.0.0.2:7400"
        );
        assert!(parse_api_url("ws2:8443")
            .unwrap_err()
            .contains("not an http"));
        assert!(parse_api_url("https://:8443")
            .unwrap_err()
            .contains("no host"));
    }
}
