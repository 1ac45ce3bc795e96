//! The Parquet export: one `.parquet` file per table of
//! `tracer_analysis::tables`, written by the `parquet` crate's Arrow writer
//! (snappy-compressed, pure Rust). Not in tracer-analysis: arrow brings the C library in.
//!
//! One pass over the recording builds the activity graph and, as the analysis takes
//! each record, hands the streamed tables (events, calls, messages) their rows; each is
//! written a row group at a time (encoded on a thread of its own), so memory holds at
//! most three row groups of [`ROW_GROUP`] rows of each, not the recording. The graph's
//! tables follow: the arcs (made one at a time too) while another thread makes the
//! report's rows and the critical path's table. docs/exports.md lists the columns.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use ::parquet::arrow::ArrowWriter;
use ::parquet::basic::Compression;
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use ::parquet::schema::types::ColumnPath;
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use tracer_analysis::path::Activity;
use tracer_analysis::recorded::RecordedGraph;
use tracer_analysis::recording::ItemSource;
use tracer_analysis::tables::{
    stream_tables, ArcTable, CallRow, EventRow, GraphTables, MessageRow, Streamed, TableSink,
};
use tracer_analysis::workclock::ClockKind;
use tracer_analysis::ExportError;
use tracer_analysis::{ArcRow, ProcedureRow};

use crate::session::{self, RunAs};

/// Rows per row group (and per batch handed to the writer).
const ROW_GROUP: usize = 65_536;

/// One table written: its name (its file's, without `.parquet`) and its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableWritten {
    pub name: &'static str,
    pub rows: u64,
}

/// What the export wrote: rows per table, in the order the files were written.
#[derive(Clone, Debug, Default)]
pub struct ParquetStats {
    pub tables: Vec<TableWritten>,
    pub critical_path_ns: u64,
    pub events_recorded: u64,
    pub events_lost: u64,
}

/// Writes the six tables into `dir` (an existing, empty directory), owned by `owner`;
/// `files` lists every file created, for the caller to remove if the export fails.
pub struct ParquetExport<'a> {
    dir: &'a Path,
    owner: Option<&'a RunAs>,
    /// Every file created so far.
    pub files: Vec<PathBuf>,
}

impl<'a> ParquetExport<'a> {
    pub fn new(dir: &'a Path, owner: Option<&'a RunAs>) -> Self {
        ParquetExport {
            dir,
            owner,
            files: Vec::new(),
        }
    }

    /// One pass over the recording: the streamed tables as the analysis takes each
    /// record, then the graph's tables once it is built.
    pub fn write(
        &mut self,
        reader: &mut (impl ItemSource + Send),
        clock: ClockKind,
    ) -> Result<ParquetStats, ExportError> {
        let mut sink = StreamedFiles {
            events: self.table("events", event_columns(), &[])?,
            calls: self.table("calls", call_columns(), &[])?,
            messages: self.table("messages", message_columns(), &[])?,
        };
        let Streamed { graph, .. } = stream_tables(reader, clock, &mut sink)?;
        let streamed = [
            sink.events.finish()?,
            sink.calls.finish()?,
            sink.messages.finish()?,
        ];

        // The report's rows (each procedure's zeroing and maximum benefit) and the
        // critical path's table are made on a thread of their own while the arcs table
        // is made and encoded: one after the other, they took about 0.5 s and 0.7 s on
        // the 2.4 M-event recording.
        let critical_file = self.create("critical_path")?;
        let (report, arcs) = std::thread::scope(|scope| {
            let report = scope.spawn(|| critical_path_table(&graph, critical_file));
            let arcs = self.arcs(&graph);
            let report = report
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (report, arcs)
        });
        let ReportTables {
            tables,
            critical_path: critical,
        } = report?;
        let arcs = arcs?;
        let mut procedures = self.table("procedures", procedure_columns(), &[])?;
        for p in &tables.procedures {
            procedures.push(p.clone())?;
        }
        let procedures = procedures.finish()?;
        let mut written = vec![critical, arcs, procedures];
        written.extend(streamed);
        Ok(ParquetStats {
            tables: written,
            critical_path_ns: tables.critical_path_ns,
            events_recorded: tables.events_recorded,
            events_lost: tables.events_lost,
        })
    }

