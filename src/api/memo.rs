//! Answers serialized once per change and served as the same bytes to every reader: each
//! cluster's status by its view's ETag, and pages of the lists by the store's revision — also
//! gzip-encoded, once, for the clients that accept it (every browser polling a status does).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, LINK, VARY};
use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::{IntoResponse as _, Response};
use serde::Serialize;

use crate::error::ApiResult;

/// The memo never holds more answers than this: its keys come from requests.
const MAX_ENTRIES: usize = 256;

/// Smaller answers go plain: gzip's framing and the client's inflating cost more than they
/// save. (A 200-node status is 62 KB plain and 2 KB encoded: most of what an answer costs
/// here is the kernel copying its bytes, so the encoded one is cheaper to send as well.)
const GZIP_FROM: usize = 1024;

/// `Vary: accept-encoding`: on every memoized answer, and on a 304 standing for one.
pub const VARY_ENCODING: (axum::http::HeaderName, HeaderValue) =
    (VARY, HeaderValue::from_static("accept-encoding"));

/// Whether the request's `Accept-Encoding` takes gzip: listed (or `*`) and not with `q=0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AcceptsGzip(pub bool);

impl<S: Send + Sync> FromRequestParts<S> for AcceptsGzip {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let values = parts.headers.get_all(ACCEPT_ENCODING);
        let mut values = values.iter().filter_map(|v| v.to_str().ok());
        Ok(Self(values.any(accepts_gzip)))
    }
}

/// One `Accept-Encoding` value (RFC 9110 §12.5.3): gzip by name wins over `*`; a weight of
/// zero refuses.
fn accepts_gzip(value: &str) -> bool {
    let (mut gzip, mut any) = (None, false);
    for item in value.split(',') {
        let mut params = item.split(';');
        let coding = params.next().unwrap_or_default().trim();
        let refused = params.any(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
        });
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            gzip = Some(!refused);
        } else if coding == "*" {
            any = !refused;
        }
    }
    gzip.unwrap_or(any)
}

/// One answer's bytes, and their gzip encoding once a client asked for it.
pub struct Body {
    plain: Bytes,
    gzip: OnceLock<Option<Bytes>>,
}

impl Body {
    fn new(plain: Bytes) -> Arc<Self> {
        Arc::new(Self {
            plain,
            gzip: OnceLock::new(),
        })
    }

    /// The bytes to send, and whether they are gzip-encoded.
    fn encoded(&self, gzip: bool) -> (Bytes, bool) {
        if !gzip || self.plain.len() < GZIP_FROM {
            return (self.plain.clone(), false);
        }
        match self.gzip.get_or_init(|| compress(&self.plain)) {
            Some(encoded) => (encoded.clone(), true),
            None => (self.plain.clone(), false),
        }
    }

    /// A JSON answer of these bytes (gzip-encoded when `gzip` and worth it); `Vary` says the
    /// encoding follows the request's `Accept-Encoding`.
    pub fn response(&self, gzip: AcceptsGzip) -> Response {
        let (bytes, encoded) = self.encoded(gzip.0);
        let mut response = (
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            bytes,
        )
            .into_response();
        let headers = response.headers_mut();
        let (vary, encoding) = VARY_ENCODING;
        headers.insert(vary, encoding);
        if encoded {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        response
    }
}

/// `bytes` gzip-encoded (None if the encoder failed, and the answer goes plain).
fn compress(bytes: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 8),
        flate2::Compression::default(),
    );
    encoder.write_all(bytes).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

/// Serialized answers by key, each with the version it was built from.
#[derive(Default)]
pub struct Memo(Mutex<HashMap<String, Entry>>);

struct Entry {
    version: String,
    body: Arc<Body>,
    next: Option<String>,
}

impl Memo {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The body (and next page) of `key` at `version`: not the version string, which the
    /// caller has (a hit on every poll costs no copy of it).
    fn get(&self, key: &str, version: &str) -> Option<(Arc<Body>, Option<String>)> {
        self.lock()
            .get(key)
            .filter(|e| e.version == version)
            .map(|e| (e.body.clone(), e.next.clone()))
    }

    fn put(&self, key: &str, entry: Entry) {
        let mut map = self.lock();
        if map.len() >= MAX_ENTRIES && !map.contains_key(key) {
            map.clear();
        }
        map.insert(key.to_string(), entry);
    }

