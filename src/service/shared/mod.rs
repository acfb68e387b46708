//! The leaves every topic of the domain shares, and none of them owns: the operation kinds
//! (`kind`), the one transaction that submits an operation (`submit`), what stages recorded on a
//! cluster (`resources`), the ARNs written into policies (`arn`), where in-cluster objects live
//! and their labels (`labels`), and reads retried through throttling (`reads`). They import no
//! topic.

pub mod arn;
pub mod kind;
pub mod labels;
pub mod reads;
pub mod resources;
pub mod submit;
