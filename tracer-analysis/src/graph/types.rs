//! The graph's vertices, arcs and procedure contexts.

/// Index of a vertex; ids are a topological order.
pub type VertexId = u32;
/// Index of an arc in [`Graph::arcs`].
pub(crate) type ArcId = u32;
/// Index into [`Graph::contexts`]: which selected procedures were active on an arc.
pub(crate) type ContextId = u32;

/// The context of arcs outside every selected procedure (and of non-program arcs).
pub const NO_PROCEDURE: ContextId = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArcKind {
    /// Work of one thread between two of its events.
    Program,
    /// A message, collective or wakeup: the target event waited for the source event.
    Dependency,
    /// From the virtual source or to the virtual sink.
    Virtual,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arc {
    pub from: VertexId,
    pub to: VertexId,
    /// Work-clock nanoseconds (0 for dependency and virtual arcs).
    pub weight: u64,
    pub context: ContextId,
    pub kind: ArcKind,
}

/// What happened at a vertex (for reports and exports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Vertex {
    /// Probe clock (CLOCK_MONOTONIC ns); 0 for the virtual source and sink.
    pub ts_ns: u64,
    /// Thread of the event; 0 for the virtual source and sink.
    pub tid: u32,
    /// The record's kind and call field, `(kind << 16) | call` (see `tracer_common`).
    pub label: u32,
}

/// The selected procedures active on an arc: `procedures` (sorted, each once) for
/// inclusive time, `innermost` for exclusive time, and `stack` (outermost first, as
/// entered: a recursive procedure repeats) for the exports that draw call stacks.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Context {
    pub procedures: Vec<usize>,
    pub innermost: Option<usize>,
    pub stack: Vec<usize>,
}

/// A finished graph in compressed adjacency form.
#[derive(Clone, Debug)]
pub struct Graph {
    pub vertices: Vec<Vertex>,
    /// Sorted by `from` (then by insertion order): the out-arcs of `v` are
    /// `arcs[out_start[v]..out_start[v + 1]]`.
    pub arcs: Vec<Arc>,
    pub(super) out_start: Vec<u32>,
    /// Arc ids grouped by `to`: the in-arcs of `v` are
    /// `in_arcs[in_start[v]..in_start[v + 1]]`.
    pub(super) in_arcs: Vec<ArcId>,
    pub(super) in_start: Vec<u32>,
    pub contexts: Vec<Context>,
}

impl Graph {
    pub fn source(&self) -> VertexId {
        0
    }

    pub fn sink(&self) -> VertexId {
        (self.vertices.len() - 1) as VertexId
    }

    pub fn vertex_count(&self) -> usize {
        self.vertices.len()
    }

    /// Ids of the out-arcs of `v` (contiguous).
    pub(crate) fn out_arcs(&self, v: VertexId) -> std::ops::Range<ArcId> {
        self.out_start[v as usize]..self.out_start[v as usize + 1]
    }

    /// Ids of the in-arcs of `v`.
    pub(crate) fn in_arcs(&self, v: VertexId) -> &[ArcId] {
        &self.in_arcs[self.in_start[v as usize] as usize..self.in_start[v as usize + 1] as usize]
    }

    pub fn arc(&self, a: ArcId) -> &Arc {
        &self.arcs[a as usize]
    }

    /// Bytes held by the graph's arrays (for the benchmarks).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.vertices.capacity() * size_of::<Vertex>()
            + self.arcs.capacity() * size_of::<Arc>()
            + (self.out_start.capacity() + self.in_arcs.capacity() + self.in_start.capacity())
                * size_of::<u32>()
    }
}
