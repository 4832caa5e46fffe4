//! HTTP: `CONNECT host:port` tunnels, and plain requests in absolute form
//! (`GET http://host/path`), one request per connection so every request
//! is judged (keep-alive could carry a second request to another host).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tls::{Interceptor, with_credentials};
use crate::{
    ConnectionEvent, Gatekeeper, OpenError, Outcome, Protocol, Refusal, Target, open,
    parse_authority, relay,
};

/// The longest request head read.
const MAX_HEAD: usize = 64 * 1024;

/// Headers a proxy consumes and never forwards.
const HOP_HEADERS: &[&str] = &[
    "proxy-authorization",
    "proxy-connection",
    "connection",
    "keep-alive",
];

pub(crate) async fn handle(
    mut client: TcpStream,
    tag: u64,
    gate: &dyn Gatekeeper,
    tls: Option<&Interceptor>,
) -> std::io::Result<()> {
    let Some((head, rest)) = read_head(&mut client).await? else {
        return respond(
            &mut client,
            400,
            "Bad Request",
            "the request head is malformed or longer than 64 KiB\n",
        )
        .await;
    };
    let Some(request_line) = head.lines().next() else {
        return respond(&mut client, 400, "Bad Request", "empty request\n").await;
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(uri), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return respond(&mut client, 400, "Bad Request", "malformed request line\n").await;
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let Some(target) = parse_authority(uri, None) else {
            return respond(&mut client, 400, "Bad Request", "CONNECT needs host:port\n").await;
        };
        let credentials = gate.credentials(&target);
        if let Some(tls) = tls.filter(|_| !credentials.is_empty()) {
            if !rest.is_empty() {
                // TLS bytes before the tunnel was granted: no client does
                // this, and the handshake below could not see them.
                return respond(
                    &mut client,
                    400,
                    "Bad Request",
                    "data before the tunnel opened\n",
                )
                .await;
            }
            return intercept(client, tag, gate, tls, target, &credentials).await;
        }
        let Some(mut upstream) = admit(&mut client, tag, gate, Protocol::Connect, &target).await?
        else {
            return Ok(());
        };
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        if !rest.is_empty() {
            upstream.write_all(&rest).await?;
        }
        let (sent, received) = relay(&mut client, &mut upstream).await;
        gate.record(ConnectionEvent::new(
            tag,
            Protocol::Connect,
            target,
            Outcome::Closed {
                sent: sent + rest.len() as u64,
                received,
            },
        ));
        return Ok(());
    }
    let Some(after_scheme) = uri.strip_prefix("http://") else {
        let message = if uri.starts_with("https://") {
            "an https:// URL goes through CONNECT, not a plain request\n"
        } else {
            "this is a proxy: requests name an absolute http:// URL or use CONNECT\n"
        };
        return respond(&mut client, 400, "Bad Request", message).await;
    };
    let (authority, path) = match after_scheme.find(['/', '?']) {
        Some(at) => after_scheme.split_at(at),
        None => (after_scheme, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    // Credentials in the URL (`user:pass@host`) stay with the client.
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let Some(target) = parse_authority(authority, Some(80)) else {
        return respond(
            &mut client,
            400,
            "Bad Request",
            "the URL has no valid host\n",
        )
        .await;
    };
    let Some(mut upstream) = admit(&mut client, tag, gate, Protocol::Http, &target).await? else {
        return Ok(());
    };
    let mut forwarded = format!("{method} {path} {version}\r\n");
    for line in head.lines().skip(1).filter(|line| !line.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if HOP_HEADERS.iter().any(|hop| name.eq_ignore_ascii_case(hop)) {
            continue;
        }
        forwarded.push_str(line);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("Connection: close\r\n\r\n");
    upstream.write_all(forwarded.as_bytes()).await?;
    if !rest.is_empty() {
        upstream.write_all(&rest).await?;
    }
    let (sent, received) = relay(&mut client, &mut upstream).await;
    gate.record(ConnectionEvent::new(
        tag,
        Protocol::Http,
        target,
        Outcome::Closed {
            sent: sent + (forwarded.len() + rest.len()) as u64,
            received,
        },
    ));
    Ok(())
}

/// A tunnel to a host with credentials: the upstream's TLS is opened and
/// verified first (a credential never goes to an upstream that could not
/// be verified), then the command's TLS is ended with this proxy's
/// certificate for the host, and the one request's head gets the headers.
async fn intercept(
    mut client: TcpStream,
    tag: u64,
    gate: &dyn Gatekeeper,
    tls: &Interceptor,
    target: Target,
    credentials: &[(String, String)],
) -> std::io::Result<()> {
    let Some(upstream) = admit(&mut client, tag, gate, Protocol::Connect, &target).await? else {
        return Ok(());
    };
    let verified = match tls.connector(&target.host) {
        Ok((connector, name)) => connector
            .connect(name, upstream)
            .await
            .map_err(|error| format!("cannot verify the TLS certificate of {target}: {error}")),
        Err(error) => Err(error.to_string()),
    };
    let mut upstream = match verified {
        Ok(upstream) => upstream,
        Err(error) => {
            let body = format!("agent-exec egress proxy: {error}; the credential was not sent\n");
            gate.record(ConnectionEvent::new(
                tag,
                Protocol::Connect,
                target,
                Outcome::Failed { error },
            ));
            return respond(&mut client, 502, "Bad Gateway", &body).await;
        }
    };
    let acceptor = tls
        .acceptor(&target.host)
        .map_err(|error| std::io::Error::other(error.to_string()))?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    let mut client = acceptor.accept(client).await?;
    let Some((head, rest)) = read_head(&mut client).await? else {
        return Ok(());
    };
    let forwarded = with_credentials(&head, credentials);
    upstream.write_all(forwarded.as_bytes()).await?;
    upstream.write_all(&rest).await?;
    let (sent, received) = relay(&mut client, &mut upstream).await;
    gate.record(ConnectionEvent {
        credential: true,
        ..ConnectionEvent::new(
            tag,
            Protocol::Connect,
            target,
            Outcome::Closed {
                sent: sent + (forwarded.len() + rest.len()) as u64,
                received,
            },
        )
    });
    Ok(())
}

/// Opens the upstream for `target`, or answers the refusal or failure and
/// records it.
async fn admit(
    client: &mut TcpStream,
    tag: u64,
    gate: &dyn Gatekeeper,
    protocol: Protocol,
    target: &Target,
) -> std::io::Result<Option<TcpStream>> {
    match open(gate, tag, target).await {
        Ok(upstream) => Ok(Some(upstream)),
        Err(OpenError::Refused(refusal)) => {
            let body = refusal_body(target, &refusal);
            gate.record(ConnectionEvent::new(
                tag,
                protocol,
                target.clone(),
                Outcome::Refused(refusal),
            ));
            respond(client, 403, "Forbidden", &body).await?;
            Ok(None)
        }
        Err(OpenError::Failed(error)) => {
            let body = format!("agent-exec egress proxy: {error}\n");
            gate.record(ConnectionEvent::new(
                tag,
                protocol,
                target.clone(),
                Outcome::Failed { error },
            ));
            respond(client, 502, "Bad Gateway", &body).await?;
            Ok(None)
        }
    }
}

/// The text a refused client reads: what, why, and how to allow it.
pub(crate) fn refusal_body(target: &Target, refusal: &Refusal) -> String {
    format!(
        "agent-exec egress proxy refused {target} ({}).\nTo allow it: {}.\n",
        refusal.reason, refusal.remedy
    )
}

async fn respond<C: AsyncWrite + Unpin>(
    client: &mut C,
    status: u16,
    phrase: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

/// Reads up to the blank line ending the head; returns the head as text
/// and whatever came after it. `None` for a head that is too long, not
/// UTF-8, or cut short.
async fn read_head<C: AsyncRead + Unpin>(
    client: &mut C,
) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let read = client.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        let searched_from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(chunk.get(..read).unwrap_or_default());
        if let Some(end) = buffer
            .get(searched_from..)
            .and_then(|tail| tail.windows(4).position(|window| window == b"\r\n\r\n"))
        {
            let end = searched_from + end + 4;
            let rest = buffer.split_off(end);
            return Ok(String::from_utf8(buffer).ok().map(|head| (head, rest)));
        }
        if buffer.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}
