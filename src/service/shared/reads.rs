//! Reads made while answering a request (validating a zone, an instance type, a plan), retried
//! briefly through throttling and other transient faults so a user never sees a 503 for the
//! cloud's hiccup. Brief: about a second in all, since someone is waiting for the answer.

use std::future::Future;
use std::time::Duration;

use crate::cloud::CloudResult;

/// Attempts in all, the first included.
const ATTEMPTS: u32 = 4;

/// Runs `call` until it succeeds, fails for good, or has been tried [`ATTEMPTS`] times, waiting
/// 50, 100, 200 ms (each with up to half again of jitter) between tries.
pub async fn retrying<T, F, Fut>(call: F) -> CloudResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = CloudResult<T>>,
{
    crate::cloud::retry::with_backoff(ATTEMPTS, Duration::from_millis(50), "request", call).await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::cloud::CloudError;

    fn throttled() -> CloudError {
        CloudError::new(
            "ec2",
            "DescribeAvailabilityZones",
            "ThrottlingException",
            "Rate exceeded",
        )
        .retryable()
    }

    #[tokio::test]
    async fn a_throttled_read_is_tried_again_until_it_answers() {
        let calls = AtomicU32::new(0);
        let r = retrying(|| async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(throttled())
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_refusal_is_not_retried_and_a_lasting_fault_ends() {
        let calls = AtomicU32::new(0);
        let r: CloudResult<()> = retrying(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CloudError::new(
                "ec2",
                "DescribeAvailabilityZones",
                "UnauthorizedOperation",
                "no",
            ))
        })
        .await;
        assert_eq!(r.unwrap_err().code, "UnauthorizedOperation");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        calls.store(0, Ordering::SeqCst);
        let r: CloudResult<()> = retrying(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(throttled())
        })
        .await;
        assert!(r.unwrap_err().retryable);
        assert_eq!(calls.load(Ordering::SeqCst), ATTEMPTS);
    }
}
