//! SOCKS5 (RFC 1928), `CONNECT` only, no authentication: the listener is
//! reachable only from the command's own namespace. Names are resolved
//! here (`socks5h`); a client that resolved a name itself sends an address,
//! which the gatekeeper judges as an address.

use std::net::{Ipv4Addr, Ipv6Addr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{ConnectionEvent, Gatekeeper, OpenError, Outcome, Protocol, Target, open, relay};

/// The protocol version byte that starts every SOCKS5 exchange.
pub(crate) const VERSION: u8 = 5;

const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const COMMAND_CONNECT: u8 = 1;

const SUCCEEDED: u8 = 0;
const GENERAL_FAILURE: u8 = 1;
const NOT_ALLOWED_BY_RULESET: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 8;

const ADDRESS_V4: u8 = 1;
const ADDRESS_NAME: u8 = 3;
const ADDRESS_V6: u8 = 4;

pub(crate) async fn handle(
    mut client: TcpStream,
    tag: u64,
    gate: &dyn Gatekeeper,
) -> std::io::Result<()> {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&NO_AUTHENTICATION) {
        client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await?;
        return Ok(());
    }
    client.write_all(&[VERSION, NO_AUTHENTICATION]).await?;
    let mut request = [0u8; 4];
    client.read_exact(&mut request).await?;
    let [version, command, _, address_type] = request;
    if version != VERSION {
        return reply(&mut client, GENERAL_FAILURE).await;
    }
    let host = match address_type {
        ADDRESS_V4 => {
            let mut octets = [0u8; 4];
            client.read_exact(&mut octets).await?;
            Ipv4Addr::from(octets).to_string()
        }
        ADDRESS_V6 => {
            let mut octets = [0u8; 16];
            client.read_exact(&mut octets).await?;
            Ipv6Addr::from(octets).to_string()
        }
        ADDRESS_NAME => {
            let length = client.read_u8().await?;
            let mut name = vec![0u8; usize::from(length)];
            client.read_exact(&mut name).await?;
            match String::from_utf8(name) {
                Ok(name) => name,
                Err(_) => return reply(&mut client, ADDRESS_TYPE_NOT_SUPPORTED).await,
            }
        }
        _ => return reply(&mut client, ADDRESS_TYPE_NOT_SUPPORTED).await,
    };
    let port = client.read_u16().await?;
    if command != COMMAND_CONNECT {
        return reply(&mut client, COMMAND_NOT_SUPPORTED).await;
    }
    let target = if address_type == ADDRESS_NAME {
        // A name with a colon is no name: refused like an unknown type.
        crate::parse_authority(&host, Some(port)).filter(|target| !target.host.contains(':'))
    } else {
        Some(Target { host, port })
    };
    let Some(target) = target.filter(|target| target.port != 0) else {
        return reply(&mut client, ADDRESS_TYPE_NOT_SUPPORTED).await;
    };
    match open(gate, tag, &target).await {
        Ok(mut upstream) => {
            reply(&mut client, SUCCEEDED).await?;
            let (sent, received) = relay(&mut client, &mut upstream).await;
            gate.record(ConnectionEvent::new(
                tag,
                Protocol::Socks5,
                target,
                Outcome::Closed { sent, received },
            ));
            Ok(())
        }
        Err(OpenError::Refused(refusal)) => {
            gate.record(ConnectionEvent::new(
                tag,
                Protocol::Socks5,
                target,
                Outcome::Refused(refusal),
            ));
            reply(&mut client, NOT_ALLOWED_BY_RULESET).await
        }
        Err(OpenError::Failed(error)) => {
            gate.record(ConnectionEvent::new(
                tag,
                Protocol::Socks5,
                target,
                Outcome::Failed { error },
            ));
            reply(&mut client, HOST_UNREACHABLE).await
        }
    }
}

/// A reply with an empty IPv4 bound address (clients ignore it for CONNECT).
async fn reply(client: &mut TcpStream, code: u8) -> std::io::Result<()> {
    client
        .write_all(&[VERSION, code, 0, ADDRESS_V4, 0, 0, 0, 0, 0, 0])
        .await?;
    if code != SUCCEEDED {
        client.shutdown().await?;
    }
    Ok(())
}
