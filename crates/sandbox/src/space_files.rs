//! What a sandbox pod reads and writes. A space's: its home volume, kept across stop and start
//! and gone with its Workspace (the add-on's home claim belongs to the Workspace), and each claim
//! it mounts. An S3 claim is the bucket and prefix its PersistentVolume names, as Mountpoint
//! mounts them, so a file saved at `/s3/code/train.py` is the very object a training pod reads
//! there. A model download's: the model's files under its `TARGET`, once the Job has run.

use serde_json::{json, Value};

use super::workload::object_key;
use super::{internal, now_ms, Sandbox};
use cloud::{CloudResult, KubeTarget, ObjectRef, ObjectStore as _};

/// Mountpoint's mount option for mounting only the keys under a prefix.
const MOUNT_PREFIX_OPTION: &str = "prefix ";
const FILE: &str = "volume-file";

/// What backs a mount: S3 keys, or a block volume's files (kept here by volume).
#[derive(Clone, Debug, PartialEq)]
enum Backing {
    Bucket { bucket: String, prefix: String },
    Volume(String),
}

#[derive(Clone, Debug)]
struct Mount {
    /// Where the pod sees it, e.g. `/s3`.
    path: String,
    backing: Backing,
}

/// A path as a pod would read it: a file's text, or a directory's entries `(name, is_dir)`.
#[derive(Debug, PartialEq)]
pub(super) enum Entry {
    File(String),
    Dir(Vec<(String, bool)>),
}

/// The file system a space's pod sees.
#[derive(Clone)]
pub(super) struct SpaceFiles {
    sandbox: Sandbox,
    mounts: Vec<Mount>,
}

/// The home volume of a Workspace: one per space, whatever its pod.
fn home_volume(target: &KubeTarget, namespace: &str, name: &str) -> String {
    format!("home:{}/{namespace}/{name}/", target.cluster)
}

/// Splits `path` into the mount it falls in and the rest, the longest mount first.
fn resolve<'a>(mounts: &'a [Mount], path: &str) -> Option<(&'a Mount, String)> {
    let path = path.trim_end_matches('/');
    mounts
        .iter()
        .filter_map(|m| {
            let rest = path.strip_prefix(m.path.trim_end_matches('/'))?;
            (rest.is_empty() || rest.starts_with('/'))
                .then(|| (m, rest.trim_start_matches('/').to_string()))
        })
        .max_by_key(|(m, _)| m.path.len())
}

