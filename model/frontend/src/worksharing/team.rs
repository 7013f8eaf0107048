//! Team calls (`barrier()`, `team_shared()`) outside `teams, parallel` regions, and `team_shared()` calls of one body
//! under two element types.

use super::*;

/// `barrier()`, `team_shared()` and `team_shared_raw()` written in a region that is not `teams, parallel`: a barrier
/// in a work-shared loop waits for threads that may have no iteration, and a work-shared reduction keeps its partials
/// where team-shared memory would be. (Calls the macro cannot see fail at run time.)
pub fn check_team_calls(block: &Block, errors: &mut Errors) {
    struct V<'e>(&'e mut Errors);
    impl<'a> Visit<'a> for V<'_> {
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let Expr::Path(p) = &*c.func {
                if let Some(last) = p.path.segments.last() {
                    let n = last.ident.to_string();
                    if ["barrier", "team_shared", "team_shared_raw"].contains(&n.as_str()) {
                        self.0.push(syn::Error::new(
                            c.span(),
                            format!(
                                "`{n}()` is for `teams, parallel` regions, whose every thread runs the whole body; in \
                                 a work-shared loop a thread may have no iteration to reach it (and reductions use the \
                                 team's memory), and a serial region has one thread: write the region as `teams, \
                                 parallel`"
                            ),
                        ));
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    V(errors).visit_block(block);
}

/// `team_shared()` calls in one region body whose element types differ, where the call shows its type (a closure
/// parameter written `&[AtomicU64]`, or `team_shared::<AtomicU64, _>`): a launch's team-shared memory is handed out
/// under one type, the first call's, and a later call with another fails the region at run time (`offload_model::
/// abi::shared_atomics`). Here the macro sees it first, and points at the second call. (Calls in other functions,
/// or whose type is inferred, are left to the run-time check.)
pub fn check_team_shared_types(block: &Block, errors: &mut Errors) {
    /// The element type a `team_shared(len, f)` call shows, as written (its last path segment).
    fn shown_type(c: &syn::ExprCall, last: &syn::PathSegment) -> Option<String> {
        if let syn::PathArguments::AngleBracketed(a) = &last.arguments {
            if let Some(syn::GenericArgument::Type(t)) = a.args.first() {
                return type_name(t);
            }
        }
        let Some(Expr::Closure(f)) = c.args.iter().nth(1) else {
            return None;
        };
        let Some(Pat::Type(pt)) = f.inputs.first() else {
            return None;
        };
        let syn::Type::Reference(r) = &*pt.ty else {
            return None;
        };
        let syn::Type::Slice(s) = &*r.elem else {
            return None;
        };
        type_name(&s.elem)
    }
    fn type_name(t: &syn::Type) -> Option<String> {
        match t {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        }
    }
    struct V<'e> {
        errors: &'e mut Errors,
        first: Option<String>,
    }
    impl<'a> Visit<'a> for V<'_> {
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let Expr::Path(p) = &*c.func {
                if let Some(last) = p.path.segments.last() {
                    if last.ident == "team_shared" {
                        if let Some(ty) = shown_type(c, last) {
                            match &self.first {
                                None => self.first = Some(ty),
                                Some(first) if *first != ty => {
                                    self.errors.push(syn::Error::new(
                                        c.span(),
                                        format!(
                                            "this `team_shared()` asks for the team's memory as `{ty}`, but an \
                                             earlier call of this region hands it out as `{first}`: one launch's team-shared \
                                             memory has one element type (the same bytes as atomics of two types \
                                             or widths are a mixed-size race, which is undefined behaviour), and \
                                             this call would fail the region. Use `{first}` here too (the widest \
                                             type the region needs, splitting values with shifts)"
                                        ),
                                    ));
                                }
                                Some(_) => {}
                            }
                        }
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    V {
        errors,
        first: None,
    }
    .visit_block(block);
}
