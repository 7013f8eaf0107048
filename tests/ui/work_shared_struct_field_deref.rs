use offload::{declare_target, omp_get_thread_num, target};

#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Inputs {
    pub lookups: usize,
}

// A field reached through `Deref` is whatever `deref` returns, which may differ between threads: the loop's bound
// reads the struct's own field through its pattern, so this does not compile.
#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Wrapper {
    pub a: Inputs,
    pub b: Inputs,
}

impl core::ops::Deref for Wrapper {
    type Target = Inputs;
    fn deref(&self) -> &Inputs {
        if omp_get_thread_num() == 0 { &self.a } else { &self.b }
    }
}

#[target(teams_distribute_parallel_for)]
fn per_thread_bound(w: Wrapper, y: &mut [u32]) {
    for i in 0..w.lookups {
        y[i] = 1;
    }
}

// A `let` that shadows the parameter is each thread's own value.
#[target(teams_distribute_parallel_for)]
fn shadowed(inp: Inputs, y: &mut [u32]) {
    let inp = Inputs { lookups: inp.lookups + omp_get_thread_num() as usize };
    for i in 0..inp.lookups {
        y[i] = 1;
    }
}

fn main() {}
