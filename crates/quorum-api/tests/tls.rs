//! The API over TLS, end to end on loopback: a CA made here with rcgen signs the server's
//! certificate; a client trusting that CA gets answers, one trusting another CA is refused with a
//! one-line message saying what to do, and a plain-http client gets nothing from a TLS server.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_api::pb;
use quorum_api::{serve_with_tls, ApiClient, ApiError, EventStream, ReviewApi, ServerTls};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;

const TOKEN: &str = "test-token-0123456789";

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test did not finish within its bound")
}

/// Answers `list` with one review and counts the calls that reached it.
#[derive(Default)]
struct Fake {
    calls: AtomicUsize,
}

#[async_trait]
impl ReviewApi for Fake {
    async fn submit(&self, _req: pb::SubmitReviewRequest) -> Result<String, ApiError> {
        Err(ApiError::InvalidArgument("not in this test".into()))
    }
    async fn watch(&self, _flow_id: &str) -> Result<EventStream, ApiError> {
        Err(ApiError::NotFound("not in this test".into()))
    }
    async fn report(&self, _flow_id: &str) -> Result<pb::GetReportResponse, ApiError> {
        Err(ApiError::NotFound("not in this test".into()))
    }
    async fn cancel(&self, _flow_id: &str) -> Result<bool, ApiError> {
        Ok(false)
    }
    async fn list(&self) -> Result<Vec<pb::ReviewSummary>, ApiError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(vec![pb::ReviewSummary {
            flow_id: "f1".into(),
            ..Default::default()
        }])
    }
    async fn cluster_status(&self) -> Result<Vec<pb::NodeStatus>, ApiError> {
        Ok(Vec::new())
    }
    fn node_name(&self) -> String {
        "fake".into()
    }
}

struct Ca {
    pem: String,
    params: CertificateParams,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let pem = params.self_signed(&key).unwrap().pem();
    Ca { pem, params, key }
}

/// A server certificate for localhost and 127.0.0.1, signed by `ca`: (cert PEM, key PEM).
fn server_cert(ca: &Ca) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let issuer = Issuer::from_params(&ca.params, &ca.key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// Starts a TLS API signed by `ca`; returns its address and the fake behind it.
async fn start_tls(ca: &Ca) -> (String, Arc<Fake>) {
    let (cert, key) = server_cert(ca);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let fake = Arc::new(Fake::default());
    let api: Arc<dyn ReviewApi> = fake.clone();
    tokio::spawn(serve_with_tls(
        listener,
        api,
        TOKEN.to_string(),
        Some(ServerTls::from_pem(cert.as_bytes(), key.as_bytes())),
        std::future::pending(),
    ));
    (addr, fake)
}

#[tokio::test]
async fn a_tls_api_answers_a_client_that_trusts_its_ca() {
    bounded(async {
        let ca = ca("test cluster ca");
        let (addr, fake) = start_tls(&ca).await;
        let client =
            ApiClient::connect_with_ca(&format!("https://{addr}"), TOKEN, Some(ca.pem.as_bytes()))
                .await
                .unwrap();
        let list = client.list().await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].flow_id, "f1");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test]
async fn a_client_trusting_another_ca_is_refused_with_one_clear_line() {
    bounded(async {
        let ca_right = ca("test cluster ca");
        let ca_wrong = ca("someone else's ca");
        let (addr, fake) = start_tls(&ca_right).await;
        let url = format!("https://{addr}");
        let err = ApiClient::connect_with_ca(&url, TOKEN, Some(ca_wrong.pem.as_bytes()))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ApiError::Unavailable(_)), "{err:?}");
        assert!(
            msg.contains(&url) && msg.contains("not trusted") && msg.contains("--ca"),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
        // Nothing reached the service.
        assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
    })
    .await;
}

#[tokio::test]
async fn plain_http_gets_nothing_from_a_tls_api_and_a_ca_needs_https() {
    bounded(async {
        let ca = ca("test cluster ca");
        let (addr, fake) = start_tls(&ca).await;
        // Connecting plain HTTP/2 to a TLS port either fails at once or on the first call.
        if let Ok(c) = ApiClient::connect(&format!("http://{addr}"), TOKEN).await {
            assert!(c.list().await.is_err());
        }
        assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
        let err = ApiClient::connect_with_ca(&format!("http://{addr}"), TOKEN, Some(b"x"))
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::InvalidArgument(ref m) if m.contains("https://")));
    })
    .await;
}
