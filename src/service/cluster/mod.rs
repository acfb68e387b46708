//! The cluster: what a request to make, import or change one carries (`requests`), its
//! validation into stage parameters (`params`, `validate/`), the advice before it is made
//! (`preflight`), its address plan (`subnets`), its record (`records`), what is read of it and
//! of its operations (`views`) and what it runs beside what it could (`versions`).

pub mod start;

pub mod live;
pub mod params;
pub mod preflight;
pub mod records;
pub mod requests;
pub mod subnets;
pub mod upgrade;
pub mod validate;
pub mod versions;
pub mod views;

pub use params::*;
pub use preflight::*;
pub use records::*;
pub use requests::*;
pub use views::*;
