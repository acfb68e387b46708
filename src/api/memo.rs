//! Answers serialized once per change and served as the same bytes to every reader: each
//! cluster's status by its view's ETag, and pages of the lists by the store's revision.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use axum::body::Bytes;
use axum::http::header::{CONTENT_TYPE, LINK};
use axum::http::HeaderValue;
use axum::response::{IntoResponse as _, Response};
use serde::Serialize;

use crate::error::ApiResult;

/// The memo never holds more answers than this: its keys come from requests.
const MAX_ENTRIES: usize = 256;

/// Serialized answers by key, each with the version it was built from.
#[derive(Default)]
pub struct Memo(Mutex<HashMap<String, Entry>>);

struct Entry {
    version: String,
    body: Bytes,
    next: Option<String>,
}

impl Memo {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The body (and next page) of `key` at `version`: not the version string, which the
    /// caller has (a hit on every poll costs no copy of it).
    fn get(&self, key: &str, version: &str) -> Option<(Bytes, Option<String>)> {
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

    /// The bytes of `key` at `version`, serializing `make()` only when the version moved.
    pub fn bytes(
        &self,
        key: &str,
        version: &str,
        make: impl FnOnce() -> anyhow::Result<Vec<u8>>,
    ) -> anyhow::Result<Bytes> {
        if let Some((body, _)) = self.get(key, version) {
            return Ok(body);
        }
        let body = Bytes::from(make()?);
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
        make: impl std::future::Future<Output = ApiResult<(T, Option<String>)>>,
    ) -> ApiResult<Response> {
        let version = revision.to_string();
        let (body, next) = match self.get(key, &version) {
            Some(hit) => hit,
            None => {
                let (list, next) = make.await?;
                let body = Bytes::from(serde_json::to_vec(&list).map_err(anyhow::Error::from)?);
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
        Ok(paged(body, next))
    }
}

/// A JSON list answer, with `Link: <…>; rel="next"` when more follow.
fn paged(body: Bytes, next: Option<String>) -> Response {
    let json = (CONTENT_TYPE, HeaderValue::from_static("application/json"));
    match next {
        Some(url) => match HeaderValue::try_from(format!("<{url}>; rel=\"next\"")) {
            Ok(link) => ([json, (LINK, link)], body).into_response(),
            Err(_) => ([json], body).into_response(),
        },
        None => ([json], body).into_response(),
    }
}
