//! `quorum-scripted`: the scripted model server as a process, for tests that drive whole `quorum`
//! binaries (cluster tests give each node its own).
//!
//! It prints exactly one line, `listening on http://ADDR`, once the port is bound, so a test can
//! read the port from stdout; with `--log` it appends every chat request as a JSON line, flushed
//! per line, so a test can follow progress without sleeping.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use quorum_testkit::{RecordedRequest, Script, ScriptedServer};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// Serve a YAML script over the Ollama and OpenAI-compatible APIs.
#[derive(Debug, Parser)]
#[command(name = "quorum-scripted", version)]
struct Args {
    /// The YAML script (rules, fallback, models).
    #[arg(long)]
    script: PathBuf,
    /// Address to bind; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Append every chat request to this file as one JSON line.
    #[arg(long)]
    log: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    let text = tokio::fs::read_to_string(&args.script)
        .await
        .with_context(|| format!("cannot read script {}", args.script.display()))?;
    let script = Script::from_yaml(&text)
        .with_context(|| format!("invalid script {}", args.script.display()))?;
    let server = ScriptedServer::start_on(args.listen, script)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;

    // Subscribe before announcing the port, so no request can arrive unlogged.
    let logger = match &args.log {
        Some(path) => {
            let file = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .await
                .with_context(|| format!("cannot open log {}", path.display()))?;
            Some(tokio::spawn(write_log(file, server.subscribe())))
        }
        None => None,
    };

    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on {}", server.ollama_url())?;
        stdout.flush()?;
    }

    wait_for_signal().await?;
    tracing::info!("stopping");
    // Dropping the server closes the request feed, which lets the logger drain and finish.
    server.shutdown();
    if let Some(logger) = logger {
        logger.await.context("log writer panicked")??;
    }
    Ok(())
}

async fn write_log(
    mut file: tokio::fs::File,
    mut feed: mpsc::UnboundedReceiver<RecordedRequest>,
) -> anyhow::Result<()> {
    while let Some(req) = feed.recv().await {
        let mut line = serde_json::to_string(&req)?;
        line.push('\n');
        file.write_all(line.as_bytes()).await?;
        file.flush().await?;
    }
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        result = tokio::signal::ctrl_c() => result?,
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await?;
    Ok(())
}
