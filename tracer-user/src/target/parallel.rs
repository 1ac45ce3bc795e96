//! Reading many files at once: a program held at its exec waits while its libraries'
//! symbol tables are read (LAMMPS maps over 120), so the reads are spread over the CPUs.

/// `read` applied to each of `items`, on up to one thread per CPU; the results in the
/// items' order.
pub(crate) fn read_each<T: Sync, R: Send>(items: &[T], read: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || items.len() < 2 {
        return items.iter().map(&read).collect();
    }
    let per_thread = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let read = &read;
        let parts: Vec<_> = items
            .chunks(per_thread)
            .map(|part| scope.spawn(move || part.iter().map(read).collect::<Vec<R>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|part| part.join().expect("a file reader panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::read_each;

    #[test]
    fn results_keep_the_items_order() {
        let items: Vec<u32> = (0..101).collect();
        assert_eq!(
            read_each(&items, |i| i * 2),
            items.iter().map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(read_each(&items[..1], |i| i + 1), [1]);
        assert!(read_each(&[] as &[u32], |i| *i).is_empty());
    }
}
