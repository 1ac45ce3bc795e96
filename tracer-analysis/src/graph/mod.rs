//! The program activity graph of a recording and the offline analyses on it.
//!
//! Vertices are events; arcs are program order inside a thread (weighted by the work
//! clock) and the dependencies the matcher finds (messages, collectives), weighted 0
//! (an infinitely fast network, as online). Vertex ids are handed out in the order the
//! events are analysed, and every arc goes from an older vertex to a newer one, so id
//! order is a topological order: every pass below is a single sweep.
//!
//! A finished graph has one virtual source (vertex 0, with an arc to every vertex that
//! has no other incoming arc) and one virtual sink (the last vertex, with an arc from
//! the last event of every thread that may end the critical path). Paths are the
//! source-to-sink paths.

pub mod cpm;
pub mod kpaths;
pub mod mbm;
pub mod path;
pub mod phases;
pub mod recorded;
pub mod whatif;

#[cfg(test)]
mod testgraphs;

/// Index of a vertex; ids are a topological order.
pub type VertexId = u32;
/// Index of an arc in [`Graph::arcs`].
pub type ArcId = u32;
/// Index into [`Graph::contexts`]: which selected procedures were active on an arc.
pub type ContextId = u32;

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
/// inclusive time and `innermost` for exclusive time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Context {
    pub procedures: Vec<usize>,
    pub innermost: Option<usize>,
}

/// A finished graph in compressed adjacency form.
#[derive(Clone, Debug)]
pub struct Graph {
    pub vertices: Vec<Vertex>,
    /// Sorted by `from` (then by insertion order): the out-arcs of `v` are
    /// `arcs[out_start[v]..out_start[v + 1]]`.
    pub arcs: Vec<Arc>,
    out_start: Vec<u32>,
    /// Arc ids grouped by `to`: the in-arcs of `v` are
    /// `in_arcs[in_start[v]..in_start[v + 1]]`.
    in_arcs: Vec<ArcId>,
    in_start: Vec<u32>,
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
    pub fn out_arcs(&self, v: VertexId) -> std::ops::Range<ArcId> {
        self.out_start[v as usize]..self.out_start[v as usize + 1]
    }

