fn main() {
    let dir = std::path::Path::new("/tmp/tmpfs-test/data");
    let data = quorum_store::DataDir::new(dir);
    let meta = quorum_store::FlowMeta {
        flow_id: "f1".into(),
        flow_name: "review".into(),
        flow_yaml: String::new(),
        params: serde_json::json!({}),
        target_path: "t".into(),
        head_sha: None,
        started_at: String::new(),
        started_ms: 0,
        node: "n1".into(),
    };
    let store = match data.create_flow(&meta) {
        Ok(s) => s,
        Err(e) => {
            println!("create: {e:?}");
            return;
        }
    };
    for i in 0..100000u32 {
        let ev = quorum_store::Event::Note {
            message: "x".repeat(2000) + &i.to_string(),
        };
        if let Err(e) = store.append(&ev) {
            println!("append {i}: {e}\n  debug: {e:?}");
            for j in 0..3 {
                if let Err(e2) = store.append(&ev) {
                    println!("again {j}: {e2}");
                }
            }
            break;
        }
    }
    drop(store);
    std::thread::sleep(std::time::Duration::from_millis(600));
    match data.open_flow("f1") {
        Ok(s) => println!(
            "reopen status: {:?} events {:?}",
            s.status(),
            s.events().map(|e| e.len())
        ),
        Err(e) => println!("reopen: {e}"),
    }
}