    /// The `arcs` table: every arc of the graph with its schedule and slack.
    fn arcs(&mut self, graph: &RecordedGraph) -> io::Result<TableWritten> {
        let mut arcs = self.table("arcs", arc_columns(), &[])?;
        for a in ArcTable::new(graph).rows() {
            arcs.push(a)?;
        }
        arcs.finish()
    }

    fn table<R: Send + 'static>(
        &mut self,
        name: &'static str,
        columns: Vec<Column<R>>,
        metadata: &[TableMetadata],
    ) -> io::Result<Table<R>> {
        let file = self.create(name)?;
        Table::new(name, file, columns, metadata)
    }

    /// The file of table `name`.
    fn create(&mut self, name: &str) -> io::Result<File> {
        let path = self.dir.join(format!("{name}.parquet"));
        let file = session::create_private(&path, self.owner)?;
        self.files.push(path);
        Ok(file)
    }
}

/// A key and value of a table's metadata (in the Arrow schema and the file's key-value
/// metadata both).
struct TableMetadata {
    key: &'static str,
    value: String,
}

/// The report's rows on a graph, and the table of its critical path, written.
struct ReportTables {
    tables: GraphTables,
    critical_path: TableWritten,
}

/// The report's rows on `graph`, and its critical path written to `file` (the
/// `critical_path` table, with the path's length in its metadata).
fn critical_path_table(graph: &RecordedGraph, file: File) -> io::Result<ReportTables> {
    let tables = GraphTables::new(graph);
    let metadata = [
        TableMetadata {
            key: "tracer.clock",
            value: tables.clock.name().to_string(),
        },
        TableMetadata {
            key: "tracer.critical_path_ns",
            value: tables.critical_path_ns.to_string(),
        },
    ];
    let mut critical = Table::new("critical_path", file, activity_columns(), &metadata)?;
    for a in &tables.critical_path {
        critical.push(a.clone())?;
    }
    Ok(ReportTables {
        tables,
        critical_path: critical.finish()?,
    })
}

/// The sink of the streaming pass: three tables at once.
struct StreamedFiles {
    events: Table<EventRow>,
    calls: Table<CallRow>,
    messages: Table<MessageRow>,
}

impl TableSink for StreamedFiles {
    fn event(&mut self, row: EventRow) -> io::Result<()> {
        self.events.push(row)
    }
    fn call(&mut self, row: CallRow) -> io::Result<()> {
        self.calls.push(row)
    }
    fn message(&mut self, row: MessageRow) -> io::Result<()> {
        self.messages.push(row)
    }
}

/// How a column reads its value off a row (`None` is a null).
enum Values<R> {
    U64(fn(&R) -> Option<u64>),
    U32(fn(&R) -> Option<u32>),
    I32(fn(&R) -> Option<i32>),
    I64(fn(&R) -> Option<i64>),
    F64(fn(&R) -> Option<f64>),
    Bool(fn(&R) -> Option<bool>),
    Str(fn(&R) -> Option<&str>),
}

struct Column<R> {
    name: &'static str,
    nullable: bool,
    values: Values<R>,
    /// Dictionary-encoded: names, kinds, processes, threads repeat and gain; times,
    /// durations and ids are nearly all distinct, and a dictionary would only cost
    /// time (the writer fills it, then falls back to plain values in every row group).
    dictionary: bool,
}

/// A column that always has a value.
fn col<R>(name: &'static str, values: Values<R>) -> Column<R> {
    Column {
        name,
        nullable: false,
        dictionary: repeats(&values),
        values,
    }
}

