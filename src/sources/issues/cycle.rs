//! A cycle among the tasks' edges, as the path a person reads (blockers first), for the
//! error that names it by issue numbers. Pure.

/// A cycle among `deps` (task → the tasks it waits for), as a path that starts and ends at
/// the same task; the first found in task order.
pub(super) fn find(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; deps.len()];
    for start in 0..deps.len() {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Open;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&d) = deps[node].get(*next) {
                *next += 1;
                match mark[d] {
                    Mark::Open => {
                        let from = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                        let mut path: Vec<usize> = stack[from..].iter().map(|(n, _)| *n).collect();
                        path.push(d);
                        // `deps` point at blockers: reverse to read in the order work flows.
                        path.reverse();
                        return Some(path);
                    }
                    Mark::New => {
                        mark[d] = Mark::Open;
                        stack.push((d, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}
