//! The egress proxy: an HTTP proxy on 127.0.0.1 inside dagexec that lets the agent reach
//! the listed hosts only — `CONNECT host:443` tunnels and plain `http://` requests to port
//! 80 — resolving each name itself and connecting only to a public address that is not
//! this machine's, so a listed name that resolves to a service of the runner is refused.
//! Every host it refused is recorded by name, with why.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use crate::edge::lock::held;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::pure::egress::{Hosts, ProxyRequest, Refusal, public};

/// A request head larger than this is refused.
const HEAD_MAX: usize = 16 * 1024;
/// How many refused hosts are recorded (the first ones).
const RECORDED_MAX: usize = 100;
/// How long a client may take to send its request head, a name to resolve, a server to
/// accept the connection.
const WAIT: Duration = Duration::from_secs(20);

/// What the proxy saw: the hosts it connected to (how many times) and those it refused (why).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyLog {
    pub reached: BTreeMap<String, u32>,
    pub refused: BTreeMap<String, String>,
}

/// The running proxy; dropping it stops it.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    /// What it saw, as it grows.
    pub(super) record: Arc<Mutex<ProxyLog>>,
    server: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on 127.0.0.1 and a free port, admitting `hosts`. Call inside a tokio runtime.
    pub async fn start(hosts: Hosts) -> std::io::Result<Proxy> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let record = Arc::new(Mutex::new(ProxyLog::default()));
        let server = tokio::spawn(serve(listener, Arc::new(hosts), record.clone()));
        Ok(Proxy {
            addr,
            record,
            server,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What it saw so far.
    pub fn record(&self) -> ProxyLog {
        held(&self.record).clone()
    }

    /// The variables that send task code's web requests through it, in both cases (tools
    /// read either), loopback excepted (the model gateway is reached directly); Node's own
    /// `fetch` follows them with `NODE_USE_ENV_PROXY`.
    pub fn env(&self) -> Vec<(String, String)> {
        let (url, local) = (self.url(), "127.0.0.1,localhost,::1");
        let mut env = Vec::new();
        for (k, v) in [
            ("HTTPS_PROXY", &*url),
            ("HTTP_PROXY", &url),
            ("NO_PROXY", local),
        ] {
            env.push((k.to_string(), v.to_string()));
            env.push((k.to_ascii_lowercase(), v.to_string()));
        }
        env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
        env
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(listener: tokio::net::TcpListener, hosts: Arc<Hosts>, record: Arc<Mutex<ProxyLog>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (hosts, record) = (hosts.clone(), record.clone());
        tokio::spawn(async move {
            let _ = handle(stream, &hosts, &record).await;
        });
    }
}

/// Reads the request head (up to its blank line): the head and the bytes already sent after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok((buf, rest));
        }
        if buf.len() > HEAD_MAX {
            return Err(std::io::Error::other("request head too large"));
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// An answer that ends the connection.
async fn answer(client: &mut TcpStream, status: &str, text: &str) -> std::io::Result<()> {
    let body = format!("dagexec's egress proxy: {text}\n");
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

/// Records that `name` was refused, and tells the client.
async fn refuse(
    client: &mut TcpStream,
    record: &Mutex<ProxyLog>,
    name: String,
    why: &Refusal,
) -> std::io::Result<()> {
    let text = format!(
        "{name} refused: {why}. The agent reaches only the hosts of the action's egress input."
    );
    {
        let mut r = held(record);
        if r.refused.len() < RECORDED_MAX || r.refused.contains_key(&name) {
            r.refused.insert(name, why.to_string());
        }
    }
    answer(client, "403 Forbidden", &text).await
}

/// Whether `ip` is an address of this machine: binding a socket to it succeeds only then.
fn own_address(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

async fn handle(
    mut client: TcpStream,
    hosts: &Hosts,
    record: &Mutex<ProxyLog>,
) -> std::io::Result<()> {
    let (head, rest) = tokio::time::timeout(WAIT, read_head(&mut client))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let req = match ProxyRequest::parse(&head) {
        Ok(r) => r,
        Err(why) => return answer(&mut client, "400 Bad Request", &why).await,
    };
    let name = match hosts.admit(&req.host, req.port) {
        Ok(n) => n,
        Err((name, why)) => return refuse(&mut client, record, name, &why).await,
    };
    let addrs: Vec<SocketAddr> = match tokio::time::timeout(
        WAIT,
        tokio::net::lookup_host((name.as_str(), req.port)),
    )
    .await
    {
        Ok(Ok(a)) => a.collect(),
        _ => Vec::new(),
    };
    if addrs.is_empty() {
        return refuse(&mut client, record, name, &Refusal::Unresolved).await;
    }
    // Every address the name resolved to must be public: a name resolving to this machine
    // or a private network among others is not tried at all.
    if let Some(a) = addrs
        .iter()
        .find(|a| !public(a.ip()) || own_address(a.ip()))
    {
        return refuse(&mut client, record, name, &Refusal::Private(a.ip())).await;
    }
    let mut server = None;
    for a in &addrs {
        if let Ok(Ok(s)) = tokio::time::timeout(WAIT, TcpStream::connect(a)).await {
            server = Some(s);
            break;
        }
    }
    let Some(mut server) = server else {
        let text = format!("cannot connect to {name} port {}", req.port);
        return answer(&mut client, "502 Bad Gateway", &text).await;
    };
    *held(record).reached.entry(name).or_default() += 1;
    if req.tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await?;
    } else {
        server.write_all(&req.forward).await?;
    }
    server.write_all(&rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `head` to the proxy and reads its whole answer.
    async fn ask(proxy: &Proxy, head: &str) -> String {
        let mut s = TcpStream::connect(proxy.addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn the_proxy_refuses_unlisted_hosts_and_names_that_resolve_to_this_machine() {
        let hosts =
            match crate::pure::egress::EgressSetting::parse("localhost, 127.0.0.1, pypi.org")
                .unwrap()
            {
                crate::pure::egress::EgressSetting::On(h) => h,
                crate::pure::egress::EgressSetting::Off => unreachable!(),
            };
        let proxy = Proxy::start(hosts).await.unwrap();
        // A listener of this machine the agent would like to reach through a listed name.
        let local = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = local.local_addr().unwrap().port();
        let unlisted = ask(&proxy, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n").await;
        assert!(unlisted.starts_with("HTTP/1.1 403 "), "{unlisted}");
        assert!(unlisted.contains("evil.example refused: not on the egress list"));
        let port_refused = ask(
            &proxy,
            &format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(
            port_refused.contains(&format!("port {port} (only 443")),
            "{port_refused}"
        );
        let listed = ask(&proxy, "CONNECT localhost:443 HTTP/1.1\r\n\r\n").await;
        assert!(listed.starts_with("HTTP/1.1 403 "), "{listed}");
        let literal = ask(&proxy, "GET http://127.0.0.1/x HTTP/1.1\r\n\r\n").await;
        assert!(
            literal.contains("127.0.0.1 refused: it resolves to 127.0.0.1"),
            "{literal}"
        );
        let bad = ask(&proxy, "BREW /pot HTCPCP/1.0\r\n\r\n").await;
        assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
        let record = proxy.record();
        assert!(record.reached.is_empty(), "{record:?}");
        assert_eq!(
            record.refused.keys().collect::<Vec<_>>(),
            ["127.0.0.1", "evil.example", "localhost"]
        );
        assert!(
            record.refused["localhost"].contains("resolves to"),
            "{record:?}"
        );
    }

    #[test]
    fn this_machines_addresses_are_its_own() {
        assert!(own_address("127.0.0.1".parse().unwrap()));
        assert!(!own_address("203.0.113.254".parse().unwrap()));
    }
}
