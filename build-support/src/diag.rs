//! Errors in user source, printed the way rustc prints them.

use std::path::PathBuf;

/// One error at a span of the user's source: what is wrong, where, and what to do about it.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// What is wrong, the `error:` line.
    pub message: String,
    /// The file as the user knows it (relative to the workspace root where possible).
    pub file: PathBuf,
    /// Absolute path, to read the source line from.
    pub abs_file: PathBuf,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// The span's length on its first line, in characters: what the `^`s underline.
    pub len: usize,
    /// What to do about it, the `= help:` line.
    pub help: Option<String>,
}

impl Diagnostic {
    /// The error as rustc prints it: the message, the location, the source line with the span marked, and the help.
    pub fn render(&self) -> String {
        let src = std::fs::read_to_string(&self.abs_file).unwrap_or_default();
        let text = src.lines().nth(self.line.saturating_sub(1)).unwrap_or("");
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        let mut s = format!(
            "error: {}\n{pad}--> {}:{}:{}\n{pad} |\n{num} | {text}\n{pad} | {}{}\n",
            self.message,
            self.file.display(),
            self.line,
            self.column,
            " ".repeat(self.column.saturating_sub(1)),
            "^".repeat(self.len.max(1)),
        );
        if let Some(h) = &self.help {
            s.push_str(&format!("{pad} = help: {h}\n"));
        }
        s
    }
}
