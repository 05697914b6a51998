//! The gateway's server and its pass-through: one hyper HTTP/1 connection per client, each
//! request checked (path, token, limits, the provider's hold), sent upstream with the
//! provider's key through hyper-util's client (rustls), and the answer streamed back frame by
//! frame through a [`Metered`] body that reads its usage on the way.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::{Shared, Tab, hold};
use crate::edge::github::error_chain;
use crate::edge::lock::held;
use crate::pure::gateway::meter::{self, Meter};
use crate::pure::gateway::{Provider, Refused, Route};

type Out = BoxBody<Bytes, hyper::Error>;
type UpstreamClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Incoming>;

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1), and `host`.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-connection",
    "proxy-authenticate",
    "host",
];

/// Accepts connections until the gateway is dropped.
pub(super) async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let client = match client() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            tracing::warn!("dagexec's gateway cannot start its client: {e}");
            return;
        }
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // Small writes (a stream's events) go out at once, not held back by Nagle's
        // algorithm until the client acknowledges the previous ones.
        let _ = stream.set_nodelay(true);
        let (shared, client) = (shared.clone(), client.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let (shared, client) = (shared.clone(), client.clone());
                async move { Ok::<_, std::convert::Infallible>(handle(&shared, &client, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The upstream client: HTTPS with the system's roots (ring), or plain HTTP for a base URL
/// that says so (a local model server).
fn client() -> std::io::Result<UpstreamClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

fn refuse(provider: Option<Provider>, refused: &Refused) -> Response<Out> {
    let (status, body) = crate::pure::gateway::refusal(provider, refused);
    let mut r = Response::new(
        http_body_util::Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// One request: checked, held, forwarded, metered.
async fn handle(
    shared: &Arc<Shared>,
    client: &UpstreamClient,
    req: Request<Incoming>,
) -> Response<Out> {
    match admit(shared, &req).await {
        Ok((route, tab, model_call)) => {
            let provider = route.provider;
            forward(shared, client, req, route, tab, model_call)
                .await
                .unwrap_or_else(|refused| refuse(Some(provider), &refused))
        }
        Err(refused) => refused,
    }
}

/// The request's route and attempt, once its path, its token, the provider's hold and the
/// attempt's limits let it pass; whether it is a model call.
async fn admit(
    shared: &Arc<Shared>,
    req: &Request<Incoming>,
) -> Result<(Route, Arc<Tab>, bool), Response<Out>> {
    let pq = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let route = crate::pure::gateway::route(&pq).map_err(|r| refuse(None, &r))?;
    let provider = route.provider;
    let query_key = crate::pure::gateway::without_key_param(&pq).1;
    let headers = req.headers().iter();
    let headers = headers.map(|(n, v)| (n.as_str(), v.to_str().unwrap_or("")));
    let token = crate::pure::gateway::token_of(headers, query_key.as_deref());
    let tab = token.and_then(|t| held(&shared.tabs).get(t).cloned());
    let Some(tab) = tab else {
        return Err(refuse(Some(provider), &Refused::Token));
    };
    let model_call = provider.is_model_call(&route.rest);
    if model_call {
        let refused = |r: Refused| refuse(Some(provider), &r);
        wait_for_hold(shared, &tab, provider)
            .await
            .map_err(refused)?;
        let started = wait_for_window(shared, &tab, provider)
            .await
            .map_err(refused)?;
        // A request the limits refuse gives its place in the window back.
        if let Err(r) = admit_within_limits(shared, &tab, provider, true) {
            if let (Some(at), Some(w)) = (started, held(&shared.windows).get_mut(&provider)) {
                w.withdraw(at);
            }
            return Err(refused(r));
        }
    }
    Ok((route, tab, model_call))
}

/// Whether the attempt's limits (budgets, request cap) let one more model request start;
/// with `count`, it is counted as started in the same change of the tab (under its lock),
/// so requests arriving together with one left cannot both pass. A refusal is recorded.
fn admit_within_limits(
    shared: &Shared,
    tab: &Tab,
    provider: Provider,
    count: bool,
) -> Result<(), Refused> {
    tab.change(|s| {
        let admitted = shared.limits(tab).admit(s.requests);
        match &admitted {
            Ok(()) if count => s.requests += 1,
            Ok(()) => {}
            Err(refused) => s.refused = Some(message_of(provider, refused)),
        }
        admitted
    })
}

/// Sends the admitted request upstream with the provider's key and streams the answer back,
/// a model call's metered; why not when it cannot.
async fn forward(
    shared: &Arc<Shared>,
    client: &UpstreamClient,
    req: Request<Incoming>,
    Route { provider, rest }: Route,
    tab: Arc<Tab>,
    model_call: bool,
) -> Result<Response<Out>, Refused> {
    let Some(upstream) = shared.config.upstreams.0.get(&provider) else {
        return Err(Refused::Upstream("no upstream".into()));
    };
    let (parts, body) = req.into_parts();
    let parts = upstream_parts(parts, provider, upstream, &rest)?;
    let response = client
        .request(Request::from_parts(parts, body))
        .await
        .map_err(|e| {
            let why = error_chain(&e);
            Refused::Upstream(format!("cannot reach {}: {why}", upstream.base))
        })?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(hyper::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok());
    if status == 429 || status == 529 {
        let held = crate::pure::gateway::hold_of(status, retry_after, fastrand::f64());
        if let Some(d) = held {
            hold(shared, provider, d);
        }
        let until = held.and_then(|d| jiff::Timestamp::now().checked_add(d).ok());
        shared.rate_limited(&tab, provider, until);
    }
    let (mut parts, body) = response.into_parts();
    for name in HOP_BY_HOP {
        parts.headers.remove(name);
    }
    let body = if model_call && (200..300).contains(&status) {
        let content_type = parts.headers.get(hyper::header::CONTENT_TYPE);
        let content_type = content_type
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let kind = if content_type.contains("text/event-stream") {
            meter::Body::Events
        } else {
            meter::Body::Json
        };
        Metered {
            inner: body,
            meter: Meter::new(provider, kind),
            tab,
            shared: shared.clone(),
            last: meter::Reading::default(),
            done: false,
        }
        .boxed()
    } else {
        body.boxed()
    };
    Ok(Response::from_parts(parts, body))
}

/// The request's head as it goes to `upstream`: its URL, the hop-by-hop and key headers out,
/// the provider's key in.
fn upstream_parts(
    mut parts: hyper::http::request::Parts,
    provider: Provider,
    upstream: &super::Upstream,
    rest: &str,
) -> Result<hyper::http::request::Parts, Refused> {
    if upstream.key.is_none() && !upstream.keyless {
        return Err(Refused::Upstream(format!(
            "no {} key: set {} in dagexec's environment",
            provider.label(),
            upstream.key_var
        )));
    }
    let mut url = format!("{}{rest}", upstream.base);
    if !upstream.query.is_empty() {
        let sep = if rest.contains('?') { '&' } else { '?' };
        url = format!("{url}{sep}{}", upstream.query.expose());
    }
    parts.uri = url
        .parse()
        .map_err(|_| Refused::Upstream(format!("{} is not a URL", upstream.base)))?;
    for name in HOP_BY_HOP.iter().chain(&crate::pure::gateway::KEY_HEADERS) {
        parts.headers.remove(*name);
    }
    if let Some(key) = &upstream.key {
        let mut v = hyper::header::HeaderValue::from_str(key.value.expose()).map_err(|_| {
            Refused::Upstream(format!(
                "the {} key in dagexec's environment is not a valid header value",
                provider.label()
            ))
        })?;
        v.set_sensitive(true);
        parts.headers.insert(key.header, v);
    }
    // A user's Codex provider's own headers (`http_headers`, `env_http_headers`).
    for (name, value) in &upstream.headers {
        let bad = || {
            Refused::Upstream(format!(
                "the header {name:?} of the Codex configuration's provider is not a valid header"
            ))
        };
        let name = hyper::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let mut value = hyper::header::HeaderValue::from_str(value.expose()).map_err(|_| bad())?;
        value.set_sensitive(true);
        parts.headers.insert(name, value);
    }
    Ok(parts)
}

/// The message the agent got, for the attempt's record.
fn message_of(provider: Provider, refused: &Refused) -> String {
    match refused {
        Refused::Budget(m) => m.clone(),
        Refused::Requests(n) => {
            format!("the attempt made its {n} allowed model requests (max-requests)")
        }
        _ => crate::pure::gateway::refusal(Some(provider), refused).1,
    }
}

/// Waits while a provider's rate limit holds its requests (a hold set meanwhile is waited
/// out too).
async fn wait_for_hold(shared: &Shared, tab: &Tab, provider: Provider) -> Result<(), Refused> {
    loop {
        let until = held(&shared.holds).get(&provider).copied();
        let Some(until) = until.filter(|u| *u > Instant::now()) else {
            return Ok(());
        };
        // A request the limits refuse is answered at once, not after the wait.
        admit_within_limits(shared, tab, provider, false)?;
        tokio::time::sleep_until(until.into()).await;
    }
}

/// Waits while the provider's requests- and tokens-per-minute window holds its requests
/// (counting this one in once it lets it start: when, if the provider has a window); a
/// request the limits refuse is answered at once, not after the wait.
async fn wait_for_window(
    shared: &Shared,
    tab: &Tab,
    provider: Provider,
) -> Result<Option<Duration>, Refused> {
    loop {
        let now = shared.origin.elapsed();
        let admitted = held(&shared.windows)
            .get_mut(&provider)
            .map(|w| w.admit(now).map(|()| now));
        let Some(Err(wait)) = admitted else {
            return Ok(admitted.and_then(Result::ok));
        };
        admit_within_limits(shared, tab, provider, false)?;
        tokio::time::sleep(wait).await;
    }
}

/// A response body passed through frame by frame, its usage read on the way and added to
/// the attempt's tab as it grows.
struct Metered {
    inner: Incoming,
    meter: Meter,
    tab: Arc<Tab>,
    shared: Arc<Shared>,
    /// The reading the tab counts.
    last: meter::Reading,
    done: bool,
}

impl Metered {
    fn account(&mut self) {
        let now = self.meter.reading().clone();
        self.shared
            .count(&self.tab, self.meter.provider(), &self.last, &now);
        self.last = now;
    }
}

impl hyper::body::Body for Metered {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && this.meter.feed(data)
                {
                    this.account();
                }
                // hyper stops polling a body of known length after its last frame.
                this.inner.is_end_stream()
            }
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Pending => false,
        };
        if ended && !this.done {
            this.done = true;
            if this.meter.finish() {
                this.account();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
