//! The sandbox's release files: a stand-in CRD for each `<group>_<plural>.yaml` asked for (name,
//! group and plural from the file name, a schema that accepts anything), so dependency stages run
//! without the internet. A configured mirror replaces this with the real files.

use async_trait::async_trait;

use cloud::{CloudError, CloudResult, Releases};

pub struct StandIns;

#[async_trait]
impl Releases for StandIns {
    async fn fetch(&self, _base: &str, file: &str) -> CloudResult<String> {
        let Some((group, plural)) = file.strip_suffix(".yaml").and_then(|f| f.split_once('_'))
        else {
            return Err(CloudError::new(
                "https",
                "GetReleaseFile",
                "Http404",
                format!("{file}: not a <group>_<plural>.yaml CRD file"),
            ));
        };
        let singular = plural.strip_suffix('s').unwrap_or(plural);
        let kind: String = singular
            .chars()
            .enumerate()
            .map(|(i, c)| if i == 0 { c.to_ascii_uppercase() } else { c })
            .collect();
        Ok(format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{group}\nspec:\n  group: {group}\n  names:\n    plural: {plural}\n    singular: {singular}\n    kind: {kind}\n  scope: Namespaced\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          x-kubernetes-preserve-unknown-fields: true\n"
        ))
    }
}