/// A column that may be null.
fn nullable<R>(name: &'static str, values: Values<R>) -> Column<R> {
    Column {
        name,
        nullable: true,
        dictionary: repeats(&values),
        values,
    }
}

/// Whether a column of this type holds few distinct values: strings and 32-bit
/// integers (pids, tids, CPUs, ranks, tags) do; 64-bit times and sizes do not.
fn repeats<R>(values: &Values<R>) -> bool {
    matches!(
        values,
        Values::Str(_) | Values::U32(_) | Values::I32(_) | Values::Bool(_)
    )
}

impl<R> Column<R> {
    /// A column of nearly distinct values (ids): no dictionary.
    fn distinct(mut self) -> Self {
        self.dictionary = false;
        self
    }

    /// Whether the column holds integers (which delta encoding takes).
    fn integers(&self) -> bool {
        matches!(
            self.values,
            Values::U64(_) | Values::U32(_) | Values::I32(_) | Values::I64(_)
        )
    }

    fn field(&self) -> Field {
        let ty = match self.values {
            Values::U64(_) => DataType::UInt64,
            Values::U32(_) => DataType::UInt32,
            Values::I32(_) => DataType::Int32,
            Values::I64(_) => DataType::Int64,
            Values::F64(_) => DataType::Float64,
            Values::Bool(_) => DataType::Boolean,
            Values::Str(_) => DataType::Utf8,
        };
        Field::new(self.name, ty, self.nullable)
    }

    fn array(&self, rows: &[R]) -> ArrayRef {
        match self.values {
            Values::U64(f) => Arc::new(rows.iter().map(f).collect::<UInt64Array>()),
            Values::U32(f) => Arc::new(rows.iter().map(f).collect::<UInt32Array>()),
            Values::I32(f) => Arc::new(rows.iter().map(f).collect::<Int32Array>()),
            Values::I64(f) => Arc::new(rows.iter().map(f).collect::<Int64Array>()),
            Values::F64(f) => Arc::new(rows.iter().map(f).collect::<Float64Array>()),
            Values::Bool(f) => Arc::new(rows.iter().map(f).collect::<BooleanArray>()),
            Values::Str(f) => Arc::new(rows.iter().map(f).collect::<StringArray>()),
        }
    }
}

/// One Parquet file being written: rows are kept until a row group is full, then
/// encoded and compressed on a thread of the table's own while the next rows are made.
/// That work (arrow arrays, Parquet encoding, snappy) was about half the export's time
/// on the main thread; the machine has another core.
struct Table<R> {
    name: &'static str,
    rows: Vec<R>,
    written: u64,
    /// Full row groups to the encoding thread; None once finished.
    groups: Option<SyncSender<Vec<R>>>,
    encoding: Option<JoinHandle<io::Result<File>>>,
}

/// Row groups waiting for the encoding thread at most (memory: this many, the one being
/// encoded and the one being filled).
const GROUPS_AHEAD: usize = 1;

