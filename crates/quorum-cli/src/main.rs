//! The `quorum` binary: parses the command line, sets up logs and the async runtime,
//! dispatches to the command's file under `commands/` and maps what it returns to the process's
//! exit code. Glue only — every decision about a review lives in quorum-runtime/-core, and
//! everything the commands share lives in the rooms below them.

mod args;
mod client;
mod commands;
mod exit;
mod fix_cluster;
mod fixes;
mod local;
mod logs;
#[cfg(feature = "otel")]
mod otel;
mod outcome;
mod progress;
mod rule_pack;
mod settings;
mod setup;
mod target;

use anyhow::Result;
use args::{BenchCommand, Cli, ClusterCommand, Command, FlowsCommand, ModelsCommand};
use clap::Parser;
use exit::{Coded, ExitCode};

/// The command's function for the parsed command line.
async fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Review(args) => commands::review::review(args).await,
        Command::Personas { command, common } => {
            commands::personas::personas(command, common.config.as_deref())
        }
        Command::Models {
            command: ModelsCommand::List { backend, format },
        } => commands::models::models_list(backend, &format).await,
        Command::Bench {
            command: BenchCommand::Quality(args),
        } => commands::bench::quality(args).await,
        Command::Pack(args) => commands::pack::pack(&args),
        Command::Resume(args) => commands::resume::resume(args).await,
        Command::Fix(args) => match args.flow.clone() {
            Some(flow) => commands::improve::improve(args, &flow).await,
            None => commands::fix::fix(args).await,
        },
        Command::Build(args) => commands::build::build(args).await,
        Command::Trace { command, common } => commands::trace::trace(command, &common),
        Command::Node(args) => commands::node::node(args).await,
        Command::Mcp(args) => commands::mcp::serve(args).await,
        Command::Flows {
            command:
                FlowsCommand::Cancel {
                    flow_id,
                    cluster,
                    token_file,
                },
            common,
        } => commands::flows::cancel(&flow_id, &cluster, token_file.as_deref(), &common).await,
        Command::Flows {
            command:
                FlowsCommand::Show {
                    flow_id,
                    watch: true,
                    cluster,
                    token_file,
                    events,
                },
            common,
        } => {
            commands::flows::watch(
                &flow_id,
                &cluster,
                token_file.as_deref(),
                events.as_deref(),
                &common,
            )
            .await
        }
        Command::Flows { command, common } => commands::flows::flows(command, &common),
        Command::Cluster {
            command:
                ClusterCommand::Status {
                    cluster,
                    format,
                    token_file,
                },
        } => commands::cluster::cluster_status(&cluster, &format, token_file.as_deref()).await,
        Command::Cluster {
            command: ClusterCommand::Voters { change },
        } => commands::cluster::change_voters(change).await,
        Command::Cluster {
            command: ClusterCommand::InitCa { dir },
        } => commands::cluster::certs::init_ca(&dir),
        Command::Cluster {
            command:
                ClusterCommand::IssueCert {
                    name,
                    ca,
                    host,
                    out,
                },
        } => commands::cluster::certs::issue_cert(&name, &ca, &host, out.as_deref()),
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let code = if e.use_stderr() {
                ExitCode::Usage as i32
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let logs = logs::init_logs(&cli.log_format, &logs::service_name(&cli));
    client::set_api_ca(cli.ca.clone());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quorum: cannot start the async runtime: {e}");
            std::process::exit(ExitCode::Incomplete as i32);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("quorum: {}", exit::one_line(&e));
            e.downcast_ref::<Coded>()
                .map(|c| c.code)
                .unwrap_or(ExitCode::Usage)
        }
    };
    // Don't wait for lingering background tasks (a hung backend call) on the way out.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    // Outside the async runtime: the trace exporter's blocking client flushes here.
    logs.shutdown();
    std::process::exit(code as i32);
}
