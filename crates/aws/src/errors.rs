//! Classification of SDK errors into [`CloudError`], and the retry rule: only idempotent calls
//! (reads, deletes, "ensure" calls) are retried here; a create is never repeated blindly — the
//! engine looks the resource up before acting again.

use std::future::Future;
use std::time::Duration;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use cloud::CloudError;

/// Error codes that mean "try again later" across AWS services.
const TRANSIENT_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServerException",
    "ServiceException",
    "RequestTimeout",
    "RequestTimeoutException",
];

use cloud::retry::IDEMPOTENT_ATTEMPTS;

/// Turns an SDK error into the port's error, keeping the AWS code and message.
pub fn cloud_err<E>(service: &str, operation: &str, err: SdkError<E, HttpResponse>) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => CloudError::new(
            service,
            operation,
            "NetworkFailure",
            format!("{}", DisplayChain(&err)),
        )
        .retryable(),
        SdkError::ConstructionFailure(_) => CloudError::new(
            service,
            operation,
            "InvalidRequest",
            format!("{}", DisplayChain(&err)),
        ),
        _ => match err.code() {
            Some(code) => {
                let message = err.message().unwrap_or("").to_string();
                let transient = TRANSIENT_CODES.contains(&code) || status.is_some_and(|s| s >= 500);
                let e = CloudError::new(service, operation, code, message);
                if transient {
                    e.retryable()
                } else {
                    e
                }
            }
            // No code: an endpoint that does not implement the operation, a proxy, or an
            // unparseable body. Only gateway-style statuses are worth repeating.
            None => {
                let e = CloudError::new(
                    service,
                    operation,
                    "UnrecognizedResponse",
                    format!(
                        "HTTP {}: the service answered without an AWS error code ({})",
                        status.map(|s| s.to_string()).unwrap_or_else(|| "?".into()),
                        DisplayChain(&err)
                    ),
                );
                if matches!(status, Some(502..=504)) {
                    e.retryable()
                } else {
                    e
                }
            }
        },
    }
}

struct DisplayChain<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

/// Runs a call that is safe to repeat, retrying transient failures with exponential backoff.
pub async fn idempotent<T, E, F, Fut>(
    service: &str,
    operation: &str,
    mut call: F,
) -> Result<T, CloudError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let mut attempt = 0;
    let metrics = cloud::metrics::global();
    loop {
        match call().await {
            Ok(v) => {
                metrics.cloud_call(service, operation, Ok(()));
                return Ok(v);
            }
            Err(e) => {
                let err = cloud_err(service, operation, e);
                metrics.cloud_call(service, operation, Err(&err));
                attempt += 1;
                if !err.retryable || attempt >= IDEMPOTENT_ATTEMPTS {
                    return Err(err);
                }
                metrics.retried("sdk", Some(&err));
                tokio::time::sleep(Duration::from_millis(200) * 2u32.pow(attempt)).await;
            }
        }
    }
}

/// Runs a call exactly once (creates): its failure is reported, never repeated here.
pub async fn once<T, E>(
    service: &str,
    operation: &str,
    call: impl Future<Output = Result<T, SdkError<E, HttpResponse>>>,
) -> Result<T, CloudError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let result = call.await.map_err(|e| cloud_err(service, operation, e));
    cloud::metrics::global().cloud_call(service, operation, result.as_ref().map(|_| ()));
    result
}

/// Whether an error means the thing is already gone (for deletes and lookups).
pub fn is_not_found(e: &CloudError) -> bool {
    e.code.ends_with(".NotFound")
        || e.code.ends_with("NotFound")
        || e.code.ends_with("NotFoundException")
        || matches!(
            e.code.as_str(),
            "NoSuchEntity" | "NoSuchBucket" | "NoSuchResourceException" | "ResourceNotFound"
        )
}