impl<R: Send + 'static> Table<R> {
    fn new(
        name: &'static str,
        file: File,
        columns: Vec<Column<R>>,
        metadata: &[TableMetadata],
    ) -> io::Result<Self> {
        let mut encoder = Encoder::new(file, columns, metadata)?;
        let (groups, to_encode) = sync_channel::<Vec<R>>(GROUPS_AHEAD);
        // Named for profilers and debuggers: "pq arcs", "pq events", ...
        let encoding = std::thread::Builder::new()
            .name(format!("pq {name}"))
            .spawn(move || {
                for rows in to_encode {
                    encoder.write(&rows)?;
                }
                encoder.writer.into_inner().map_err(io::Error::other)
            })?;
        Ok(Table {
            name,
            rows: Vec::with_capacity(ROW_GROUP),
            written: 0,
            groups: Some(groups),
            encoding: Some(encoding),
        })
    }

    fn push(&mut self, row: R) -> io::Result<()> {
        self.rows.push(row);
        if self.rows.len() == ROW_GROUP {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Hands the rows kept to the encoding thread (a row group of their own); an
    /// encoding error ends that thread and is returned here.
    fn hand_over(&mut self) -> io::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::replace(&mut self.rows, Vec::with_capacity(ROW_GROUP));
        let n = rows.len() as u64;
        let sent = match &self.groups {
            Some(groups) => groups.send(rows).is_ok(),
            None => false,
        };
        if !sent {
            self.join()?;
            return Err(io::Error::other("the table's encoding thread has stopped"));
        }
        self.written += n;
        Ok(())
    }

    /// Ends the encoding thread: the file, footer written, or the thread's error.
    fn join(&mut self) -> io::Result<File> {
        self.groups = None;
        match self.encoding.take() {
            Some(encoding) => match encoding.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            None => Err(io::Error::other("the table's encoding thread has stopped")),
        }
    }

    /// Writes what is left and the file's footer; the table's name and row count.
    fn finish(mut self) -> io::Result<TableWritten> {
        self.hand_over()?;
        let file = self.join()?;
        file.sync_all()?;
        Ok(TableWritten {
            name: self.name,
            rows: self.written,
        })
    }
}

impl<R> Drop for Table<R> {
    /// A failed export drops its tables: their threads end with the channel.
    fn drop(&mut self) {
        self.groups = None;
        if let Some(encoding) = self.encoding.take() {
            let _ = encoding.join();
        }
    }
}

/// What turns rows into a Parquet file, on the table's encoding thread.
struct Encoder<R> {
    columns: Vec<Column<R>>,
    schema: SchemaRef,
    writer: ArrowWriter<File>,
}

impl<R> Encoder<R> {
    fn new(file: File, columns: Vec<Column<R>>, metadata: &[TableMetadata]) -> io::Result<Self> {
        let fields: Vec<Field> = columns.iter().map(Column::field).collect();
        let schema = Arc::new(
            Schema::new(fields).with_metadata(
                metadata
                    .iter()
                    .map(|m| (m.key.to_string(), m.value.clone()))
                    .collect::<std::collections::HashMap<_, _>>(),
            ),
        );
        // In the file's key-value metadata too (not only inside the encoded Arrow
        // schema), where readers that are not Arrow (DuckDB) find it.
        let key_values = metadata
            .iter()
            .map(|m| KeyValue::new(m.key.to_string(), m.value.clone()))
            .collect::<Vec<_>>();
        let props = columns
            .iter()
            .fold(WriterProperties::builder(), |props, c| {
                let path = ColumnPath::from(c.name);
                let props = props.set_column_dictionary_enabled(path.clone(), c.dictionary);
                // Nearly distinct integers (times, sizes, ids) as deltas, bit-packed:
                // rising times take a few bits a row. Snappy over them took 9 % of the
                // export's CPU and left the tables twice as large (106 MB against 47 MB
                // on the 2.4 M-event recording).
                if !c.dictionary && c.integers() {
                    props
                        .set_column_encoding(
                            path.clone(),
                            ::parquet::basic::Encoding::DELTA_BINARY_PACKED,
                        )
                        .set_column_compression(path, Compression::UNCOMPRESSED)
                } else {
                    props
                }
            })
            .set_key_value_metadata((!key_values.is_empty()).then_some(key_values))
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_created_by(concat!("tracer ", env!("CARGO_PKG_VERSION")).into())
            .build();
        let writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(io::Error::other)?;
        Ok(Encoder {
            columns,
            schema,
            writer,
        })
    }

    /// One batch, written as a row group of its own.
    fn write(&mut self, rows: &[R]) -> io::Result<()> {
        let arrays = self.columns.iter().map(|c| c.array(rows)).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(io::Error::other)?;
        self.writer.write(&batch).map_err(io::Error::other)?;
        self.writer.flush().map_err(io::Error::other)
    }
}

