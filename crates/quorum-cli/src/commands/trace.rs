//! `quorum trace export FLOW_ID`: every attempt's recorded conversation as Hermes-format JSONL.

use crate::args::{CommonArgs, TraceCommand};
use crate::exit::{store_err, ExitCode};
use crate::setup::{data_dir, load_settings};
use anyhow::{Context, Result};

pub fn trace(command: TraceCommand, common: &CommonArgs) -> Result<ExitCode> {
    let settings = load_settings(common.config.as_deref())?;
    let data = data_dir(common, &settings);
    let TraceCommand::Export { flow_id, out } = command;
    let store = data.open_flow(&flow_id).map_err(store_err)?;
    let n = match out {
        Some(path) => {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            );
            let n = quorum_store::trace_export(&store, &mut f).map_err(store_err)?;
            std::io::Write::flush(&mut f)
                .with_context(|| format!("cannot write {}", path.display()))?;
            n
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            quorum_store::trace_export(&store, &mut lock).map_err(store_err)?
        }
    };
    eprintln!("quorum: exported {n} attempts");
    Ok(ExitCode::Clean)
}
