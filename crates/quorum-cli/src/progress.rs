//! The progress display on stderr, drawn with indicatif: a line per stage as it runs (a bar
//! of tasks done/total for the specialists, with an ETA), findings and tokens so far.
//!
//! Drawn only when stderr is a terminal and --quiet is off; otherwise events are drained
//! silently, so piping quorum into a file never fills it with control sequences. NO_COLOR
//! (any non-empty value) draws the same lines without colour.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use quorum_runtime::Progress;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// What the display knows in advance: how long a specialist task takes on this machine's
/// model, from its card's runtime layer, when it has run before.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hint {
    pub task_ms: Option<u64>,
    pub concurrency: usize,
}

impl Hint {
    /// From the learned latency of the default model (averaged over the task types it ran).
    pub fn from_backends(b: &quorum_runtime::Backends, concurrency: usize) -> Hint {
        let snapshot = b.runtime_snapshot();
        let task_ms = snapshot.get(&b.default_model).and_then(|by_type| {
            let known: Vec<f64> = by_type
                .values()
                .filter(|s| s.calls > 0 && s.latency_ms_avg > 0.0)
                .map(|s| s.latency_ms_avg)
                .collect();
            (!known.is_empty()).then(|| (known.iter().sum::<f64>() / known.len() as f64) as u64)
        });
        Hint {
            task_ms,
            concurrency: concurrency.max(1),
        }
    }

    /// Time left for `remaining` tasks, or None when the latency is unknown.
    fn eta(&self, remaining: usize) -> Option<Duration> {
        let per = self.task_ms?;
        let waves = remaining.div_ceil(self.concurrency.max(1)) as u64;
        Some(Duration::from_millis(per.saturating_mul(waves)))
    }
}

#[derive(Default)]
struct View {
    stage: String,
    total: usize,
    done: usize,
    failed: usize,
    findings: usize,
    verified: usize,
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
    // Scout, planner, verifier and judge batches, the panel's judges...: every run that is not
    // a specialist task.
    quorum_runtime::obs::role_of(task) != "specialist"
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

    fn summary(&self) -> String {
        format!(
            "findings {}{} · tokens {} in / {} out{}",
            self.findings,
            if self.verified > 0 {
                format!(" ({} verified)", self.verified)
            } else {
                String::new()
            },
            human(self.tokens_in),
            human(self.tokens_out),
            if self.failed > 0 {
                format!(" · {} failed attempts", self.failed)
            } else {
                String::new()
            }
        )
    }
}

fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

struct Bars {
    multi: MultiProgress,
    header: ProgressBar,
    current: Option<(String, ProgressBar)>,
    color: bool,
    hint: Hint,
}

impl Bars {
    fn new(hint: Hint) -> Bars {
        let color = !no_color();
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(Self::style(
            color,
            "{spinner:.cyan} {prefix:.bold} {msg}",
            "{spinner} {prefix} {msg}",
        ));
        header.set_prefix("quorum");
        header.set_message("starting");
        header.enable_steady_tick(Duration::from_millis(120));
        Bars {
            multi,
            header,
            current: None,
            color,
            hint,
        }
    }

    fn style(color: bool, colored: &str, plain: &str) -> ProgressStyle {
        ProgressStyle::with_template(if color { colored } else { plain })
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ")
            .tick_chars("|/-\\ ")
    }

    /// Close the running stage's line and open one for `stage`.
    fn start_stage(&mut self, stage: &str, view: &View) {
        self.finish_stage();
        let bar = if stage == "specialists" {
            let b = self.multi.add(ProgressBar::new(view.total as u64));
            b.set_style(Self::style(
                self.color,
                "  {prefix:>12.bold} [{bar:30.green/white}] {pos}/{len} tasks {msg}",
                "  {prefix:>12} [{bar:30}] {pos}/{len} tasks {msg}",
            ));
            b
        } else {
            let b = self.multi.add(ProgressBar::new_spinner());
            b.set_style(Self::style(
                self.color,
                "  {prefix:>12.bold} {spinner:.cyan} {elapsed} {msg}",
                "  {prefix:>12} {spinner} {elapsed} {msg}",
            ));
            b.enable_steady_tick(Duration::from_millis(120));
            b
        };
        bar.set_prefix(stage.to_string());
        self.current = Some((stage.to_string(), bar));
    }

    fn finish_stage(&mut self) {
        if let Some((stage, bar)) = self.current.take() {
            let (colored, plain) = if stage == "specialists" {
                (
                    "  {prefix:>12.bold} {msg:.green} {pos}/{len} tasks in {elapsed}",
                    "  {prefix:>12} {msg} {pos}/{len} tasks in {elapsed}",
                )
            } else {
                (
                    "  {prefix:>12.bold} {msg:.green} in {elapsed}",
                    "  {prefix:>12} {msg} in {elapsed}",
                )
            };
            bar.set_style(Self::style(self.color, colored, plain));
            bar.finish_with_message("done");
        }
    }