fn activity_columns() -> Vec<Column<Activity>> {
    use Activity::{Wait, Work};
    vec![
        col(
            "type",
            Values::Str(|a| {
                Some(match a {
                    Work { .. } => "work",
                    Wait { .. } => "wait",
                })
            }),
        ),
        col(
            "pid",
            Values::U32(|a| match a {
                Work { pid, .. } => Some(*pid),
                Wait { to_pid, .. } => Some(*to_pid),
            }),
        ),
        col(
            "tid",
            Values::U32(|a| match a {
                Work { tid, .. } => Some(*tid),
                Wait { to_tid, .. } => Some(*to_tid),
            }),
        ),
        nullable(
            "procedure",
            Values::Str(|a| match a {
                Work { procedure, .. } => Some(procedure),
                Wait { .. } => None,
            }),
        ),
        nullable(
            "start_ns",
            Values::U64(|a| match a {
                Work { start_ns, .. } => Some(*start_ns),
                Wait { .. } => None,
            }),
        ),
        nullable(
            "end_ns",
            Values::U64(|a| match a {
                Work { end_ns, .. } => Some(*end_ns),
                Wait { .. } => None,
            }),
        ),
        col(
            "work_ns",
            Values::U64(|a| match a {
                Work { work_ns, .. } => Some(*work_ns),
                Wait { .. } => Some(0),
            }),
        ),
        nullable(
            "from_pid",
            Values::U32(|a| match a {
                Wait { from_pid, .. } => Some(*from_pid),
                Work { .. } => None,
            }),
        ),
        nullable(
            "from_tid",
            Values::U32(|a| match a {
                Wait { from_tid, .. } => Some(*from_tid),
                Work { .. } => None,
            }),
        ),
        nullable(
            "call",
            Values::Str(|a| match a {
                Wait { call, .. } => Some(call),
                Work { .. } => None,
            }),
        ),
        nullable(
            "latency_ns",
            Values::U64(|a| match a {
                Wait { latency_ns, .. } => Some(*latency_ns),
                Work { .. } => None,
            }),
        ),
    ]
}

fn arc_columns() -> Vec<Column<ArcRow>> {
    vec![
        col("arc", Values::U32(|a: &ArcRow| Some(a.arc))).distinct(),
        col("from", Values::U32(|a: &ArcRow| Some(a.from))).distinct(),
        col("to", Values::U32(|a: &ArcRow| Some(a.to))).distinct(),
        col("kind", Values::Str(|a| Some(a.kind))),
        col("pid", Values::U32(|a| Some(a.pid))),
        col("tid", Values::U32(|a| Some(a.tid))),
        nullable(
            "procedure",
            Values::Str(|a| (!a.procedure.is_empty()).then_some(&*a.procedure)),
        ),
        col("weight_ns", Values::U64(|a| Some(a.weight_ns))),
        col("early_start_ns", Values::U64(|a| Some(a.early_start))),
        col("early_finish_ns", Values::U64(|a| Some(a.early_finish))),
        nullable("late_start_ns", Values::U64(|a| a.late_start)),
        nullable("late_finish_ns", Values::U64(|a| a.late_finish)),
        nullable("total_slack_ns", Values::U64(|a| a.total_slack)),
        col("free_slack_ns", Values::U64(|a| Some(a.free_slack))),
    ]
}

fn procedure_columns() -> Vec<Column<ProcedureRow>> {
    vec![
        col("name", Values::Str(|p| Some(&p.name))),
        nullable("symbol", Values::Str(|p| p.symbol.as_deref())),
        col("cp_ns", Values::U64(|p| Some(p.cp_ns))),
        col("cp_pct", Values::F64(|p| Some(p.cp_pct))),
        col("cp_exclusive_ns", Values::U64(|p| Some(p.cp_exclusive_ns))),
        col("work_ns", Values::U64(|p| Some(p.work_ns))),
        col("work_pct", Values::F64(|p| Some(p.work_pct))),
        col("zeroing_ns", Values::U64(|p| Some(p.zeroing_ns))),
        col("zeroing_pct", Values::F64(|p| Some(p.zeroing_pct))),
        col("mbm_ns", Values::U64(|p| Some(p.mbm_ns))),
        col("mbm_exact", Values::Bool(|p| Some(p.mbm_exact))),
    ]
}

