//! Building a graph in topological order, with its virtual source and sink.

use super::types::*;

/// Builds a [`Graph`]: vertices in topological order, arcs from older to newer vertices.
#[derive(Debug)]
pub struct GraphBuilder {
    vertices: Vec<Vertex>,
    arcs: Vec<Arc>,
    has_in: Vec<bool>,
    ends: Vec<VertexId>,
    contexts: Vec<Context>,
    context_ids: std::collections::HashMap<Context, ContextId>,
    /// [`Self::context_of`]'s ids by stack: a thread's context is looked up at every
    /// procedure entry and exit, without building (and hashing) a whole [`Context`].
    stack_ids: std::collections::HashMap<Vec<usize>, ContextId>,
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
            stack_ids: std::collections::HashMap::new(),
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

    /// The id of the context where the procedures of `stack` are active, outermost first.
    pub fn context_of(&mut self, stack: &[usize]) -> ContextId {
        if let Some(&id) = self.stack_ids.get(stack) {
            return id;
        }
        let mut procedures = stack.to_vec();
        procedures.sort_unstable();
        procedures.dedup();
        let id = self.context(Context {
            procedures,
            innermost: stack.last().copied(),
            stack: stack.to_vec(),
        });
        self.stack_ids.insert(stack.to_vec(), id);
        id
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
