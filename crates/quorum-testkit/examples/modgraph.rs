//! Print every crate's module circles (the check `tests/module_graph.rs` makes).
fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let verbose = std::env::args().any(|a| a == "-v");
    let mut total = 0;
    for (name, path) in quorum_testkit::modgraph::workspace_roots(&root) {
        let g = match quorum_testkit::modgraph::ModuleGraph::read(&path) {
            Ok(g) => g,
            Err(e) => {
                println!("{name}: cannot read: {e}");
                continue;
            }
        };
        let c = g.circles();
        total += c.len();
        println!(
            "{name}: {} modules, {} circles",
            g.modules().count(),
            c.len()
        );
        for circle in c {
            println!(
                "  circle of {}: {}",
                circle.modules.len(),
                circle.modules.join(", ")
            );
            println!("    e.g. {}", circle.cycle.join(" -> "));
            if verbose {
                for m in &circle.modules {
                    let out: Vec<&String> = g.edges[m]
                        .iter()
                        .filter(|t| circle.modules.contains(t))
                        .collect();
                    println!("      {m} -> {out:?}");
                }
            }
        }
    }
    println!("total circles: {total}");
}
