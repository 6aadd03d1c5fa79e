//! Fault injection for tests and chaos drills, read from the file `QUORUM_FAULTS` names.
/// Fault injection for tests and chaos drills (`QUORUM_FAULTS=FILE`): every 100 ms the file is
/// read and each `partition NAME` line cuts this node off from that peer through the cluster's
/// transport filter (frames both ways are dropped), and each `drop KIND` line drops this node's
/// outgoing frames of that kind (`attempt_result`: a worker whose results never arrive); a line
/// removed undoes it. Without the variable nothing of this runs.
pub async fn fault_file_loop(cluster: quorum_cluster::Cluster, path: std::path::PathBuf) {
    use std::collections::BTreeSet;
    let (mut cut, mut dropped) = (BTreeSet::<String>::new(), BTreeSet::<String>::new());
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tick.tick().await;
        let text = tokio::fs::read_to_string(&path).await.unwrap_or_default();
        let rule = |prefix: &str| -> BTreeSet<String> {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix(prefix))
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        };
        let (want_cut, want_dropped) = (rule("partition "), rule("drop "));
        for n in want_cut.difference(&cut) {
            tracing::warn!(peer = %n, "fault injection: partitioned from peer");
            cluster.filter().partition(n);
        }
        for n in cut.difference(&want_cut) {
            tracing::warn!(peer = %n, "fault injection: partition healed");
            cluster.filter().heal(n);
        }
        for k in want_dropped.difference(&dropped) {
            tracing::warn!(kind = %k, "fault injection: dropping outgoing frames");
            cluster.filter().drop_kinds(&[k.as_str()]);
        }
        for k in dropped.difference(&want_dropped) {
            tracing::warn!(kind = %k, "fault injection: sending frames again");
            cluster.filter().allow_kinds(&[k.as_str()]);
        }
        (cut, dropped) = (want_cut, want_dropped);
    }
}
