//! The proxy end to end on loopback: a test gatekeeper that admits one
//! name (resolved to 127.0.0.1 by override, as `[network] resolve` does)
//! and refuses everything else, an echo upstream, and clients speaking
//! CONNECT, plain HTTP and SOCKS5.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use egress_proxy::{Admission, ConnectionEvent, Gatekeeper, Outcome, Protocol, Refusal, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ALLOWED: &str = "pkg.test";

#[derive(Default)]
struct TestGate {
    events: Mutex<Vec<ConnectionEvent>>,
}

#[async_trait::async_trait]
impl Gatekeeper for TestGate {
    async fn admit(&self, _listener: u64, target: &Target) -> Admission {
        if target.host == ALLOWED {
            Admission::Allow
        } else {
            Admission::Refuse(Refusal {
                reason: "not in [network] allow".into(),
                remedy: format!("add \"{}\" to [network] allow", target.host),
            })
        }
    }

    fn resolve_override(&self, host: &str) -> Option<IpAddr> {
        (host == ALLOWED).then_some(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    fn check_address(&self, _target: &Target, address: IpAddr) -> Result<(), Refusal> {
        if address.is_loopback() {
            Ok(())
        } else {
            Err(Refusal {
                reason: format!("{address} is not loopback"),
                remedy: "none".into(),
            })
        }
    }

    fn record(&self, event: ConnectionEvent) {
        self.events.lock().unwrap().push(event);
    }
}

impl TestGate {
    async fn events_after(&self, count: usize) -> Vec<ConnectionEvent> {
        for _ in 0..200 {
            {
                let events = self.events.lock().unwrap();
                if events.len() >= count {
                    return events.clone();
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.events.lock().unwrap().clone()
    }
}

/// An upstream that answers each connection with the head it received,
/// then echoes what follows.
async fn upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                loop {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => {
                            if stream.write_all(&buffer[..read]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

async fn proxy() -> (SocketAddr, Arc<TestGate>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let gate = Arc::new(TestGate::default());
    let served: Arc<dyn Gatekeeper> = gate.clone();
    tokio::spawn(egress_proxy::serve(listener, 7, served));
    (address, gate)
}

async fn read_until(stream: &mut TcpStream, needle: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !seen.windows(needle.len()).any(|window| window == needle) {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("read timed out")
            .unwrap();
        if read == 0 {
            break;
        }
        seen.extend_from_slice(&buffer[..read]);
    }
    seen
}

async fn read_to_end(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut all))
        .await
        .expect("read timed out")
        .unwrap();
    String::from_utf8(all).unwrap()
}

#[tokio::test]
async fn connect_tunnels_to_an_admitted_name_and_counts_the_bytes() {
    let port = upstream().await;
    let (proxy, gate) = proxy().await;
    let mut client = TcpStream::connect(proxy).await.unwrap();
    client
        .write_all(
            format!("CONNECT {ALLOWED}:{port} HTTP/1.1\r\nHost: {ALLOWED}:{port}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let head = read_until(&mut client, b"\r\n\r\n").await;
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    client.write_all(b"ping through the tunnel").await.unwrap();
    let echoed = read_until(&mut client, b"tunnel").await;
    assert_eq!(echoed, b"ping through the tunnel");
    drop(client);
    let events = gate.events_after(1).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].listener, 7);
    assert_eq!(events[0].protocol, Protocol::Connect);
    assert_eq!(events[0].target.to_string(), format!("{ALLOWED}:{port}"));
    assert_eq!(
        events[0].outcome,
        Outcome::Closed {
            sent: 23,
            received: 23
        }
    );
}

#[tokio::test]
async fn a_refused_host_gets_a_403_that_says_why_and_how_to_allow_it() {
    let (proxy, gate) = proxy().await;
    let mut client = TcpStream::connect(proxy).await.unwrap();
    client
        .write_all(b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_end(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
    assert!(
        answer.contains("refused evil.example:443 (not in [network] allow)"),
        "{answer}"
    );
    assert!(
        answer.contains("To allow it: add \"evil.example\""),
        "{answer}"
    );
    let events = gate.events_after(1).await;
    assert!(matches!(events[0].outcome, Outcome::Refused(_)));
}

#[tokio::test]
async fn a_plain_request_is_forwarded_in_origin_form_without_proxy_headers() {
    let port = upstream().await;
    let (proxy, gate) = proxy().await;
    let mut client = TcpStream::connect(proxy).await.unwrap();
    client
        .write_all(
            format!(
                "GET http://{ALLOWED}:{port}/simple/pkg/?q=1 HTTP/1.1\r\nHost: {ALLOWED}:{port}\r\nProxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // The echo upstream sends back exactly what the proxy forwarded.
    let forwarded = String::from_utf8(read_until(&mut client, b"\r\n\r\n").await).unwrap();
    assert!(
        forwarded.starts_with("GET /simple/pkg/?q=1 HTTP/1.1\r\n"),
        "{forwarded}"
    );
    assert!(forwarded.contains("Accept: */*\r\n"), "{forwarded}");
    assert!(forwarded.contains("Connection: close\r\n"), "{forwarded}");
    assert!(
        !forwarded.to_ascii_lowercase().contains("proxy-"),
        "{forwarded}"
    );
    drop(client);
    let events = gate.events_after(1).await;
    assert_eq!(events[0].protocol, Protocol::Http);
}

#[tokio::test]
async fn requests_that_are_not_proxy_requests_get_a_400() {
    let (proxy, _gate) = proxy().await;
    for request in [
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET https://pkg.test/ HTTP/1.1\r\n\r\n",
        "CONNECT pkg.test HTTP/1.1\r\n\r\n",
        "nonsense\r\n\r\n",
    ] {
        let mut client = TcpStream::connect(proxy).await.unwrap();
        client.write_all(request.as_bytes()).await.unwrap();
        let answer = read_to_end(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{request:?}: {answer}");
    }
}

async fn socks_connect(proxy: SocketAddr, address: &[u8], port: u16) -> (TcpStream, u8) {
    let mut client = TcpStream::connect(proxy).await.unwrap();
    client.write_all(&[5, 1, 0]).await.unwrap();
    let mut choice = [0u8; 2];
    client.read_exact(&mut choice).await.unwrap();
    assert_eq!(choice, [5, 0]);
    let mut request = vec![5, 1, 0];
    request.extend_from_slice(address);
    request.extend_from_slice(&port.to_be_bytes());
    client.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    client.read_exact(&mut reply).await.unwrap();
    (client, reply[1])
}

#[tokio::test]
async fn socks5_resolves_names_itself_and_refuses_by_the_same_rules() {
    let port = upstream().await;
    let (proxy, gate) = proxy().await;
    let mut name = vec![3, ALLOWED.len() as u8];
    name.extend_from_slice(ALLOWED.as_bytes());
    let (mut client, code) = socks_connect(proxy, &name, port).await;
    assert_eq!(code, 0, "succeeded");
    client.write_all(b"over socks").await.unwrap();
    assert_eq!(read_until(&mut client, b"socks").await, b"over socks");
    // An address a client resolved itself is judged as an address.
    let (_, code) = socks_connect(proxy, &[1, 127, 0, 0, 1], port).await;
    assert_eq!(code, 2, "not allowed by ruleset");
    let mut evil = vec![3, 12];
    evil.extend_from_slice(b"evil.example");
    let (_, code) = socks_connect(proxy, &evil, 443).await;
    assert_eq!(code, 2);
    let events = gate.events_after(2).await;
    let refused = events
        .iter()
        .filter(|event| matches!(event.outcome, Outcome::Refused(_)))
        .count();
    assert_eq!(refused, 2, "{events:?}");
}

#[tokio::test]
async fn an_admitted_name_that_cannot_be_resolved_gets_a_502_naming_it() {
    struct Open;
    #[async_trait::async_trait]
    impl Gatekeeper for Open {
        async fn admit(&self, _listener: u64, _target: &Target) -> Admission {
            Admission::Allow
        }
        fn resolve_override(&self, _host: &str) -> Option<IpAddr> {
            None
        }
        fn check_address(&self, _target: &Target, _address: IpAddr) -> Result<(), Refusal> {
            Ok(())
        }
        fn record(&self, _event: ConnectionEvent) {}
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(egress_proxy::serve(listener, 1, Arc::new(Open)));
    let mut client = TcpStream::connect(address).await.unwrap();
    client
        .write_all(b"CONNECT no-such-host.invalid:443 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_end(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(
        answer.contains("cannot resolve no-such-host.invalid"),
        "{answer}"
    );
}
