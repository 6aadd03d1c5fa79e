//! The progress line on stderr: stage, tasks done/total, findings so far, tokens.
//!
//! Drawn only when stderr is a terminal and --quiet is off; otherwise events are drained
//! silently, so piping quorum into a file never fills it with carriage returns.

use quorum_runtime::Progress;
use std::io::Write;
use tokio::sync::mpsc::UnboundedReceiver;

#[derive(Default)]
struct View {
    stage: String,
    total: usize,
    done: usize,
    failed: usize,
    findings: usize,
    tokens_in: u64,
    tokens_out: u64,
}

fn human(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

fn is_stage(task: &str) -> bool {
    ["scout", "planner", "verifier", "synthesizer"].contains(&task) || task.starts_with("verifier-")
}

impl View {
    fn apply(&mut self, p: &Progress) {
        match p {
            Progress::Stage { stage } => self.stage = stage.clone(),
            Progress::Planned { tasks, .. } => self.total = *tasks,
            // Stage runs (scout, planner...) are not counted as tasks.
            Progress::TaskFinished { task, .. } if self.total == 0 || is_stage(task) => {}
            Progress::TaskFinished { ok, findings, .. } => {
                if *ok {
                    self.done += 1;
                    self.findings += findings;
                } else {
                    self.failed += 1;
                }
            }
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

    fn line(&self) -> String {
        format!(
            "quorum [{}] tasks {}/{}{} · findings {} · tokens {} in / {} out",
            if self.stage.is_empty() {
                "starting"
            } else {
                &self.stage
            },
            self.done,
            self.total,
            if self.failed > 0 {
                format!(" ({} failed attempts)", self.failed)
            } else {
                String::new()
            },
            self.findings,
            human(self.tokens_in),
            human(self.tokens_out)
        )
    }
}

/// Consume progress events until the sender is dropped.
pub async fn render(mut rx: UnboundedReceiver<Progress>, draw: bool) {
    let mut view = View::default();
    let mut err = std::io::stderr();
    while let Some(p) = rx.recv().await {
        view.apply(&p);
        if draw {
            let _ = write!(err, "\r\x1b[2K{}", view.line());
            let _ = err.flush();
        }
    }
    if draw {
        let _ = writeln!(err);
    }
}