/// The entries directly under `dir` (`""` or ending in `/`) among `paths`.
fn children<'a>(dir: &str, paths: impl Iterator<Item = &'a str>) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = paths
        .filter_map(|p| p.strip_prefix(dir))
        .filter(|rest| !rest.is_empty())
        .map(|rest| match rest.split_once('/') {
            Some((first, _)) => (first.to_string(), true),
            None => (rest.to_string(), false),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl SpaceFiles {
    /// The file system of `workspace`'s pod: its home at `spec.storage.mountPath`, and each of
    /// `spec.volumes` as its claim is bound.
    pub(super) async fn of(
        sandbox: &Sandbox,
        target: &KubeTarget,
        workspace: &Value,
    ) -> CloudResult<Self> {
        let namespace = workspace["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let name = workspace["metadata"]["name"].as_str().unwrap_or_default();
        let mut mounts = vec![];
        if let Some(home) = workspace
            .pointer("/spec/storage/mountPath")
            .and_then(Value::as_str)
        {
            mounts.push(Mount {
                path: home.to_string(),
                backing: Backing::Volume(home_volume(target, namespace, name)),
            });
        }
        for v in workspace["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (Some(path), Some(claim)) = (
                v["mountPath"].as_str(),
                v["persistentVolumeClaimName"].as_str(),
            ) else {
                continue;
            };
            let backing = sandbox
                .bucket_of(target, namespace, claim)
                .await?
                .unwrap_or_else(|| {
                    Backing::Volume(format!("pvc:{}/{namespace}/{claim}/", target.cluster))
                });
            mounts.push(Mount {
                path: path.to_string(),
                backing,
            });
        }
        Ok(Self {
            sandbox: sandbox.clone(),
            mounts,
        })
    }

    /// A file's text or a directory's entries; `None` where nothing is.
    pub(super) async fn read(&self, path: &str) -> CloudResult<Option<Entry>> {
        let Some((mount, rest)) = resolve(&self.mounts, path) else {
            // Above the mounts: the directories that lead to them.
            let dir = format!("{}/", path.trim_end_matches('/'));
            let paths: Vec<String> = self.mounts.iter().map(|m| format!("{}/", m.path)).collect();
            let entries = children(&dir, paths.iter().map(String::as_str));
            return Ok((!entries.is_empty()).then_some(Entry::Dir(entries)));
        };
        let dir = if rest.is_empty() {
            String::new()
        } else {
            format!("{rest}/")
        };
        match &mount.backing {
            Backing::Bucket { bucket, prefix } => {
                let key = format!("{prefix}{rest}");
                if !rest.is_empty() {
                    if let Some(o) = self
                        .sandbox
                        .by_name("s3-object", &format!("{bucket}/{key}"))
                        .await?
                        .filter(|r| r.deleted_ms.is_none())
                        .filter(|r| r.data["visibleMs"].as_i64().is_none_or(|at| at <= now_ms()))
                    {
                        return Ok(Some(Entry::File(
                            o.data["body"].as_str().unwrap_or_default().to_string(),
                        )));
                    }
                }
                let keys = self
                    .sandbox
                    .list_objects(bucket, &format!("{prefix}{dir}"))
                    .await?;
                let keys: Vec<&str> = keys
                    .iter()
                    .filter_map(|k| k.strip_prefix(prefix.as_str()))
                    .collect();
                let entries = children(&dir, keys.into_iter());
                Ok((rest.is_empty() || !entries.is_empty()).then_some(Entry::Dir(entries)))
            }
            Backing::Volume(volume) => {
                let files = self.sandbox.volume_files(volume).await?;
                if let Some((_, body)) = files.iter().find(|(p, _)| *p == rest) {
                    return Ok(Some(Entry::File(body.clone())));
                }
                let entries = children(&dir, files.iter().map(|(p, _)| p.as_str()));
                Ok((rest.is_empty() || !entries.is_empty()).then_some(Entry::Dir(entries)))
            }
        }
    }

    /// Saves a file; `false` where no volume is mounted (the image's own files are read-only).
    pub(super) async fn write(&self, path: &str, text: &str) -> CloudResult<bool> {
        let Some((mount, rest)) = resolve(&self.mounts, path).filter(|(_, r)| !r.is_empty()) else {
            return Ok(false);
        };
        match &mount.backing {
            Backing::Bucket { bucket, prefix } => {
                // Mountpoint writes a new file as one PutObject, with the pod's role.
                self.sandbox
                    .put_object(bucket, &format!("{prefix}{rest}"), text.as_bytes().to_vec())
                    .await?;
            }
            Backing::Volume(volume) => self.sandbox.write_volume_file(volume, &rest, text).await?,
        }
        Ok(true)
    }
}

impl Sandbox {
    /// The bucket and prefix an S3 claim is bound to, read from its PersistentVolume.
    async fn bucket_of(
        &self,
        target: &KubeTarget,
        namespace: &str,
        claim: &str,
    ) -> CloudResult<Option<Backing>> {
        let object = |kind: &str, namespace: Option<&str>, name: &str| ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            name: name.into(),
        };
        let pvc = object("PersistentVolumeClaim", Some(namespace), claim);
        let Some(pvc) = self
            .by_name("k8s-object", &object_key(target, &pvc))
            .await?
        else {
            return Ok(None);
        };
        let Some(volume) = pvc.data.pointer("/spec/volumeName").and_then(Value::as_str) else {
            return Ok(None);
        };
        let pv = object("PersistentVolume", None, volume);
        let Some(pv) = self.by_name("k8s-object", &object_key(target, &pv)).await? else {
            return Ok(None);
        };
        let csi = &pv.data["spec"]["csi"];
        if csi["driver"] != "s3.csi.aws.com" {
            return Ok(None);
        }
        let Some(bucket) = csi["volumeAttributes"]["bucketName"].as_str() else {
            return Ok(None);
        };
        let prefix = pv.data["spec"]["mountOptions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|o| o.strip_prefix(MOUNT_PREFIX_OPTION))
            .unwrap_or_default();
        Ok(Some(Backing::Bucket {
            bucket: bucket.into(),
            prefix: prefix.into(),
        }))
    }

    /// The files on a block volume: `(path, text)`, by path.
    async fn volume_files(&self, volume: &str) -> CloudResult<Vec<(String, String)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, data_json FROM sandbox_resources
             WHERE kind = ?1 AND deleted_ms IS NULL AND substr(id, 1, length(?2)) = ?2
             ORDER BY id",
        )
        .bind(FILE)
        .bind(volume)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| internal(FILE, e))?;
        Ok(rows
            .into_iter()
            .map(|(id, data)| {
                let body = serde_json::from_str::<Value>(&data).unwrap_or_default()["body"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (id[volume.len()..].to_string(), body)
            })
            .collect())
    }

    /// A pod's write to its own volume: not an API call of the account, so not counted.
    async fn write_volume_file(&self, volume: &str, path: &str, text: &str) -> CloudResult<()> {
        sqlx::query(
            "INSERT INTO sandbox_resources (kind, id, name, data_json, created_ms)
             VALUES (?1, ?2, NULL, ?3, ?4)
             ON CONFLICT(kind, id) DO UPDATE SET data_json = excluded.data_json, deleted_ms = NULL",
        )
        .bind(FILE)
        .bind(format!("{volume}{path}"))
        .bind(json!({"body": text}).to_string())
        .bind(now_ms())
        .execute(&self.writer)
        .await
        .map_err(|e| internal(FILE, e))?;
        Ok(())
    }

    /// The files a model download Job (`TARGET=/s3/models/<id>` on an S3 claim) leaves in the
    /// bucket, visible from when the Job completes: what `storage_objects_list` then shows.
    pub(super) async fn download_writes(
        &self,
        target: &KubeTarget,
        job: &Value,
    ) -> CloudResult<()> {
        if job["kind"] != "Job"
            || job.pointer("/metadata/labels/instantstart.io~1workload")
                != Some(&json!("model-download"))
        {
            return Ok(());
        }
        let spec = &job["spec"]["template"]["spec"];
        let env = |k: &str| {
            spec["containers"][0]["env"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["name"] == k)
                .and_then(|e| e["value"].as_str())
        };
        let (Some(dest), Some(claim)) = (
            env("TARGET").and_then(|t| t.strip_prefix("/s3/")),
            spec.pointer("/volumes/0/persistentVolumeClaim/claimName")
                .and_then(Value::as_str),
        ) else {
            return Ok(());
        };
        let namespace = job["metadata"]["namespace"].as_str().unwrap_or("default");
        let Some(Backing::Bucket { bucket, prefix }) =
            self.bucket_of(target, namespace, claim).await?
        else {
            return Ok(());
        };
        let visible =
            now_ms() + (super::durations::K8S_WORKLOAD_READY * 1000.0 / self.time_scale) as i64;
        for (file, body) in [
            ("config.json", "{\"model_type\": \"sandbox\"}"),
            ("model.safetensors", "(weights)"),
            ("tokenizer.json", "{}"),
        ] {
            let key = format!("{prefix}{}/{file}", dest.trim_end_matches('/'));
            let data = json!({"bucket": bucket, "key": key, "size": body.len(), "body": body,
                              "visibleMs": visible});
            sqlx::query(
                "INSERT INTO sandbox_resources (kind, id, name, data_json, created_ms)
                 VALUES ('s3-object', ?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            )
            .bind(super::new_id("obj"))
            .bind(format!("{bucket}/{key}"))
            .bind(data.to_string())
            .bind(now_ms())
            .execute(&self.writer)
            .await
            .map_err(|e| internal("s3-object", e))?;
        }
        Ok(())
    }

    /// A deleted Workspace takes its home volume with it.
    pub(super) async fn forget_home(
        &self,
        target: &KubeTarget,
        namespace: &str,
        name: &str,
    ) -> CloudResult<()> {
        sqlx::query(
            "DELETE FROM sandbox_resources WHERE kind = ?1 AND substr(id, 1, length(?2)) = ?2",
        )
        .bind(FILE)
        .bind(home_volume(target, namespace, name))
        .execute(&self.writer)
        .await
        .map_err(|e| internal(FILE, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts() -> Vec<Mount> {
        vec![
            Mount {
                path: "/home/sagemaker-user".into(),
                backing: Backing::Volume("v/".into()),
            },
            Mount {
                path: "/s3".into(),
                backing: Backing::Bucket {
                    bucket: "b".into(),
                    prefix: "demo/".into(),
                },
            },
        ]
    }

    #[test]
    fn a_path_falls_in_its_mount_and_nowhere_else() {
        let m = mounts();
        let (mount, rest) = resolve(&m, "/s3/code/train.py").unwrap();
        assert_eq!(
            (mount.path.as_str(), rest.as_str()),
            ("/s3", "code/train.py")
        );
        assert_eq!(resolve(&m, "/s3/").unwrap().1, "");
        assert!(
            resolve(&m, "/s30/x").is_none(),
            "a longer name is another directory"
        );
        assert!(resolve(&m, "/home").is_none());
    }

    #[test]
    fn a_directory_lists_each_child_once() {
        let paths = ["code/train.py", "code/lib/a.py", "data.csv"];
        assert_eq!(
            children("", paths.into_iter()),
            vec![("code".into(), true), ("data.csv".into(), false)]
        );
        assert_eq!(
            children("code/", paths.into_iter()),
            vec![("lib".into(), true), ("train.py".into(), false)]
        );
        assert_eq!(
            children("/", ["/home/sagemaker-user/", "/s3/"].into_iter()),
            vec![("home".into(), true), ("s3".into(), true)]
        );
    }
}
