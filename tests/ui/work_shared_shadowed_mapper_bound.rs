use offload::{omp_get_team_num, target, Mapper};

#[derive(Mapper)]
struct Mine<'a> {
    x: &'a [u32],
    n: usize,
}

// The `let` shadows the parameter: its `p.n` is each team's own, so the teams' shares of `0..p.n` would overlap.
#[target(teams_distribute_parallel_for)]
fn bump(p: Mine<'_>, y: &mut [u32]) {
    let p = Mine {
        x: p.x,
        n: if omp_get_team_num() == 0 { 2 * p.n } else { p.n },
    };
    for i in 0..p.n {
        y[i] += p.x[i];
    }
}

// The same under `collapse(2)`, through a tuple pattern.
#[target(teams_distribute_parallel_for, collapse(2))]
fn bump2(p: Mine<'_>, m: usize, y: &mut [u32]) {
    let (p, _) = (
        Mine {
            x: p.x,
            n: p.n + omp_get_team_num() as usize,
        },
        0,
    );
    for i in 0..p.n {
        for j in 0..m {
            y[i * m + j] += p.x[i];
        }
    }
}

fn main() {}
