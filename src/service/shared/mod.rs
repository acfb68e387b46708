//! The leaves every topic of the domain shares, and none of them owns: the operation kinds
//! (`kind`), the one transaction that submits an operation (`submit`), what stages recorded on a
//! cluster (`resources`), the ARNs written into policies (`arn`), where in-cluster objects live
//! and their labels (`labels`), previews that note writes instead of making them (`preview`), reads retried through throttling (`reads`), and the random
//! secrets of sessions and tickets ([`new_secret`]). They import no topic.

pub mod arn;
pub mod kind;
pub mod labels;
pub mod preview;
pub mod reads;
pub mod resources;
pub mod submit;

/// 256 random bits as hex: a session's, a ticket's or an agent token's secret.
pub fn new_secret() -> String {
    use rand::RngCore as _;
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
