//! Prints generated tokens so that every token that came from the user's file lands on its original line (and, where
//! the line allows, column): the device crate's errors and panics then point at the user's code. Generated tokens
//! (whose spans name no later line) follow their neighbours on the same line.

use proc_macro2::{Delimiter, LineColumn, Spacing, TokenStream, TokenTree};

/// `tokens` as text starting at `first`, with line breaks only where a token's line is later than the text's, padded
/// with line breaks up to `last` (the source range's last line).
pub fn at_lines(tokens: TokenStream, first: LineColumn, last: usize) -> String {
    let mut p = Printer {
        out: " ".repeat(first.column),
        line: first.line,
        column: first.column,
        glue: true,
    };
    p.stream(tokens);
    while p.line < last {
        p.out.push('\n');
        p.line += 1;
    }
    p.out
}

struct Printer {
    out: String,
    line: usize,
    column: usize,
    /// The previous token asks for no space before the next (a joint punctuation, or the start).
    glue: bool,
}

impl Printer {
    fn stream(&mut self, tokens: TokenStream) {
        for tt in tokens {
            match tt {
                TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Brace => ("{", "}"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::None => ("", ""),
                    };
                    self.token(open, g.span_open().start());
                    self.glue = true;
                    self.stream(g.stream());
                    self.glue = true;
                    self.token(close, g.span_close().start());
                }
                TokenTree::Punct(p) => {
                    let c = p.as_char();
                    // Readable where it is safe: `a.b`, `f(x, y);`.
                    if matches!(c, '.' | ',' | ';' | '?') && p.spacing() == Spacing::Alone {
                        self.glue = true;
                    }
                    self.token(&c.to_string(), p.span().start());
                    self.glue = p.spacing() == Spacing::Joint || c == '.';
                }
                TokenTree::Ident(i) => self.token(&i.to_string(), i.span().start()),
                TokenTree::Literal(l) => self.token(&l.to_string(), l.span().start()),
            }
        }
    }

    fn token(&mut self, text: &str, at: LineColumn) {
        if text.is_empty() {
            return;
        }
        if at.line > self.line {
            while self.line < at.line {
                self.out.push('\n');
                self.line += 1;
            }
            self.out.push_str(&" ".repeat(at.column));
            self.column = at.column;
        } else if at.line == self.line && at.column >= self.column {
            // The user's own spacing.
            self.out.push_str(&" ".repeat(at.column - self.column));
            self.column = at.column;
        } else if !self.glue {
            self.out.push(' ');
            self.column += 1;
        }
        self.out.push_str(text);
        match text.rfind('\n') {
            Some(n) => {
                self.line += text.matches('\n').count();
                self.column = text[n + 1..].chars().count();
            }
            None => self.column += text.chars().count(),
        }
        self.glue = false;
    }
}
