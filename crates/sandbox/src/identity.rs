//! The sandbox has no STS: nobody can sign in to it with an AWS identity. It refuses the call
//! as an account without STS would, so identities stay a deployment's choice (`--identity iam`
//! needs `--cloud aws`) and the sandbox stays the single-user default.

use async_trait::async_trait;
use cloud::identity::{Identity, PresignedCall, SignInIdentity};
use cloud::{CloudError, CloudResult};

use super::Sandbox;

#[async_trait]
impl Identity for Sandbox {
    async fn who_signed(
        &self,
        _call: &PresignedCall,
        _deployment: &str,
    ) -> CloudResult<SignInIdentity> {
        Err(CloudError::new(
            "sts",
            "GetCallerIdentity",
            "NotInSandbox",
            "the sandbox has no STS: signing in with an AWS identity needs --cloud aws",
        ))
    }
}