    fn update(&mut self, view: &View, p: &Progress) {
        if let Progress::Stage { stage } = p {
            self.start_stage(stage, view);
        }
        if let Some((stage, bar)) = &self.current {
            if stage == "specialists" {
                bar.set_length(view.total as u64);
                bar.set_position(view.done as u64);
                let remaining = view.total.saturating_sub(view.done);
                let eta = match self.hint.eta(remaining) {
                    Some(d) if remaining > 0 => format!("· ETA ~{}s (model card)", d.as_secs()),
                    _ if remaining > 0 && view.done > 0 => {
                        format!("· ETA ~{}s", bar.eta().as_secs())
                    }
                    _ => String::new(),
                };
                bar.set_message(eta);
            }
        }
        self.header
            .set_message(format!("[{}] {}", view.stage, view.summary()));
    }

    fn finish(mut self, view: &View) {
        self.finish_stage();
        self.header.set_style(Self::style(
            self.color,
            "{prefix:.bold} {msg}",
            "{prefix} {msg}",
        ));
        self.header.finish_with_message(view.summary());
    }
}

/// Consume progress events until the sender is dropped, also writing each event to `events`.
pub async fn render_to(rx: UnboundedReceiver<Progress>, draw: bool, events: Option<EventLog>) {
    render_full(rx, draw, Hint::default(), events).await
}

/// [`render_to`], with what is known in advance about task durations, writing each event to
/// `events` when given.
pub async fn render_full(
    mut rx: UnboundedReceiver<Progress>,
    draw: bool,
    hint: Hint,
    mut events: Option<EventLog>,
) {
    let mut view = View::default();
    let mut bars = draw.then(|| Bars::new(hint));
    while let Some(p) = rx.recv().await {
        if let Progress::Waiting { reason } = &p {
            // Said whatever the display: a review that waits must not look hung.
            let line = match reason {
                Some(why) => format!("quorum: {why}"),
                None => "quorum: a majority of voters is back; the review goes on".to_string(),
            };
            match bars.as_ref() {
                Some(b) => {
                    let _ = b.multi.println(&line);
                }
                None => eprintln!("{line}"),
            }
        }
        view.apply(&p);
        if let Some(b) = bars.as_mut() {
            b.update(&view, &p);
        }
        if let Some(log) = events.as_mut() {
            if let Err(e) = log.write(&p).await {
                // Said once; the review goes on without its event log.
                eprintln!(
                    "quorum: stopped writing events to {}: {e}",
                    log.path.display()
                );
                events = None;
            }
        }
    }
    if let Some(b) = bars {
        b.finish(&view);
    }
}

/// `--events FILE`: every progress event shown, one JSON object per line, flushed as it comes
/// so that `tail -f` follows the review.
pub struct EventLog {
    path: std::path::PathBuf,
    file: tokio::fs::File,
}

impl EventLog {
    /// Creates (or truncates) `path`; fails with a line naming it.
    pub fn create(path: &std::path::Path) -> anyhow::Result<EventLog> {
        let file = std::fs::File::create(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot write the event log {}: {e}; pass --events a writable path",
                path.display()
            )
        })?;
        Ok(EventLog {
            path: path.to_path_buf(),
            file: tokio::fs::File::from_std(file),
        })
    }

    async fn write(&mut self, p: &Progress) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let mut line = serde_json::to_vec(p).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line).await?;
        self.file.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_runs_are_not_tasks_and_findings_add_up() {
        let mut v = View::default();
        let fin = |task: &str, ok: bool, findings: usize| Progress::TaskFinished {
            task: task.into(),
            persona: String::new(),
            ok,
            findings,
            error: None,
            error_class: None,
            model: String::new(),
            tokens_in: 0,
            tokens_out: 0,
        };
        v.apply(&fin("scout", true, 0));
        v.apply(&Progress::Planned {
            tasks: 3,
            rejected: 0,
        });
        v.apply(&fin("t1", true, 2));
        v.apply(&fin("t2", false, 0));
        v.apply(&fin("planner", true, 0));
        v.apply(&fin("panel:judge_a", true, 0));
        v.apply(&fin("panel:judge_b", false, 0));
        assert_eq!((v.total, v.done, v.failed, v.findings), (3, 1, 1, 2));
        assert!(v.summary().contains("1 failed attempts"));
    }

    #[test]
    fn the_eta_counts_waves_of_the_concurrency() {
        let h = Hint {
            task_ms: Some(2000),
            concurrency: 2,
        };
        assert_eq!(h.eta(5), Some(Duration::from_secs(6)));
        assert_eq!(Hint::default().eta(5), None);
    }
}
