//! A watch through a path that goes silent without closing (a frozen node, a pulled cable)
//! fails within the client's keepalive bound instead of hanging, and a watch that is merely
//! quiet stays open. The silence is made by a loopback proxy that stops forwarding while
//! holding both sockets open, which is what a SIGSTOPped peer looks like from outside.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use quorum_api::pb;
use quorum_api::{
    serve_with_options, ApiClient, ApiError, EventStream, Keepalive, ReviewApi, ServeOptions,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

const TOKEN: &str = "test-token-0123456789";

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test did not finish within its bound")
}

/// Every watch sends one `stage` event and then stays open forever, like a review whose next
/// model call takes minutes.
#[derive(Default)]
struct Quiet {
    open: std::sync::Mutex<Vec<mpsc::Sender<pb::ReviewEvent>>>,
}

#[async_trait]
impl ReviewApi for Quiet {
    async fn submit(&self, _req: pb::SubmitReviewRequest) -> Result<String, ApiError> {
        Ok("flow-1".into())
    }

    async fn watch(&self, _flow_id: &str) -> Result<EventStream, ApiError> {
        let (tx, rx) = mpsc::channel(4);
        tx.send(pb::ReviewEvent {
            seq: 1,
            kind: "stage".into(),
            json: r#"{"seq":1,"kind":"stage"}"#.into(),
        })
        .await
        .map_err(|_| ApiError::Internal("watch closed".into()))?;
        self.open.lock().unwrap().push(tx);
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    async fn report(&self, flow_id: &str) -> Result<pb::GetReportResponse, ApiError> {
        Err(ApiError::Running(format!("review {flow_id} is running")))
    }

    async fn cancel(&self, _flow_id: &str) -> Result<bool, ApiError> {
        Ok(false)
    }

    async fn list(&self) -> Result<Vec<pb::ReviewSummary>, ApiError> {
        Ok(Vec::new())
    }

    async fn cluster_status(&self) -> Result<Vec<pb::NodeStatus>, ApiError> {
        Ok(Vec::new())
    }
    fn node_name(&self) -> String {
        "quiet".into()
    }
}

/// Serves [`Quiet`] on an ephemeral port; the server pings at the default cadence.
async fn start_server() -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve_with_options(
        listener,
        Arc::new(Quiet::default()),
        TOKEN.into(),
        ServeOptions::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

/// A TCP proxy to `upstream`; once `freeze` is set it forwards nothing more in either
/// direction but keeps every socket open, so neither end sees a close or a reset.
async fn start_proxy(upstream: String, freeze: watch::Receiver<bool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            let Ok(up) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (down_r, down_w) = down.into_split();
            let (up_r, up_w) = up.into_split();
            tokio::spawn(pump(down_r, up_w, freeze.clone()));
            tokio::spawn(pump(up_r, down_w, freeze.clone()));
        }
    });
    url
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut freeze: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            _ = freeze.wait_for(|f| *f) => break,
            read = from.read(&mut buf) => read,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if *freeze.borrow() || to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    // Frozen: hold both halves open and silent until the test's runtime goes away.
    std::future::pending::<()>().await;
    drop((from, to));
}

fn pack() -> pb::SubmitReviewRequest {
    pb::SubmitReviewRequest {
        target_name: "./fixture".into(),
        files: vec![pb::SourceFile {
            path: "src/lib.rs".into(),
            content: b"pub fn f() {}\n".to_vec(),
        }],
        flow: "review".into(),
        ..Default::default()
    }
}

const FAST: Keepalive = Keepalive {
    interval: Duration::from_millis(200),
    timeout: Duration::from_millis(300),
};

/// A review watched through the freezable proxy with [`FAST`] pings, its first event read: the
/// stream, the proxy's freeze switch, and the server (kept alive while held).
async fn watching() -> (
    quorum_api::ClientEventStream,
    watch::Sender<bool>,
    oneshot::Sender<()>,
) {
    let (addr, stop) = start_server().await;
    let (freeze, frozen) = watch::channel(false);
    let url = start_proxy(addr, frozen).await;
    let client = ApiClient::connect_with(&url, TOKEN, None, FAST)
        .await
        .unwrap();
    let flow_id = client.submit(pack()).await.unwrap();
    let mut events = client.watch(&flow_id).await.unwrap();
    let first = events
        .next()
        .await
        .expect("an event")
        .expect("not an error");
    assert_eq!(first.kind, "stage");
    (events, freeze, stop)
}

#[tokio::test]
async fn a_watch_through_a_path_gone_silent_fails_within_the_keepalive_bound() {
    bounded(async {
        let (mut events, freeze, _server) = watching().await;

        freeze.send(true).unwrap();
        let cut = Instant::now();
        // Generous against a loaded machine; without pings this waits forever.
        let end = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("the watch still hangs on a silent path");
        let waited = cut.elapsed();
        match end {
            Some(Err(e)) => eprintln!(
                "silent path noticed after {waited:?} (bound {:?}): {e}",
                FAST.dead_within()
            ),
            None => eprintln!("silent path ended the watch after {waited:?}"),
            Some(Ok(e)) => panic!("an event came through a frozen path: {e:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_quiet_watch_on_a_live_path_stays_open() {
    bounded(async {
        let (mut events, _freeze, _server) = watching().await;
        // Several keepalive bounds with no event at all: pings are answered, so the review
        // is slow, not dead, and its watch must stay open.
        let quiet = FAST.dead_within() * 4;
        let next = tokio::time::timeout(quiet, events.next()).await;
        assert!(
            next.is_err(),
            "a quiet but live watch ended: {:?}",
            next.ok()
        );
    })
    .await;
}