    /// The answer of `key` at `version`, serializing `make()` only when the version moved.
    pub fn body(
        &self,
        key: &str,
        version: &str,
        make: impl FnOnce() -> anyhow::Result<Vec<u8>>,
    ) -> anyhow::Result<Arc<Body>> {
        if let Some((body, _)) = self.get(key, version) {
            return Ok(body);
        }
        let body = Body::new(Bytes::from(make()?));
        self.put(
            key,
            Entry {
                version: version.to_string(),
                body: body.clone(),
                next: None,
            },
        );
        Ok(body)
    }

    /// A page of a list at the store's `revision` (read before `make` runs, so an answer
    /// built while a write commits is kept under the older revision and never served again).
    pub async fn page<T: Serialize>(
        &self,
        key: &str,
        revision: u64,
        gzip: AcceptsGzip,
        make: impl std::future::Future<Output = ApiResult<(T, Option<String>)>>,
    ) -> ApiResult<Response> {
        let version = revision.to_string();
        let (body, next) = match self.get(key, &version) {
            Some(hit) => hit,
            None => {
                let (body, next) = built(make).await?;
                self.put(
                    key,
                    Entry {
                        version,
                        body: body.clone(),
                        next: next.clone(),
                    },
                );
                (body, next)
            }
        };
        Ok(answered(body, next, gzip))
    }

    /// A page built for one caller and kept for nobody (it differs by who asks).
    pub async fn unmemoized<T: Serialize>(
        gzip: AcceptsGzip,
        make: impl std::future::Future<Output = ApiResult<(T, Option<String>)>>,
    ) -> ApiResult<Response> {
        let (body, next) = built(make).await?;
        Ok(answered(body, next, gzip))
    }
}

async fn built<T: Serialize>(
    make: impl std::future::Future<Output = ApiResult<(T, Option<String>)>>,
) -> ApiResult<(std::sync::Arc<Body>, Option<String>)> {
    let (list, next) = make.await?;
    let body = serde_json::to_vec(&list).map_err(anyhow::Error::from)?;
    Ok((Body::new(Bytes::from(body)), next))
}

/// The page, with `Link: <…>; rel="next"` when more follow.
fn answered(body: std::sync::Arc<Body>, next: Option<String>, gzip: AcceptsGzip) -> Response {
    let mut response = body.response(gzip);
    if let Some(link) =
        next.and_then(|url| HeaderValue::try_from(format!("<{url}>; rel=\"next\"")).ok())
    {
        response.headers_mut().insert(LINK, link);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_when_listed_or_starred_and_not_weighed_zero() {
        for (value, takes) in [
            ("gzip, deflate, br, zstd", true),
            ("GZIP", true),
            ("x-gzip", true),
            ("br;q=1.0, gzip;q=0.8", true),
            ("*", true),
            ("identity", false),
            ("", false),
            ("gzip;q=0", false),
            ("gzip; q=0.000", false),
            ("gzip;q=0, *", false),
            ("*;q=0", false),
            ("br, *;q=0.1", true),
            ("gzip;q=not-a-number", true),
        ] {
            assert_eq!(accepts_gzip(value), takes, "{value:?}");
        }
    }

    fn inflate(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out).unwrap();
        out
    }

    #[test]
    fn an_answer_is_encoded_once_and_only_when_worth_it() {
        let big = Body::new(Bytes::from(vec![b'x'; 4 * GZIP_FROM]));
        let (first, encoded) = big.encoded(true);
        assert!(encoded);
        assert_eq!(inflate(&first), vec![b'x'; 4 * GZIP_FROM]);
        // The same bytes for the next reader: encoded once, not per request.
        let (again, _) = big.encoded(true);
        assert_eq!(again.as_ptr(), first.as_ptr());
        assert_eq!(big.encoded(false), (big.plain.clone(), false));
        let small = Body::new(Bytes::from_static(b"[]"));
        assert_eq!(small.encoded(true), (Bytes::from_static(b"[]"), false));
        let response = big.response(AcceptsGzip(true));
        assert_eq!(response.headers()[CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[VARY], "accept-encoding");
        assert!(small
            .response(AcceptsGzip(true))
            .headers()
            .get(CONTENT_ENCODING)
            .is_none());
    }
}
