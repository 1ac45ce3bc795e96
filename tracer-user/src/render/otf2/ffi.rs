//! The few functions of the OTF2 3.0 C library the writer calls, kept by hand (bindgen
//! is not needed for so few). Each block names the header (under /usr/include/otf2 from
//! Debian's libopen-trace-format2-dev) its declarations come from. Linked statically
//! (libopen-trace-format2.a): the `tracer` binary needs no OTF2 library at run time.

use std::ffi::{c_char, c_int, c_void};

/// `OTF2_ErrorCode` (OTF2_ErrorCodes.h): 0 is `OTF2_SUCCESS`.
pub(crate) type ErrorCode = c_int;
pub(crate) const SUCCESS: ErrorCode = 0;

/// Opaque handles (OTF2_Archive.h, OTF2_EvtWriter.h, OTF2_DefWriter.h,
/// OTF2_GlobalDefWriter.h, OTF2_AttributeList.h, OTF2_IdMap.h).
#[repr(C)]
pub(crate) struct Archive {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct EvtWriter {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct DefWriter {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct GlobalDefWriter {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct AttributeList {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct IdMap {
    _private: [u8; 0],
}

// OTF2_GeneralDefinitions.h
pub(crate) const FILEMODE_WRITE: u8 = 0;
pub(crate) const SUBSTRATE_POSIX: u8 = 1;
pub(crate) const COMPRESSION_NONE: u8 = 1;
pub(crate) const FLUSH: u8 = 1;
pub(crate) const TYPE_UINT64: u8 = 4;
pub(crate) const UNDEFINED_UINT32: u32 = u32::MAX;
pub(crate) const MAPPING_COMM: u8 = 6;
// OTF2_IdMap.h
pub(crate) const ID_MAP_SPARSE: u8 = 1;
// OTF2_Archive.h
pub(crate) const CHUNK_SIZE_EVENTS_DEFAULT: u64 = 1024 * 1024;
pub(crate) const CHUNK_SIZE_DEFINITIONS_DEFAULT: u64 = 4 * 1024 * 1024;
// OTF2_Definitions.h
pub(crate) const LOCATION_GROUP_TYPE_PROCESS: u8 = 1;
pub(crate) const LOCATION_TYPE_CPU_THREAD: u8 = 1;
pub(crate) const REGION_FLAG_NONE: u32 = 0;
pub(crate) const GROUP_TYPE_COMM_LOCATIONS: u8 = 4;
pub(crate) const GROUP_TYPE_COMM_GROUP: u8 = 5;
pub(crate) const GROUP_FLAG_NONE: u32 = 0;
pub(crate) const COMM_FLAG_NONE: u32 = 0;
pub(crate) const METRIC_TYPE_OTHER: u8 = 0;
pub(crate) const METRIC_ACCUMULATED_START: u8 = 0;
pub(crate) const BASE_DECIMAL: u8 = 1;
pub(crate) const METRIC_ASYNCHRONOUS: u8 = 2;
pub(crate) const RECORDER_KIND_ABSTRACT: u8 = 1;

/// `OTF2_PreFlushCallback` and `OTF2_PostFlushCallback` (OTF2_Callbacks.h).
pub(crate) type PreFlush = extern "C" fn(*mut c_void, u8, u64, *mut c_void, bool) -> u8;
pub(crate) type PostFlush = Option<extern "C" fn(*mut c_void, u8, u64) -> u64>;

/// `OTF2_FlushCallbacks` (OTF2_Callbacks.h).
#[repr(C)]
pub(crate) struct FlushCallbacks {
    pub pre_flush: PreFlush,
    pub post_flush: PostFlush,
}

/// `OTF2_MetricValue` (OTF2_GeneralDefinitions.h): a union of 8 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union MetricValue {
    pub unsigned_int: u64,
}

#[link(name = "open-trace-format2", kind = "static")]
extern "C" {
    // OTF2_Archive.h
    pub(crate) fn OTF2_Archive_Open(
        path: *const c_char,
        name: *const c_char,
        mode: u8,
        chunk_events: u64,
        chunk_defs: u64,
        substrate: u8,
        compression: u8,
    ) -> *mut Archive;
    pub(crate) fn OTF2_Archive_Close(archive: *mut Archive) -> ErrorCode;
    pub(crate) fn OTF2_Archive_SetFlushCallbacks(
        archive: *mut Archive,
        callbacks: *const FlushCallbacks,
        data: *mut c_void,
    ) -> ErrorCode;
    pub(crate) fn OTF2_Archive_SetSerialCollectiveCallbacks(archive: *mut Archive) -> ErrorCode;
    pub(crate) fn OTF2_Archive_SetCreator(
        archive: *mut Archive,
        creator: *const c_char,
    ) -> ErrorCode;
    pub(crate) fn OTF2_Archive_SetDescription(
        archive: *mut Archive,
        text: *const c_char,
    ) -> ErrorCode;
    pub(crate) fn OTF2_Archive_OpenEvtFiles(archive: *mut Archive) -> ErrorCode;
    pub(crate) fn OTF2_Archive_CloseEvtFiles(archive: *mut Archive) -> ErrorCode;
    pub(crate) fn OTF2_Archive_OpenDefFiles(archive: *mut Archive) -> ErrorCode;
    pub(crate) fn OTF2_Archive_CloseDefFiles(archive: *mut Archive) -> ErrorCode;
    pub(crate) fn OTF2_Archive_GetEvtWriter(archive: *mut Archive, location: u64)
        -> *mut EvtWriter;
    pub(crate) fn OTF2_Archive_CloseEvtWriter(
        archive: *mut Archive,
        w: *mut EvtWriter,
    ) -> ErrorCode;
    pub(crate) fn OTF2_Archive_GetDefWriter(archive: *mut Archive, location: u64)
        -> *mut DefWriter;
    pub(crate) fn OTF2_Archive_CloseDefWriter(
        archive: *mut Archive,
        w: *mut DefWriter,
    ) -> ErrorCode;
    pub(crate) fn OTF2_Archive_GetGlobalDefWriter(archive: *mut Archive) -> *mut GlobalDefWriter;

    // OTF2_DefWriter.h
    pub(crate) fn OTF2_DefWriter_WriteMappingTable(
        w: *mut DefWriter,
        kind: u8,
        map: *const IdMap,
    ) -> ErrorCode;

    // OTF2_IdMap.h
    pub(crate) fn OTF2_IdMap_Create(mode: u8, capacity: u64) -> *mut IdMap;
    pub(crate) fn OTF2_IdMap_AddIdPair(map: *mut IdMap, local: u64, global: u64) -> ErrorCode;
    pub(crate) fn OTF2_IdMap_Free(map: *mut IdMap);

    // OTF2_GlobalDefWriter.h
    pub(crate) fn OTF2_GlobalDefWriter_WriteClockProperties(
        w: *mut GlobalDefWriter,
        resolution: u64,
        offset: u64,
        length: u64,
        realtime: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteString(
        w: *mut GlobalDefWriter,
        id: u32,
        s: *const c_char,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteSystemTreeNode(
        w: *mut GlobalDefWriter,
        id: u32,
        name: u32,
        class_name: u32,
        parent: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteLocationGroup(
        w: *mut GlobalDefWriter,
        id: u32,
        name: u32,
        kind: u8,
        parent: u32,
        creating: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteLocation(
        w: *mut GlobalDefWriter,
        id: u64,
        name: u32,
        kind: u8,
        events: u64,
        group: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteRegion(
        w: *mut GlobalDefWriter,
        id: u32,
        name: u32,
        canonical: u32,
        description: u32,
        role: u8,
        paradigm: u8,
        flags: u32,
        file: u32,
        begin_line: u32,
        end_line: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteGroup(
        w: *mut GlobalDefWriter,
        id: u32,
        name: u32,
        kind: u8,
        paradigm: u8,
        flags: u32,
        count: u32,
        members: *const u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteComm(
        w: *mut GlobalDefWriter,
        id: u32,
        name: u32,
        group: u32,
        parent: u32,
        flags: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteMetricMember(
        w: *mut GlobalDefWriter,
        id: u32,
        name: u32,
        description: u32,
        kind: u8,
        mode: u8,
        value_type: u8,
        base: u8,
        exponent: i64,
        unit: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteMetricClass(
        w: *mut GlobalDefWriter,
        id: u32,
        count: u8,
        members: *const u32,
        occurrence: u8,
        recorder: u8,
    ) -> ErrorCode;

    // OTF2_EvtWriter.h
    pub(crate) fn OTF2_EvtWriter_Enter(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        region: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_Leave(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        region: u32,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiSend(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        receiver: u32,
        comm: u32,
        tag: u32,
        length: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiIsend(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        receiver: u32,
        comm: u32,
        tag: u32,
        length: u64,
        request: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiIsendComplete(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        request: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiIrecvRequest(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        request: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiRecv(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        sender: u32,
        comm: u32,
        tag: u32,
        length: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiIrecv(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        sender: u32,
        comm: u32,
        tag: u32,
        length: u64,
        request: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiCollectiveBegin(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiCollectiveEnd(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        op: u8,
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_ThreadCreate(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        contingent: u32,
        sequence: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_ThreadBegin(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        contingent: u32,
        sequence: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_ThreadEnd(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        contingent: u32,
        sequence: u64,
    ) -> ErrorCode;
    pub(crate) fn OTF2_EvtWriter_Metric(
        w: *mut EvtWriter,
        a: *mut AttributeList,
        t: u64,
        metric: u32,
        count: u8,
        types: *const u8,
        values: *const MetricValue,
    ) -> ErrorCode;
}
