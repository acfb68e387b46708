//! Upstream release files (CustomResourceDefinitions of a pinned operator release), fetched by
//! the server itself: never by helm, a shell or the cluster.

use async_trait::async_trait;

use crate::CloudResult;

#[async_trait]
pub trait Releases: Send + Sync {
    /// The text of `file` from the release at `base` (an HTTPS URL), or from the configured
    /// mirror, which holds the same file names.
    async fn fetch(&self, base: &str, file: &str) -> CloudResult<String>;
}
