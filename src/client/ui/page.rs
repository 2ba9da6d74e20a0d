//! The page's three files, compiled into the binary (no network needed, nothing fetched from
//! elsewhere): `assets/index.html`, `assets/app.js` (plain script: every text from the store is
//! put on the page as text, never parsed as markup) and `assets/app.css`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

pub async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

pub async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "ckpt ui: no such page").into_response()
}
