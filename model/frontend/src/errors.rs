//! The error collector every phase uses (the clause and region parsers, the rules, the lowering's own search),
//! so a user sees every mistake at once.

/// Errors collected so a user sees every mistake at once (serde_derive's `Ctxt`): a phase pushes what it finds and
/// goes on; [`Errors::finish`] ends the collection. Dropping one unfinished is a bug in the macros (errors found and
/// never reported), so it panics, unless a panic is already unwinding.
#[derive(Default)]
pub struct Errors {
    found: Option<syn::Error>,
    count: usize,
    finished: bool,
}

impl Errors {
    /// Whether nothing was found so far.
    pub fn is_empty(&self) -> bool {
        self.found.is_none()
    }

    /// How many were found so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Records `e`, to be reported with the rest.
    pub fn push(&mut self, e: syn::Error) {
        self.count += 1;
        match &mut self.found {
            Some(all) => all.combine(e),
            None => self.found = Some(e),
        }
    }

    /// `value` if nothing was found, else every error, combined.
    pub fn finish<T>(mut self, value: T) -> syn::Result<T> {
        self.finished = true;
        match self.found.take() {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }

    /// Every error found, and `e` last.
    pub fn fail<T>(mut self, e: syn::Error) -> syn::Result<T> {
        self.finished = true;
        Err(match self.found.take() {
            Some(mut all) => {
                all.combine(e);
                all
            }
            None => e,
        })
    }

    /// Ends a collection whose errors another phase reports (the lowering finds the loop the validation checked).
    pub fn discard(mut self) {
        self.finished = true;
    }
}

impl Drop for Errors {
    fn drop(&mut self) {
        if !self.finished && !std::thread::panicking() {
            panic!("offload's macros dropped an error collection without reporting it (a bug in offload)");
        }
    }
}
