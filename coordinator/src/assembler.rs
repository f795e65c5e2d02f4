//! Puts a worker link's file pieces together into the artifact store.

use std::collections::HashMap;

use argus_proto::artifacts::{MAX_FILE_BYTES, check_relative};
use argus_proto::grpc;
use argus_store::artifacts::Artifacts;
use tracing::warn;

/// Puts together the pieces one worker link sends: each file is kept once
/// its last piece is in. A file that grows past the limit is dropped, with
/// a warning, and what the link sends of it after that is ignored.
pub struct Assembler {
    store: Option<Artifacts>,
    partial: HashMap<(String, String), Vec<u8>>,
    refused: std::collections::HashSet<(String, String)>,
    /// The files kept of each lease whose result has not come yet.
    kept: HashMap<String, Vec<String>>,
}

impl Assembler {
    pub fn new(store: Option<Artifacts>) -> Self {
        Self { store, partial: HashMap::new(), refused: Default::default(), kept: HashMap::new() }
    }

    /// Makes an attempt's result name only the files that were kept (none
    /// when this coordinator keeps none): a page or `--out` never points at
    /// a picture that is not there. The verdict says which files the record
    /// names; the record is read and written again only when one of them
    /// was not kept.
    pub fn settle(&mut self, result: &mut grpc::AttemptResult) {
        let kept = self.kept.remove(&result.lease_id).unwrap_or_default();
        let Some(verdict) = result.verdict.as_mut() else { return };
        if verdict.files.iter().all(|path| kept.contains(path)) {
            return;
        }
        // A record that does not parse was refused at the edge, before this.
        let Ok(mut line) = serde_json::from_str::<argus_proto::run::RunCase>(&result.run_case_json) else {
            return;
        };
        for path in verdict.files.iter().filter(|path| !kept.contains(path)) {
            argus_proto::artifacts::forget(&mut line, path);
        }
        verdict.files.retain(|path| kept.contains(path));
        result.run_case_json = line.to_line();
    }

    pub async fn piece(&mut self, chunk: grpc::ArtifactChunk) {
        let key = (chunk.lease_id.clone(), chunk.path.clone());
        if self.refused.contains(&key) {
            if chunk.last {
                self.refused.remove(&key);
            }
            return;
        }
        let Some(store) = &self.store else {
            if chunk.last {
                warn!(path = %chunk.path, "a worker sent a file, but this coordinator keeps none (--artifacts)");
            }
            return;
        };
        if let Err(error) = check_relative(&chunk.path) {
            warn!(%error, "a worker sent a file with a bad path; dropped");
            self.refuse(key, chunk.last);
            return;
        }
        let buffer = self.partial.entry(key.clone()).or_default();
        if buffer.len() as u64 + chunk.data.len() as u64 > MAX_FILE_BYTES {
            warn!(path = %chunk.path, limit = MAX_FILE_BYTES, "a worker's file is larger than a file may be; dropped");
            self.partial.remove(&key);
            self.refuse(key, chunk.last);
            return;
        }
        buffer.extend_from_slice(&chunk.data);
        if !chunk.last {
            return;
        }
        let bytes = self.partial.remove(&key).unwrap_or_default();
        match store.put(&chunk.run_id, &chunk.path, bytes).await {
            Ok(()) => self.kept.entry(chunk.lease_id).or_default().push(chunk.path),
            Err(error) => warn!(run = %chunk.run_id, %error, "cannot keep a file of an attempt"),
        }
    }

    fn refuse(&mut self, key: (String, String), last: bool) {
        if !last {
            self.refused.insert(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use argus_store::artifacts::DirStore;

    use super::*;

    fn piece(path: &str, data: &[u8], last: bool) -> grpc::ArtifactChunk {
        grpc::ArtifactChunk {
            lease_id: "l1".into(),
            run_id: "r-1".into(),
            path: path.into(),
            data: data.to_vec(),
            last,
        }
    }

    #[tokio::test]
    async fn pieces_make_a_file_only_once_the_last_is_in() {
        let dir = tempfile::tempdir().unwrap();
        let store: Artifacts = Arc::new(DirStore::open(dir.path().into()).unwrap());
        let mut assembler = Assembler::new(Some(store.clone()));
        assembler.piece(piece("home/01-a.png", b"ab", false)).await;
        assert_eq!(store.get("r-1", "home/01-a.png").await.unwrap(), None);
        assembler.piece(piece("home/01-a.png", b"cd", true)).await;
        assert_eq!(store.get("r-1", "home/01-a.png").await.unwrap().as_deref(), Some(&b"abcd"[..]));
    }

    #[tokio::test]
    async fn a_result_names_only_the_files_that_were_kept() {
        let line = |shots: [Option<&str>; 2]| {
            let steps: Vec<_> = shots
                .iter()
                .map(|s| serde_json::json!({"step": "app.see: x", "status": "failed", "ms": 1, "screenshot": s}))
                .collect();
            serde_json::json!({"id": "home", "file": "h.md", "attempt": 1, "result": "failed",
                "startedAt": "2026-01-01T00:00:00.000Z", "ms": 5, "steps": steps})
            .to_string()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut assembler = Assembler::new(Some(Arc::new(DirStore::open(dir.path().into()).unwrap())));
        assembler.piece(piece("home/01-a.png", b"png", true)).await;
        let result_of = |json: String| {
            let record: argus_proto::run::RunCase = serde_json::from_str(&json).unwrap();
            grpc::AttemptResult { run_case_json: json, ..grpc::AttemptResult::recorded("l1", &record) }
        };
        let mut result = result_of(line([Some("home/01-a.png"), Some("home/02-b.png")]));
        assembler.settle(&mut result);
        let settled: argus_proto::run::RunCase = serde_json::from_str(&result.run_case_json).unwrap();
        assert_eq!(settled.steps[0].screenshot.as_deref(), Some("home/01-a.png"));
        assert_eq!(settled.steps[1].screenshot, None, "never sent, so not named");
        assert_eq!(result.verdict.unwrap().files, ["home/01-a.png"], "the verdict names what the record names");

        let mut keeps_none = Assembler::new(None);
        keeps_none.piece(piece("home/01-a.png", b"png", true)).await;
        let mut result = result_of(line([Some("home/01-a.png"), None]));
        keeps_none.settle(&mut result);
        assert!(!result.run_case_json.contains("screenshot"), "{}", result.run_case_json);
    }

    #[tokio::test]
    async fn a_bad_path_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::open(dir.path().join("store")).unwrap();
        let mut assembler = Assembler::new(Some(Arc::new(store)));
        assembler.piece(piece("../../escape.png", b"x", true)).await;
        assert!(!dir.path().join("escape.png").exists());
    }
}
