//! Who may use the page: every request must name the listening address in `Host` (a page of
//! another site whose name was rebound to 127.0.0.1 does not) and carry the token — in the URL
//! `ckpt ui` printed, then in a cookie the browser sends to this port's page alone
//! (`SameSite=Strict`, `HttpOnly`). A request that changes files must also come from the page
//! itself: JSON (which a cross-site form cannot send), with no foreign `Origin` or
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

    /// The address to open: the page, with the token.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/?token={}", self.port, self.token)
    }

    /// The cookie's name: one per port, as browsers share cookies between a host's ports.
    fn cookie(&self) -> String {
        format!("ckpt_ui_{}", self.port)
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

    /// Whether the request carries the token, and whether in its URL (then the answer sets
    /// the cookie, so that the page's own requests carry it).
    fn token(&self, req: &Request) -> (bool, bool) {
        let in_query = req.uri().query().is_some_and(|query| {
            query
                .split('&')
                .filter_map(|pair| pair.strip_prefix("token="))
                .any(|given| same(given, &self.token))
        });
        let cookie = self.cookie();
        let in_cookie = req
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, given)| name == cookie && same(given, &self.token));
        (in_query || in_cookie, in_query)
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
    let (has_token, in_query) = access.token(&req);
    if !has_token {
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
    let headers = response.headers_mut();
    secure(headers);
    if in_query {
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            access.cookie(),
            access.token
        );
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            headers.append(header::SET_COOKIE, value);
        }
    }
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