fn event_columns() -> Vec<Column<EventRow>> {
    vec![
        col("ts_ns", Values::U64(|e| Some(e.ts_ns))),
        col("cpu_time_ns", Values::U64(|e| Some(e.cpu_time_ns))),
        col("pid", Values::U32(|e| Some(e.pid))),
        col("tid", Values::U32(|e| Some(e.tid))),
        col("cpu", Values::U32(|e| Some(e.cpu))),
        col("kind", Values::Str(|e| Some(e.kind))),
        nullable("name", Values::Str(|e| e.name.as_deref())),
    ]
}

fn call_columns() -> Vec<Column<CallRow>> {
    vec![
        col("pid", Values::U32(|c| Some(c.pid))),
        col("tid", Values::U32(|c| Some(c.tid))),
        col("name", Values::Str(|c| Some(&c.name))),
        col("family", Values::Str(|c| Some(c.family))),
        col("depth", Values::U32(|c| Some(c.depth))),
        col("start_ns", Values::U64(|c| Some(c.start_ns))),
        col("end_ns", Values::U64(|c| Some(c.end_ns))),
        col(
            "duration_ns",
            Values::U64(|c| Some(c.end_ns.saturating_sub(c.start_ns))),
        ),
        nullable("peer", Values::I32(|c| c.peer)),
        nullable("tag", Values::I32(|c| c.tag)),
        nullable("bytes", Values::I64(|c| c.bytes)),
        nullable("source", Values::I32(|c| c.source)),
        nullable("received_tag", Values::I32(|c| c.received_tag)),
        nullable("received_bytes", Values::I64(|c| c.received_bytes)),
        nullable("ret", Values::I64(|c| c.ret)),
    ]
}

fn message_columns() -> Vec<Column<MessageRow>> {
    vec![
        col("from_pid", Values::U32(|m| Some(m.from_pid))),
        col("to_pid", Values::U32(|m| Some(m.to_pid))),
        nullable("bytes", Values::U64(|m| m.bytes)),
        col("send_ns", Values::U64(|m| Some(m.send_ns))),
        col("receive_ns", Values::U64(|m| Some(m.receive_ns))),
        col("latency_ns", Values::U64(|m| Some(m.latency_ns))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::parquet::file::reader::{FileReader, SerializedFileReader};

    /// A table is written a row group at a time as its rows come: two and a half row
    /// groups of messages make three row groups in the file, and every row is there.
    #[test]
    fn a_long_table_is_written_in_row_groups() {
        let path =
            std::env::temp_dir().join(format!("tracer-parquet-{}.parquet", std::process::id()));
        let file = File::create(&path).unwrap();
        let mut table = Table::new("messages", file, message_columns(), &[]).unwrap();
        let n = 2 * ROW_GROUP + ROW_GROUP / 2;
        for i in 0..n as u64 {
            table
                .push(MessageRow {
                    from_pid: 1,
                    to_pid: 2,
                    bytes: (i % 2 == 0).then_some(i),
                    send_ns: i,
                    receive_ns: i + 10,
                    latency_ns: 10,
                })
                .unwrap();
            // Never more than a row group held.
            assert!(table.rows.len() < ROW_GROUP);
        }
        assert_eq!(
            table.finish().unwrap(),
            TableWritten {
                name: "messages",
                rows: n as u64
            }
        );
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.num_row_groups(), 3);
        assert_eq!(meta.file_metadata().num_rows(), n as i64);
        assert_eq!(meta.row_group(2).num_rows(), (ROW_GROUP / 2) as i64);
        std::fs::remove_file(&path).unwrap();
    }
}
