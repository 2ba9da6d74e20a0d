//! Who may use the page: every request must name the listening address in `Host` (a page of
//! another site whose name was rebound to 127.0.0.1 does not), and every request for data or a
//! change (`/api/…`) must carry the token in an `Authorization: Bearer` header. The token never
//! travels in a cookie (a browser sends a cookie of 127.0.0.1 to every port of it, so to any
//! other local server) nor in a request's URL: the page's address carries it in its fragment,
//! which the browser keeps to itself, and the page's script sends it as that header. The
//! page's three files hold nothing of the user's and are served without it. A request that
//! changes files must also come from the page itself: JSON, with no foreign `Origin` or
//! `Sec-Fetch-Site`. Every answer carries a CSP that runs only the page's own script.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::client::ClientError;

/// The page's own files only: no inline script or style, nothing from elsewhere, not framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub struct Access {
    token: String,
    port: u16,
}

impl Access {
    /// A fresh random token for the page on `port`.
    pub fn new(port: u16) -> Result<Access, ClientError> {
        let mut bytes = [0u8; 24];
        let mut filled = 0;
        while filled < bytes.len() {
            filled += rustix::rand::getrandom(
                &mut bytes[filled..],
                rustix::rand::GetRandomFlags::empty(),
            )
            .map_err(|e| ClientError::Other(format!("no random token: {e}")))?;
        }
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Access { token, port })
    }

    /// The address to open: the page, with the token in its fragment (never sent to a server).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/#token={}", self.port, self.token)
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        [
            format!("127.0.0.1:{}", self.port),
            format!("localhost:{}", self.port),
        ]
        .iter()
        .any(|allowed| host.eq_ignore_ascii_case(allowed))
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let origin_ok = match headers.get(header::ORIGIN) {
            None => true,
            Some(origin) => [
                format!("http://127.0.0.1:{}", self.port),
                format!("http://localhost:{}", self.port),
            ]
            .iter()
            .any(|allowed| origin.as_bytes().eq_ignore_ascii_case(allowed.as_bytes())),
        };
        let site_ok = headers
            .get("sec-fetch-site")
            .is_none_or(|site| site == "same-origin" || site == "none");
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|t| t.to_str().ok())
            .is_some_and(|t| {
                t.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            });
        origin_ok && site_ok && json
    }

    /// Whether the request carries the token in its `Authorization` header.
    fn has_token(&self, req: &Request) -> bool {
        req.headers()
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.trim().strip_prefix("Bearer "))
            .any(|given| same(given.trim(), &self.token))
    }
}

/// Compares without stopping at the first difference.
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The middleware: refuses what the module's doc says, and adds the security headers.
pub async fn check(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    if !access.host_allowed(req.headers()) {
        return refuse(StatusCode::FORBIDDEN, "ckpt ui: unknown Host");
    }
    if req.uri().path().starts_with("/api/") && !access.has_token(&req) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "ckpt ui: open the URL `ckpt ui` printed (it carries the token)",
        );
    }
    let reads = matches!(*req.method(), Method::GET | Method::HEAD);
    if !reads && !access.origin_allowed(req.headers()) {
        return refuse(
            StatusCode::FORBIDDEN,
            "ckpt ui: changes are only made from the page itself",
        );
    }
    let mut response = next.run(req).await;
    secure(response.headers_mut());
    response
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    let mut response = (status, why).into_response();
    secure(response.headers_mut());
    response
}

fn secure(headers: &mut HeaderMap) {
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}