    /// Ids of the in-arcs of `v`.
    pub fn in_arcs(&self, v: VertexId) -> &[ArcId] {
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

/// Builds a [`Graph`]: vertices in topological order, arcs from older to newer vertices.
#[derive(Debug)]
pub struct GraphBuilder {
    vertices: Vec<Vertex>,
    arcs: Vec<Arc>,
    has_in: Vec<bool>,
    ends: Vec<VertexId>,
    contexts: Vec<Context>,
    context_ids: std::collections::HashMap<Context, ContextId>,
}

impl Default for GraphBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl GraphBuilder {
    /// A builder holding only the virtual source.
    pub fn new() -> Self {
        let none = Context::default();
        GraphBuilder {
            vertices: vec![Vertex::default()],
            arcs: Vec::new(),
            has_in: vec![true],
            ends: Vec::new(),
            contexts: vec![none.clone()],
            context_ids: [(none, NO_PROCEDURE)].into_iter().collect(),
        }
    }

    pub fn add_vertex(&mut self, v: Vertex) -> VertexId {
        self.vertices.push(v);
        self.has_in.push(false);
        (self.vertices.len() - 1) as VertexId
    }

    /// Adds an arc; `from` must be older than `to` (ids are the topological order).
    pub fn add_arc(
        &mut self,
        from: VertexId,
        to: VertexId,
        weight: u64,
        context: ContextId,
        kind: ArcKind,
    ) {
        assert!(from < to, "arc {from} -> {to} goes backwards");
        self.has_in[to as usize] = true;
        self.arcs.push(Arc {
            from,
            to,
            weight,
            context,
            kind,
        });
    }

    /// `v` may end a path (it gets an arc to the sink).
    pub fn mark_end(&mut self, v: VertexId) {
        self.ends.push(v);
    }

    /// The id of a context (interned).
    pub fn context(&mut self, c: Context) -> ContextId {
        if let Some(&id) = self.context_ids.get(&c) {
            return id;
        }
        let id = self.contexts.len() as ContextId;
        self.contexts.push(c.clone());
        self.context_ids.insert(c, id);
        id
    }

    /// The id of the context where `procedures` are active, the last one innermost.
    pub fn context_of(&mut self, procedures: Vec<usize>) -> ContextId {
        let innermost = procedures.last().copied();
        let mut procedures = procedures;
        procedures.sort_unstable();
        procedures.dedup();
        self.context(Context {
            procedures,
            innermost,
        })
    }

    pub fn vertex_count(&self) -> usize {
        self.vertices.len()
    }

    pub fn arc_count(&self) -> usize {
        self.arcs.len()
    }

    /// Adds the source and sink arcs and builds the adjacency arrays.
    pub fn finish(mut self) -> Graph {
        let sink = self.add_vertex(Vertex::default());
        for v in 1..sink {
            if !self.has_in[v as usize] {
                self.add_arc(0, v, 0, NO_PROCEDURE, ArcKind::Virtual);
            }
        }
        let mut ends = std::mem::take(&mut self.ends);
        ends.sort_unstable();
        ends.dedup();
        for v in ends {
            self.add_arc(v, sink, 0, NO_PROCEDURE, ArcKind::Virtual);
        }
        let n = self.vertices.len();
        // Counting sort by `from`, stable: arcs keep insertion order per vertex.
        let mut out_start = vec![0u32; n + 1];
        for a in &self.arcs {
            out_start[a.from as usize + 1] += 1;
        }
        for i in 0..n {
            out_start[i + 1] += out_start[i];
        }
        let mut next = out_start.clone();
        let mut arcs = vec![
            Arc {
                from: 0,
                to: 0,
                weight: 0,
                context: 0,
                kind: ArcKind::Virtual
            };
            self.arcs.len()
        ];
        for a in self.arcs.drain(..) {
            let slot = &mut next[a.from as usize];
            arcs[*slot as usize] = a;
            *slot += 1;
        }
        let mut in_start = vec![0u32; n + 1];
        for a in &arcs {
            in_start[a.to as usize + 1] += 1;
        }
        for i in 0..n {
            in_start[i + 1] += in_start[i];
        }
        let mut next = in_start.clone();
        let mut in_arcs = vec![0 as ArcId; arcs.len()];
        for (id, a) in arcs.iter().enumerate() {
            let slot = &mut next[a.to as usize];
            in_arcs[*slot as usize] = id as ArcId;
            *slot += 1;
        }
        Graph {
            vertices: self.vertices,
            arcs,
            out_start,
            in_arcs,
            in_start,
            contexts: self.contexts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_adds_source_and_sink_arcs() {
        let mut b = GraphBuilder::new();
        let x = b.add_vertex(Vertex::default());
        let y = b.add_vertex(Vertex::default());
        let z = b.add_vertex(Vertex::default());
        b.add_arc(x, z, 5, NO_PROCEDURE, ArcKind::Program);
        b.add_arc(y, z, 0, NO_PROCEDURE, ArcKind::Dependency);
        b.add_arc(y, z, 3, NO_PROCEDURE, ArcKind::Program);
        b.mark_end(z);
        let g = b.finish();
        assert_eq!(g.vertex_count(), 5);
        assert_eq!(g.sink(), 4);
        let from_source: Vec<VertexId> = g.out_arcs(0).map(|a| g.arc(a).to).collect();
        assert_eq!(from_source, vec![x, y]);
        assert_eq!(g.in_arcs(z).len(), 3);
        assert_eq!(g.in_arcs(g.sink()).len(), 1);
        let from_y: Vec<u64> = g.out_arcs(y).map(|a| g.arc(a).weight).collect();
        assert_eq!(from_y, vec![0, 3]);
    }
}
