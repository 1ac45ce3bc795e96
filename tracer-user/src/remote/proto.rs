//! The protobuf messages, client and server generated from proto/agent.proto (build.rs),
//! and their conversions from and to the types both sides use (`wire`).

// Generated code: its items are `pub` inside this private module, and it is not ours to
// lint.
#[allow(
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    clippy::empty_structs_with_brackets
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/tracer.agent.v1.rs"));
}

pub(super) use generated::agent_client::AgentClient;
pub(super) use generated::agent_server::{Agent, AgentServer};
pub(super) use generated::{
    control, item, BatchMsg, Control, HelloReply, HelloRequest, Item, Node, Ping, Pong, Resume,
    Start, Stop,
};

use tracer_analysis::node::NodeInfo;

use super::wire::{Batch, TraceRequest, WireItem};

impl From<&NodeInfo> for Node {
    fn from(node: &NodeInfo) -> Node {
        Node {
            hostname: node.hostname.clone(),
            machine_id: node.machine_id.clone(),
            boot_id: node.boot_id.clone(),
            kernel: node.kernel.clone(),
            cpus: node.cpus,
            start_unix_ns_high: (node.start_unix_ns >> 64) as u64,
            start_unix_ns_low: node.start_unix_ns as u64,
            start_monotonic_ns: node.start_monotonic_ns,
        }
    }
}

impl From<Node> for NodeInfo {
    fn from(node: Node) -> NodeInfo {
        NodeInfo {
            hostname: node.hostname,
            machine_id: node.machine_id,
            boot_id: node.boot_id,
            kernel: node.kernel,
            cpus: node.cpus,
            start_unix_ns: u128::from(node.start_unix_ns_high) << 64
                | u128::from(node.start_unix_ns_low),
            start_monotonic_ns: node.start_monotonic_ns,
        }
    }
}

impl From<&TraceRequest> for Start {
    fn from(request: &TraceRequest) -> Start {
        Start {
            every_process: request.every_process,
            sample_hz: request.sample_hz,
            buffer_mib: request.buffer_mib,
            funcs: request.funcs.clone(),
            func_files: request.func_files.clone(),
            // The collector's to set (`Collector::connect`).
            session: 0,
        }
    }
}

impl From<Start> for TraceRequest {
    fn from(start: Start) -> TraceRequest {
        TraceRequest {
            every_process: start.every_process,
            sample_hz: start.sample_hz,
            buffer_mib: start.buffer_mib,
            funcs: start.funcs,
            func_files: start.func_files,
        }
    }
}

impl From<Batch> for BatchMsg {
    fn from(batch: Batch) -> BatchMsg {
        let json = |value: Result<String, serde_json::Error>| {
            // The types are plain data (strings, numbers, vectors): serde_json cannot fail
            // on them.
            value.expect("serializing a plain-data type")
        };
        let items = batch
            .items
            .into_iter()
            .map(|item| Item {
                kind: Some(match item {
                    WireItem::Records(bytes) => item::Kind::Records(bytes),
                    WireItem::Process(p) => {
                        item::Kind::ProcessJson(json(serde_json::to_string(&p)))
                    }
                    WireItem::Probe(p) => item::Kind::ProbeJson(json(serde_json::to_string(&p))),
                    WireItem::Counts(c) => item::Kind::CountsJson(json(serde_json::to_string(&c))),
                }),
            })
            .collect();
        BatchMsg {
            seq: batch.seq,
            watermark_ns: batch.watermark_ns,
            items,
            last: batch.last,
        }
    }
}

impl TryFrom<BatchMsg> for Batch {
    /// What is wrong with it, one line.
    type Error = String;

    fn try_from(message: BatchMsg) -> Result<Batch, String> {
        let mut items = Vec::with_capacity(message.items.len());
        for (index, item) in message.items.into_iter().enumerate() {
            let parsed = match item.kind {
                Some(item::Kind::Records(bytes)) => Ok(WireItem::Records(bytes)),
                Some(item::Kind::ProcessJson(j)) => serde_json::from_str(&j).map(WireItem::Process),
                Some(item::Kind::ProbeJson(j)) => serde_json::from_str(&j).map(WireItem::Probe),
                Some(item::Kind::CountsJson(j)) => serde_json::from_str(&j).map(WireItem::Counts),
                None => return Err(format!("batch {}: item {index} is empty", message.seq)),
            };
            items.push(parsed.map_err(|e| format!("batch {}: item {index}: {e}", message.seq))?);
        }
        Ok(Batch {
            seq: message.seq,
            watermark_ns: message.watermark_ns,
            items,
            last: message.last,
        })
    }
}
