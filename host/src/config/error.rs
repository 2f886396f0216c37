//! [`JobError`], why a job file was rejected, and how messages name the job
//! file, the entry and the position of a syntax error.

use std::path::{Path, PathBuf};

use crate::fields::one_line;

/// Why a job file was rejected. Each message is one line naming the job file.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job file could not be read.
    #[error("{}: cannot read job file: {error}; check the path", path.display())]
    Read {
        /// The job file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A folder was given for a job file, and it holds no `job.toml`.
    #[error("{} is a folder without a {}; pass the path of the job file itself", dir.display(), super::JOB_FILE)]
    NoJobFile {
        /// The folder.
        dir: PathBuf,
    },
    /// The job file is not valid TOML.
    #[error("{}:{line}:{column}: TOML syntax error: {message}", path.display())]
    Syntax {
        /// The job file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What the TOML parser expected.
        message: String,
    },
    /// The job file is valid TOML but not a valid job.
    #[error("{}: {entry}: {message}", path.display())]
    Invalid {
        /// The job file.
        path: PathBuf,
        /// The offending entry, e.g. `operator "x"`, `checkpoint` or `job`.
        entry: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl JobError {
    /// [`JobError::Invalid`]: `entry` of job file `path` is wrong.
    pub(super) fn invalid(path: &Path, entry: &str, message: String) -> JobError {
        JobError::Invalid {
            path: path.to_path_buf(),
            entry: entry.to_owned(),
            message,
        }
    }

    /// [`JobError::Syntax`] at the start of the error's span in `text`,
    /// counted in lines and characters.
    pub(super) fn syntax(path: &Path, text: &str, error: &toml::de::Error) -> JobError {
        let mut offset = error.span().map_or(0, |span| span.start).min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1; // terminates: 0 is a char boundary
        }
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let message = one_line(&error.message());
        JobError::Syntax {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    }
}

/// `kind "id"`, how messages name an entry.
pub(super) fn label(kind: &str, id: &str) -> String {
    format!("{kind} {id:?}")
}
