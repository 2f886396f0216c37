//! [`RemoteError`]: why the object store of checkpoints failed, on one
//! line naming the store's URL, the operation and what to do.

/// Why an operation on the checkpoints' object store failed. Messages
/// never hold credentials.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The store URL or its options cannot make a client.
    #[error("checkpoint store {url}: {message}")]
    Config {
        /// The store's URL.
        url: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// An operation failed.
    #[error("checkpoint store {url}: {operation} failed: {message}")]
    Failed {
        /// The store's URL.
        url: String,
        /// What was done (`creating manifests/…0042.json`).
        operation: String,
        /// What the store said, and what to do.
        message: String,
        /// Whether trying again later can succeed (the store was
        /// unreachable, timed out or failed inside).
        transient: bool,
    },
    /// Another process wrote checkpoint `id` first: two processes run
    /// this job on one store.
    #[error(
        "checkpoint store {url}: checkpoint {id} was written by another process (writer {other}) while this one (writer {writer}) ran the job: two processes run job `{job}` on one store; stop one of them (this one stops)"
    )]
    Fenced {
        /// The store's URL.
        url: String,
        /// The job.
        job: String,
        /// The checkpoint both claimed.
        id: u64,
        /// This process's writer id.
        writer: String,
        /// The other one's.
        other: String,
    },
    /// Something read from the store is not what Weir wrote.
    #[error("checkpoint store {url}: {object} is unreadable: {message}")]
    Damaged {
        /// The store's URL.
        url: String,
        /// The object.
        object: String,
        /// What is wrong.
        message: String,
    },
}

impl RemoteError {
    /// Whether trying the operation again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            RemoteError::Failed {
                transient: true,
                ..
            }
        )
    }

    /// The error of `operation` on the store at `url` that failed with
    /// `e`, with what to do.
    pub(super) fn from_store(url: &str, operation: &str, e: object_store::Error) -> RemoteError {
        use object_store::Error as E;
        let kind = match e {
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => Some(true),
            E::NotFound { .. } => Some(false),
            _ => None,
        };
        RemoteError::classify(url, operation, &e, kind)
    }

    /// The error of `operation` that failed with `e`, an I/O error of the
    /// store's client (streamed uploads and downloads).
    pub(super) fn from_io(url: &str, operation: &str, e: std::io::Error) -> RemoteError {
        RemoteError::classify(url, operation, &e, None)
    }

    /// `e` as a failure: access denied (`denied` = `Some(true)`, or its
    /// text says so), not found (`Some(false)`, or a missing bucket), or
    /// else transient (the store unreachable or failing inside).
    fn classify(
        url: &str,
        operation: &str,
        e: &dyn std::error::Error,
        kind: Option<bool>,
    ) -> RemoteError {
        let text = one_line(e);
        let says = |words: &[&str]| words.iter().any(|w| text.contains(w));
        let denied = kind == Some(true)
            || says(&[
                "403 Forbidden",
                "401 Unauthorized",
                "AccessDenied",
                "SignatureDoesNotMatch",
                "InvalidAccessKeyId",
            ]);
        let missing = kind == Some(false)
            || says(&[
                "NoSuchBucket",
                "ContainerNotFound",
                "The specified bucket does not exist",
            ]);
        let words = Words::of(url);
        let (message, transient) = if denied {
            let fix = format!(
                "check the credentials ({}, or [checkpoint.store_options]) and the {}'s policy",
                words.credentials, words.bucket
            );
            (format!("access denied ({text}); {fix}"), false)
        } else if missing {
            let fix = format!(
                "check that the {} exists and the URL names it",
                words.bucket
            );
            (format!("not found ({text}); {fix}"), false)
        } else {
            let fix = format!("is the store reachable ({})?", words.endpoint);
            (format!("{text}; {fix}"), true)
        };
        RemoteError::Failed {
            url: url.to_string(),
            operation: operation.to_string(),
            message,
            transient,
        }
    }
}

/// What a cloud's settings and buckets are called, for the fixes errors
/// suggest.
struct Words {
    credentials: &'static str,
    endpoint: &'static str,
    bucket: &'static str,
}

impl Words {
    /// The words of the store at `url`, by its scheme.
    fn of(url: &str) -> Words {
        match url.split_once("://").map_or("", |(scheme, _)| scheme) {
            "gs" => Words {
                credentials: "GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS",
                endpoint: "GOOGLE_BASE_URL or the service account's gcs_base_url",
                bucket: "bucket",
            },
            "az" | "abfs" => Words {
                credentials: "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
                endpoint: "AZURE_ENDPOINT, AZURE_ALLOW_HTTP for http://",
                bucket: "container",
            },
            _ => Words {
                credentials: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                endpoint: "AWS_ENDPOINT_URL, AWS_ALLOW_HTTP for http://",
                bucket: "bucket",
            },
        }
    }
}

/// `e` with its sources, on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
