use std::fmt;

/// A problem with a case file or a suite: `file:line: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl CaseError {
    pub fn new(file: impl Into<String>, line: Option<usize>, message: impl Into<String>) -> Self {
        Self { file: file.into(), line, message: message.into() }
    }
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for CaseError {}
